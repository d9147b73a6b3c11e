#include "graph/ops/training_ops.h"

#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

// The handles and the listed hyperparameters must be scalars (when their
// rank is known). The gradient's shape is checked against the variable's
// value by the kernel: a handle's shape says nothing about its variable.
absl::Status ApplyShape(InferenceContext& c, std::initializer_list<int> scalars) {
  for (int i : scalars) {
    PartialTensorShape unused;
    STRATA_RETURN_IF_ERROR(c.WithRank(i, 0, &unused));
  }
  return absl::OkStatus();
}

}  // namespace

// TensorFlow's T is "numbertype"; Strata has no complex or quantized types,
// so T lists the numeric types it does have.
#define STRATA_APPLY_NUMBER_TYPES \
  "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}"

STRATA_REGISTER_OP("ResourceApplyGradientDescent")
    .Input("var: resource")
    .Input("alpha: T")
    .Input("delta: T")
    .Attr(STRATA_APPLY_NUMBER_TYPES)
    .Attr("use_locking: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {0, 1}); });

STRATA_REGISTER_OP("ResourceApplyMomentum")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Input("momentum: T")
    .Attr(STRATA_APPLY_NUMBER_TYPES)
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {0, 1, 2, 4}); });

STRATA_REGISTER_OP("ResourceApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr(STRATA_APPLY_NUMBER_TYPES)
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {0, 1, 2, 3, 4, 5, 6, 7, 8}); });

#undef STRATA_APPLY_NUMBER_TYPES

namespace ops {

Node* ResourceApplyGradientDescent(const Scope& s, Output var, Output alpha, Output delta,
                                   const ApplyAttrs& attrs) {
  return NodeBuilder(s, "ResourceApplyGradientDescent")
      .Input(var)
      .Input(alpha)
      .Input(delta)
      .Attr("use_locking", attrs.use_locking)
      .Finalize();
}

Node* ResourceApplyMomentum(const Scope& s, Output var, Output accum, Output lr, Output grad,
                            Output momentum, const ApplyAttrs& attrs) {
  return NodeBuilder(s, "ResourceApplyMomentum")
      .Input(var)
      .Input(accum)
      .Input(lr)
      .Input(grad)
      .Input(momentum)
      .Attr("use_locking", attrs.use_locking)
      .Attr("use_nesterov", attrs.use_nesterov)
      .Finalize();
}

Node* ResourceApplyAdam(const Scope& s, Output var, Output m, Output v, Output beta1_power,
                        Output beta2_power, Output lr, Output beta1, Output beta2,
                        Output epsilon, Output grad, const ApplyAttrs& attrs) {
  return NodeBuilder(s, "ResourceApplyAdam")
      .Input(var)
      .Input(m)
      .Input(v)
      .Input(beta1_power)
      .Input(beta2_power)
      .Input(lr)
      .Input(beta1)
      .Input(beta2)
      .Input(epsilon)
      .Input(grad)
      .Attr("use_locking", attrs.use_locking)
      .Attr("use_nesterov", attrs.use_nesterov)
      .Finalize();
}

}  // namespace ops
}  // namespace strata
