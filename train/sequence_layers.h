// Layers for sequence models, in the spirit of Keras's: LayerNormalization,
// MultiHeadAttention (self-attention, optionally causal) and
// PositionEmbedding; with Dense (which applies to the last axis) they make a
// transformer block (examples/char_lm.cc). They take [batch, seq, features] with the
// sequence length and the features known when first applied (the batch may
// be unknown), and they are built from the engine's ops (BatchMatMulV2,
// Softmax, Mean, Rsqrt, ...), so their gradients come from autodiff and they
// run on every device and under every strategy those ops do.
//
//   train::Embedding tokens(vocab, 64, 1, "tokens");
//   train::PositionEmbedding positions(seq, 64, 2, "positions");
//   train::LayerNormalization norm;
//   train::MultiHeadAttention attention({.heads = 4, .key_dim = 16, .causal = true}, 3);
//   Output h = *positions.Apply(root, *tokens.Apply(root, ids));     // [batch, seq, 64]
//   h = ops::AddV2(root, h, *attention.Apply(root, *norm.Apply(root, h)));
//
// MultiHeadAttention(heads, key_dim): q, k and v are Dense projections of
// the input to heads * key_dim; scores q·kᵀ / sqrt(key_dim) per head, plus a
// mask of -1e9 above the diagonal when causal (each position attends to
// itself and earlier ones), Softmax over the keys, the weighted sum of v,
// and a Dense projection back to the input's features. Weights:
// query/kernel, query/bias, key/..., value/..., output/... (Glorot, zeros).
//
// LayerNormalization: (x - mean) / sqrt(var + epsilon) * gamma + beta over
// the last axis (Keras's default epsilon 1e-3); gamma ones, beta zeros.
//
// Errors: InvalidArgument naming the layer for an input of another rank,
// unknown sequence or feature dims, or bad sizes.
//
// Thread-safety and ownership: as every Layer (train/layers.h).
#ifndef STRATA_TRAIN_SEQUENCE_LAYERS_H_
#define STRATA_TRAIN_SEQUENCE_LAYERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/layers.h"

namespace strata {
namespace train {

class LayerNormalization : public Layer {
 public:
  explicit LayerNormalization(double epsilon = 1e-3, std::string name = "")
      : Layer(std::move(name), std::nullopt), epsilon_(epsilon) {}
  std::string kind() const override { return "layer_normalization"; }

 protected:
  // Its statistics are in float32 whatever the policy; the result in the
  // input's dtype.
  bool CastsInput() const override { return false; }
  bool CastsWeights() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;

 private:
  const double epsilon_;
};

class MultiHeadAttention : public Layer {
 public:
  struct Options {
    int64_t heads = 4;
    int64_t key_dim = 16;
    bool causal = false;
  };
  explicit MultiHeadAttention(const Options& options, std::optional<int64_t> seed = std::nullopt,
                              std::string name = "")
      : Layer(std::move(name), seed), options_(options) {}
  std::string kind() const override { return "multi_head_attention"; }

 protected:
  // Its adds, scaling and Softmax have no bfloat16 CPU kernels yet.
  bool ComputesInLowPrecision() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;

 private:
  const Options options_;
  int64_t seq_ = 0, features_ = 0;
};

// y = x + P[:seq]: a learned [max_length, features] table added to every
// example (Glorot-uniform).
class PositionEmbedding : public Layer {
 public:
  PositionEmbedding(int64_t max_length, int64_t features, std::optional<int64_t> seed = std::nullopt,
                    std::string name = "")
      : Layer(std::move(name), seed), max_length_(max_length), features_(features) {}
  std::string kind() const override { return "position_embedding"; }

 protected:
  bool ComputesInLowPrecision() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;

 private:
  const int64_t max_length_;
  const int64_t features_;
  int64_t seq_ = 0;
};

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_SEQUENCE_LAYERS_H_
