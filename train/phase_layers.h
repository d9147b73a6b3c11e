// Layers that train differently from how they infer (train/phase.h decides
// which form Apply builds): Dropout and BatchNormalization, as Keras's.
//
//   train::Sequential model(/*seed=*/1);
//   model.Add<train::Dense>(64, train::Activation::kRelu);
//   model.Add<train::BatchNormalization>();
//   model.Add<train::Dropout>(0.2);
//   model.Add<train::Dense>(10);
//   // fit::Fit builds its step in the training phase and its evaluation in
//   // inference; in a loop of one's own: { train::TrainingPhase t(true); ... }
//
// Dropout(rate): in training, each element is kept with probability
// 1 - rate and scaled by 1 / (1 - rate), else zeroed; in inference, the
// input. The mask is StatelessRandomUniform (TensorFlow's bits) seeded with
// (the layer's seed, step * replicas + replica), where `step` is the layer's
// int64 state "<name>/seed_step", incremented by every training
// application: masks are the same from run to run and after a resume from a
// checkpoint (which holds the state), new each step, and different on each
// replica of a strategy. The layer's seed comes from the constructor or its
// container (train::Sequential); none at all is seed 0.
//
// BatchNormalization: y = (x - mean) / sqrt(var + epsilon) * gamma + beta
// over the last axis (features), with gamma (ones) and beta (zeros)
// trained, and the non-trained state moving_mean (zeros) and
// moving_variance (ones). In training, mean and var are the batch's (over
// every axis but the last; var biased, as Keras's), and each application
// also sets moving = moving * momentum + batch * (1 - momentum) (the
// output depends on the update, so it runs with whatever uses the output);
// in inference, the moving statistics are used and nothing is updated.
// Under a strategy with several replicas the batch statistics are the
// global batch's, all-reduced over every replica of every worker (TF's
// SyncBatchNormalization, PyTorch's SyncBatchNorm), and so is their
// gradient; with synchronized = false each replica normalizes with its own
// batch's statistics and the moving averages follow the mean of the
// replicas' statistics. Either way every replica's copy of the moving
// statistics stays identical. Statistics are computed in float32 whatever
// the dtype policy; the output has the input's dtype.
//
// Errors: InvalidArgument naming the layer for a rate outside [0, 1), a
// momentum outside [0, 1], epsilon <= 0, or an input of rank < 2 or with an
// unknown last dim (BatchNormalization).
//
// Thread-safety and ownership: as every Layer (train/layers.h).
#ifndef STRATA_TRAIN_PHASE_LAYERS_H_
#define STRATA_TRAIN_PHASE_LAYERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/layers.h"

namespace strata {
namespace train {

class Dropout : public Layer {
 public:
  explicit Dropout(double rate, std::optional<int64_t> seed = std::nullopt, std::string name = "")
      : Layer(std::move(name), seed), rate_(rate) {}
  std::string kind() const override { return "dropout"; }
  double rate() const { return rate_; }

 protected:
  bool CastsInput() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;

 private:
  const double rate_;
};

class BatchNormalization : public Layer {
 public:
  struct Options {
    double momentum = 0.99;
    double epsilon = 1e-3;
    bool synchronized = true;
  };
  BatchNormalization() : BatchNormalization(Options{}) {}
  explicit BatchNormalization(const Options& options, std::string name = "")
      : Layer(std::move(name), std::nullopt), options_(options) {}
  std::string kind() const override { return "batch_normalization"; }

 protected:
  bool CastsInput() const override { return false; }
  bool CastsWeights() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;

 private:
  // The batch's mean and (biased) variance over every axis but the last,
  // [features] each: this replica's, or the global batch's when `global`.
  absl::StatusOr<std::pair<Output, Output>> BatchMoments(const Scope& scope, Output x, bool global);
  // Assigns the moving averages from the batch's statistics; returns the
  // two assign ops.
  absl::StatusOr<std::vector<Node*>> UpdateMovingAverages(const Scope& scope, Output mean, Output var,
                                                           const std::vector<Output>& weights, bool averaged);

  const Options options_;
};

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_PHASE_LAYERS_H_
