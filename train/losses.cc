#include "train/losses.h"

#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"

namespace strata {
namespace train {

namespace {

// The mean of every element, whatever the rank: flatten, then reduce axis 0.
Output MeanOfAll(const Scope& s, Output x) {
  Output flat = ops::Reshape(s, x, ops::Const<int32_t>(s, {-1}));
  return ops::Mean(s, flat, ops::Const(s, int32_t{0}));
}

// Losses compute in float32: a model under a mixed policy (train/policy.h)
// gives bfloat16 outputs.
Output InFloat32(const Scope& s, Output x) {
  if (!x.ok() || x.type() == DT_FLOAT || x.type() == DT_DOUBLE) return x;
  if (x.type() != DT_BFLOAT16 && x.type() != DT_HALF) return x;
  return ops::Cast(s, x, DT_FLOAT);
}

}  // namespace

Output SparseSoftmaxCrossEntropy(const Scope& scope, Output labels, Output logits) {
  const Scope s = scope.NewSubScope("sparse_softmax_cross_entropy");
  logits = InFloat32(s, logits);
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(s, logits, labels);
  if (!xent.loss.ok()) return Output();
  return ops::Mean(s, xent.loss, ops::Const(s, int32_t{0}));
}

Output MeanSquaredError(const Scope& scope, Output y_true, Output y_pred) {
  const Scope s = scope.NewSubScope("mean_squared_error");
  y_pred = InFloat32(s, y_pred);
  y_true = InFloat32(s, y_true);
  return MeanOfAll(s, ops::Square(s, ops::Sub(s, y_pred, y_true)));
}

Output Accuracy(const Scope& scope, Output labels, Output logits) {
  const Scope s = scope.NewSubScope("accuracy");
  if (!labels.ok()) return Output();
  logits = InFloat32(s, logits);
  Output predicted = ops::ArgMax(s, logits, ops::Const(s, int32_t{1}),
                                 ops::ArgMax::Attrs().OutputType(labels.type()));
  Output correct = ops::Cast(s, ops::Equal(s, predicted, labels), DT_FLOAT);
  return ops::Mean(s, correct, ops::Const(s, int32_t{0}));
}

}  // namespace train
}  // namespace strata
