// Gradients of the core op family (graph/ops/core_ops.h) and the random op
// family (graph/ops/random_ops.h): Identity passes dL/dy through; constants,
// feeds, the runtime's internal ops and random draws have no gradient.
#include "graph/gradients/grad_registry.h"

namespace strata {
namespace {

absl::Status IdentityGrad(const Scope& s, const Node&, const OutputList& g, OutputList* out) {
  out->push_back(g[0]);
  return s.status();
}

STRATA_REGISTER_GRADIENT("Identity", IdentityGrad);

STRATA_NO_GRADIENT("Const");
STRATA_NO_GRADIENT("Placeholder");
STRATA_NO_GRADIENT("NoOp");
STRATA_NO_GRADIENT("_Arg");
STRATA_NO_GRADIENT("_Retval");
STRATA_NO_GRADIENT("_DeviceArg");
STRATA_NO_GRADIENT("_DeviceRetval");
STRATA_NO_GRADIENT("_Send");
STRATA_NO_GRADIENT("_Recv");

STRATA_NO_GRADIENT("RandomUniform");
STRATA_NO_GRADIENT("_RandomRange");
STRATA_NO_GRADIENT("RandomStandardNormal");
STRATA_NO_GRADIENT("TruncatedNormal");
STRATA_NO_GRADIENT("StatelessRandomUniform");

}  // namespace
}  // namespace strata
