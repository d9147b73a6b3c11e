// Models: a Sequential container of layers (train/layers.h), the two
// classifiers the trainer offers (an MLP and a small LeNet-like CNN), and
// Minimize, which adds the gradients of a loss and an optimizer's update.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
//   Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Sequential> model,
//                           MakeMlp({128, 64}, /*num_classes=*/10, /*seed=*/1));
//   STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(root, x));
//   Output loss = SparseSoftmaxCrossEntropy(root, y, logits);     // train/losses.h
//   Adam adam(1e-3);                                              // train/optimizers.h
//   STRATA_ASSIGN_OR_RETURN(Node* train_op, Minimize(root, loss, model->reads(), &adam));
//   Node* init = GlobalVariablesInitializer(root);                // after Minimize: slots too
//
// Sequential names the layers it was given without a name after their kind,
// Keras-style ("dense", "dense_1", "conv2d", ...), and seeds the layers given
// no seed with seed + index, so the model's initial weights are a function
// of its seed. Build applies the layers in order; it may be called again
// (e.g. once per replica, or for an evaluation graph) and reuses the
// weights.
//
// Thread-safety: build with one thread (as for Scope). Ownership: the
// Sequential owns its layers; variables belong to the graph (see layers.h).
#ifndef STRATA_TRAIN_MODELS_H_
#define STRATA_TRAIN_MODELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "train/layers.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace train {

class Sequential {
 public:
  explicit Sequential(int64_t seed = 0) : seed_(seed) {}
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  // Appends a layer (before the first Build); returns it for convenience.
  Layer* Add(std::unique_ptr<Layer> layer);
  template <typename L, typename... Args>
  L* Add(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L* raw = layer.get();
    Add(std::move(layer));
    return raw;
  }

  // The output of the last layer (the logits for a classifier). Errors name
  // the layer; InvalidArgument if the model has no layers.
  absl::StatusOr<Output> Build(const Scope& scope, Output input);
  // Layers [begin, end) only, applied in order (named and seeded as by
  // Build): a part of the model, such as a pipeline stage
  // (strategy/pipeline.h). InvalidArgument for an empty or out-of-range span.
  absl::StatusOr<Output> BuildLayers(const Scope& scope, Output input, int begin, int end);

  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Every layer's weights, in layer order (empty before the first Build).
  std::vector<Variable*> variables() const;
  std::vector<Variable*> trainable_variables() const;
  // The reads of the latest Build, in layer order: what Minimize needs.
  std::vector<VariableRead> reads() const;
  // Total number of weight elements.
  int64_t num_parameters() const;

 private:
  const int64_t seed_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

// Dense layers of `hidden` units with ReLU, then a Dense of `num_classes`
// units without activation (the logits). InvalidArgument if a size is < 1
// or num_classes < 2.
absl::StatusOr<std::unique_ptr<Sequential>> MakeMlp(const std::vector<int64_t>& hidden,
                                                    int64_t num_classes, int64_t seed);

// A LeNet-like CNN for small images fed as flat [batch, rows*cols*channels]
// rows: Reshape to [rows, cols, channels] -> Conv 3x3x16 ReLU (SAME) ->
// MaxPool 2 -> Conv 3x3x32 ReLU (SAME) -> Flatten -> Dense 64 ReLU -> Dense
// num_classes. For 8x8x1 digits: 8x8x16 -> 4x4x16 -> 4x4x32 -> 512 -> 64 -> 10.
// InvalidArgument if rows or cols < 2, channels < 1 or num_classes < 2.
// Options add a BatchNormalization after each convolution and a Dropout
// before the last Dense (train/phase_layers.h).
struct SmallCnnOptions {
  bool batch_norm = false;
  double dropout = 0;  // the rate; 0: no Dropout layer
};
absl::StatusOr<std::unique_ptr<Sequential>> MakeSmallCnn(int64_t rows, int64_t cols,
                                                         int64_t channels, int64_t num_classes,
                                                         int64_t seed, const SmallCnnOptions& options = {});

// Adds the gradient of `loss` for every trainable variable read in `reads`
// and `optimizer`'s update of those variables; returns the train op. A
// variable's gradient sums over every read of it the loss depends on (a
// penalty written on its own Read() counts), not only the read in `reads`.
// Reads of variables that are not trainable are left alone; a trainable
// variable the loss does not reach gets a zero gradient. Errors: the
// gradient's or the optimizer's; InvalidArgument if `loss` is null, nothing
// is trainable, or the loss depends on a read of a trainable variable that
// is not in `reads` (naming the read: it would never be updated). A sparse
// read (VariableRead::indices: an embedding lookup into a partitioned
// table) gives its variable a SparseGradient of the rows it read.
absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss,
                               const std::vector<VariableRead>& reads, Optimizer* optimizer);

// The same for every trainable variable of the graph that the loss reads
// (Keras's trainable_variables): no list to keep, a partitioned variable's
// partitions read whole or by rows (its lookups) included. InvalidArgument
// if the loss reads none.
absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss, Optimizer* optimizer);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_MODELS_H_
