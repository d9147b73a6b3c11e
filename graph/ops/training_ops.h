// The optimizer op family: in-place updates of resource variables, with
// TensorFlow's names, inputs, attrs and update formulas (TF's
// training_ops.cc):
//
//   ResourceApplyGradientDescent(var: resource, alpha: T, delta: T)
//       var -= alpha * delta
//   ResourceApplyMomentum(var: resource, accum: resource, lr: T, grad: T, momentum: T)
//       accum = accum * momentum + grad
//       var  -= lr * accum                                  (use_nesterov = false)
//       var  -= lr * grad + lr * momentum * accum           (use_nesterov = true)
//   ResourceApplyAdam(var, m, v: resource, beta1_power, beta2_power, lr, beta1, beta2,
//                     epsilon, grad: T)
//       lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//       m   += (grad - m) * (1 - beta1)
//       v   += (grad^2 - v) * (1 - beta2)
//       var -= lr_t * m / (sqrt(v) + epsilon)               (use_nesterov = false)
//       var -= lr_t * (m * beta1 + (1 - beta1) * grad) / (sqrt(v) + epsilon)   (nesterov)
//
// attrs: T (the numeric types; CPU kernels for float and double),
// use_locking: bool = false, use_nesterov: bool = false (Momentum, Adam).
// Scalars (alpha, lr, momentum, beta*, epsilon) are rank-0; grad/delta have
// the variable's shape. The ops have no outputs and are stateful; they run on
// the variables' device (placement follows the first input, the handle).
//
//   Node* step = ops::ResourceApplyGradientDescent(root, w_handle,
//                                                  ops::Const(root, 0.1f), grad);
//
// Builders return the Node* (nullptr on error, recorded in the scope).
// Thread-safety and ownership: as for Scope (graph/scope.h).
#ifndef STRATA_GRAPH_OPS_TRAINING_OPS_H_
#define STRATA_GRAPH_OPS_TRAINING_OPS_H_

#include "graph/scope.h"

namespace strata {
namespace ops {

struct ApplyAttrs {
  ApplyAttrs UseLocking(bool v) const {
    ApplyAttrs a = *this;
    a.use_locking = v;
    return a;
  }
  ApplyAttrs UseNesterov(bool v) const {
    ApplyAttrs a = *this;
    a.use_nesterov = v;
    return a;
  }
  bool use_locking = false;
  bool use_nesterov = false;  // ignored by gradient descent
};

Node* ResourceApplyGradientDescent(const Scope& s, Output var, Output alpha, Output delta,
                                   const ApplyAttrs& attrs = {});
Node* ResourceApplyMomentum(const Scope& s, Output var, Output accum, Output lr, Output grad,
                            Output momentum, const ApplyAttrs& attrs = {});
Node* ResourceApplyAdam(const Scope& s, Output var, Output m, Output v, Output beta1_power,
                        Output beta2_power, Output lr, Output beta1, Output beta2,
                        Output epsilon, Output grad, const ApplyAttrs& attrs = {});

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_TRAINING_OPS_H_
