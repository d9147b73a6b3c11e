// Losses and metrics as graph ops, in Keras's conventions (a scalar mean
// over the batch).
//
//   Output logits = ...;                                   // [batch, classes]
//   Output labels = ops::Placeholder(root, DT_INT64, PartialTensorShape({-1}));
//   Output loss = SparseSoftmaxCrossEntropy(root, labels, logits);
//   Output acc = Accuracy(root, labels, logits);
//   Output mse = MeanSquaredError(root, y_true, y_pred);
//
// Errors (mismatched dtypes or shapes) are recorded in the scope and the
// returned Output is null, as for every builder function.
// Thread-safety and ownership: as for Scope (graph/scope.h).
#ifndef STRATA_TRAIN_LOSSES_H_
#define STRATA_TRAIN_LOSSES_H_

#include "graph/scope.h"

namespace strata {
namespace train {

// mean over the batch of -log softmax(logits)[label]:
// SparseSoftmaxCrossEntropyWithLogits + Mean. `labels` [batch] int32/int64,
// `logits` [batch, classes] float/double; the result has the logits' dtype.
Output SparseSoftmaxCrossEntropy(const Scope& scope, Output labels, Output logits);

// mean over every element of (y_pred - y_true)^2 (same dtype; shapes
// broadcast).
Output MeanSquaredError(const Scope& scope, Output y_true, Output y_pred);

// The fraction of rows whose largest logit is at the label: ArgMax + Equal +
// Cast + Mean. A float scalar.
Output Accuracy(const Scope& scope, Output labels, Output logits);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_LOSSES_H_
