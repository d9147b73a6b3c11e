// The resource-variable and optimizer op families (graph/ops/state_ops.h,
// graph/ops/training_ops.h) have no gradient here. Gradients are taken with
// respect to a variable's value (the ReadVariableOp output, passed to
// AddSymbolicGradients as an input); handles are DT_RESOURCE, which carries
// no gradient, and assignments and optimizer updates are effects, not
// values a loss depends on.
#include "graph/gradients/grad_registry.h"

namespace strata {
namespace {

STRATA_NO_GRADIENT("VarHandleOp");
STRATA_NO_GRADIENT("ReadVariableOp");
STRATA_NO_GRADIENT("ResourceGather");
STRATA_NO_GRADIENT("AssignVariableOp");
STRATA_NO_GRADIENT("AssignAddVariableOp");
STRATA_NO_GRADIENT("AssignSubVariableOp");
STRATA_NO_GRADIENT("ResourceScatterAdd");
STRATA_NO_GRADIENT("ResourceScatterUpdate");
STRATA_NO_GRADIENT("ResourceScatterSub");
STRATA_NO_GRADIENT("VarIsInitializedOp");
STRATA_NO_GRADIENT("DestroyResourceOp");
STRATA_NO_GRADIENT("ResourceApplyGradientDescent");
STRATA_NO_GRADIENT("ResourceApplyMomentum");
STRATA_NO_GRADIENT("ResourceApplyAdam");

}  // namespace
}  // namespace strata
