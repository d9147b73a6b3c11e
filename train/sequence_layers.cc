#include "train/sequence_layers.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"

namespace strata {
namespace train {

namespace {

Output IntConst(const Scope& s, const std::vector<int32_t>& v) {
  return ops::Const<int32_t>(s, v, TensorShape{static_cast<int64_t>(v.size())});
}

// A float scalar in `dt`.
Output Scalar(const Scope& s, float v, DataType dt) {
  Output c = ops::Const(s, v);
  return dt == DT_FLOAT ? c : ops::Cast(s, c, dt);
}

}  // namespace

absl::Status LayerNormalization::Build(const Scope& scope, const PartialTensorShape& input) {
  if (epsilon_ <= 0) return Error(absl::StrCat("epsilon must be > 0, got ", epsilon_));
  if (input.unknown_rank() || input.dims() < 2 || input.dim_size(input.dims() - 1) < 0) {
    return Error(absl::StrCat("expects at least 2 dims with the last known, got ", input.DebugString()));
  }
  const int64_t f = input.dim_size(input.dims() - 1);
  AddWeight(scope, "gamma", TensorShape{f}, Ones());
  AddWeight(scope, "beta", TensorShape{f}, Zeros());
  return scope.status();
}

absl::StatusOr<Output> LayerNormalization::Call(const Scope& scope, Output input, const std::vector<Output>& weights) {
  // The statistics in float32 whatever the policy (as Keras), the result in
  // the compute dtype.
  const DataType compute = input.type();
  Output x = compute == DT_FLOAT ? input : ops::Cast(scope, input, DT_FLOAT);
  Output gamma = weights[0].type() == DT_FLOAT ? weights[0] : ops::Cast(scope, weights[0], DT_FLOAT);
  Output beta = weights[1].type() == DT_FLOAT ? weights[1] : ops::Cast(scope, weights[1], DT_FLOAT);
  Output axis = ops::Const(scope, static_cast<int32_t>(input.shape().dims() - 1));
  const ops::ReductionAttrs keep = ops::ReductionAttrs().KeepDims(true);
  Output mean = ops::Mean(scope, x, axis, keep);
  // d var / d mean is zero, so the variance may ignore the mean's gradient.
  Output var = ops::Mean(scope, ops::SquaredDifference(scope, x, ops::StopGradient(scope, mean)), axis, keep);
  Output inv = ops::Rsqrt(scope, ops::AddV2(scope, var, ops::Const(scope, static_cast<float>(epsilon_))));
  Output y = ops::AddV2(scope, ops::Mul(scope, ops::Mul(scope, ops::Sub(scope, x, mean), inv), gamma), beta);
  return compute == DT_FLOAT ? y : ops::Cast(scope, y, compute);
}

absl::Status MultiHeadAttention::Build(const Scope& scope, const PartialTensorShape& input) {
  const Options& o = options_;
  if (o.heads < 1 || o.key_dim < 1) {
    return Error(absl::StrCat("heads and key_dim must be >= 1, got ", o.heads, " and ", o.key_dim));
  }
  if (input.unknown_rank() || input.dims() != 3 || input.dim_size(1) < 0 || input.dim_size(2) < 0) {
    return Error(absl::StrCat("expects [batch, seq, features] with seq and features known, got ",
                              input.DebugString()));
  }
  seq_ = input.dim_size(1);
  features_ = input.dim_size(2);
  const int64_t inner = o.heads * o.key_dim;
  for (const char* p : {"query", "key", "value"}) {
    AddWeight(scope, absl::StrCat(p, "/kernel"), TensorShape{features_, inner}, /*glorot=*/true);
    AddWeight(scope, absl::StrCat(p, "/bias"), TensorShape{inner}, /*glorot=*/false);
  }
  AddWeight(scope, "output/kernel", TensorShape{inner, features_}, /*glorot=*/true);
  AddWeight(scope, "output/bias", TensorShape{features_}, /*glorot=*/false);
  return scope.status();
}

absl::StatusOr<Output> MultiHeadAttention::Call(const Scope& scope, Output input, const std::vector<Output>& w) {
  const Options& o = options_;
  const int32_t seq = static_cast<int32_t>(seq_), f = static_cast<int32_t>(features_);
  const int32_t h = static_cast<int32_t>(o.heads), dk = static_cast<int32_t>(o.key_dim);
  const DataType dt = input.type();
  Output rows = ops::Reshape(scope, input, IntConst(scope, {-1, f}));
  // [batch * seq, f] -> [batch, heads, seq, key_dim]
  auto project = [&](const char* name, const Output& kernel, const Output& bias) {
    const Scope s = scope.NewSubScope(name);
    Output p = ops::BiasAdd(s, ops::MatMul(s, rows, kernel), bias);
    return ops::Transpose(s, ops::Reshape(s, p, IntConst(s, {-1, seq, h, dk})), IntConst(s, {0, 2, 1, 3}));
  };
  Output q = project("query", w[0], w[1]);
  Output k = project("key", w[2], w[3]);
  Output v = project("value", w[4], w[5]);
  q = ops::Mul(scope, q, Scalar(scope, 1.0f / std::sqrt(static_cast<float>(dk)), dt));
  Output scores = ops::BatchMatMulV2(scope, q, k, ops::BatchMatMulV2::Attrs().AdjY(true));  // [b, h, seq, seq]
  if (o.causal) {
    std::vector<float> mask(static_cast<size_t>(seq) * seq, 0.0f);
    for (int32_t i = 0; i < seq; ++i) {
      for (int32_t j = i + 1; j < seq; ++j) mask[static_cast<size_t>(i) * seq + j] = -1e9f;
    }
    Output m = ops::Const<float>(scope.WithOpName("causal_mask"), mask, TensorShape{seq, seq});
    scores = ops::AddV2(scope, scores, dt == DT_FLOAT ? m : ops::Cast(scope, m, dt));
  }
  Output probs = ops::Softmax(scope, scores);
  Output context = ops::BatchMatMulV2(scope, probs, v);  // [b, h, seq, dk]
  context = ops::Reshape(scope, ops::Transpose(scope, context, IntConst(scope, {0, 2, 1, 3})),
                         IntConst(scope, {-1, h * dk}));
  const Scope out = scope.NewSubScope("output");
  Output y = ops::BiasAdd(out, ops::MatMul(out, context, w[6]), w[7]);
  return ops::Reshape(out, y, IntConst(out, {-1, seq, f}));
}

absl::Status PositionEmbedding::Build(const Scope& scope, const PartialTensorShape& input) {
  if (max_length_ < 1 || features_ < 1) {
    return Error(absl::StrCat("max_length and features must be >= 1, got ", max_length_, " and ", features_));
  }
  if (input.unknown_rank() || input.dims() != 3 || input.dim_size(1) < 0 || input.dim_size(2) != features_) {
    return Error(absl::StrCat("expects [batch, seq, ", features_, "] with seq known, got ", input.DebugString()));
  }
  seq_ = input.dim_size(1);
  if (seq_ > max_length_) return Error(absl::StrCat("seq ", seq_, " is longer than max_length ", max_length_));
  AddWeight(scope, "embeddings", TensorShape{max_length_, features_}, /*glorot=*/true);
  return scope.status();
}

absl::StatusOr<Output> PositionEmbedding::Call(const Scope& scope, Output input, const std::vector<Output>& w) {
  Output table = w[0];
  if (seq_ < max_length_) {
    std::vector<int32_t> first(static_cast<size_t>(seq_));
    for (int32_t i = 0; i < seq_; ++i) first[static_cast<size_t>(i)] = i;
    table = ops::GatherV2(scope, table, IntConst(scope, first), ops::Const(scope, 0));
  }
  return ops::AddV2(scope, input, table);
}

}  // namespace train
}  // namespace strata
