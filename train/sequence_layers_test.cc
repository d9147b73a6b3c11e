// Sequence layers (train/sequence_layers.h): LayerNormalization normalizes
// each position, causal attention never looks ahead, Dense applies to the
// last axis, and a small causal transformer learns a task only attention
// can solve (predict the token two positions back).
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/sequence_layers.h"

namespace strata {
namespace train {
namespace {

Tensor RandomBatch(int64_t b, int64_t s, int64_t f, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0, 2);
  Tensor t(DT_FLOAT, TensorShape{b, s, f});
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = n(rng) + 3;
  return t;
}

std::unique_ptr<Session> Init(const Scope& root) {
  const std::string init = GlobalVariablesInitializer(root)->name();
  auto s = Session::Create(root);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Run({}, {}, {init}, nullptr).ok());
  return *std::move(s);
}

TEST(SequenceLayersTest, LayerNormalizationGivesEachPositionMeanZeroAndVarianceOne) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 5, 8}));
  LayerNormalization ln(1e-3, "ln");
  auto y = ln.Apply(root, x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape().DebugString(), "[?,5,8]");
  auto s = Init(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(s->Run({{"x", RandomBatch(3, 5, 8, 1)}}, {y->name()}, {}, &out).ok());
  for (int64_t row = 0; row < 15; ++row) {
    double mean = 0, sq = 0;
    for (int j = 0; j < 8; ++j) mean += out[0].data<float>()[row * 8 + j] / 8.0;
    for (int j = 0; j < 8; ++j) sq += std::pow(out[0].data<float>()[row * 8 + j] - mean, 2) / 8.0;
    EXPECT_NEAR(mean, 0, 1e-5) << "row " << row;
    EXPECT_NEAR(sq, 1, 2e-3) << "row " << row << " (epsilon 1e-3 against a variance near 4)";
  }
  EXPECT_EQ(ln.variables().size(), 2u);
}

TEST(SequenceLayersTest, CausalAttentionDoesNotLookAhead) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 6, 8}));
  MultiHeadAttention mha({.heads = 2, .key_dim = 4, .causal = true}, 1, "mha");
  auto y = mha.Apply(root, x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape().DebugString(), "[?,6,8]");
  EXPECT_EQ(mha.variables().size(), 8u);
  auto s = Init(root);
  const Tensor a = RandomBatch(2, 6, 8, 1);
  Tensor b = RandomBatch(2, 6, 8, 1);
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t j = 0; j < 8; ++j) b.data<float>()[(e * 6 + 5) * 8 + j] += 10;  // only the last position differs
  }
  std::vector<Tensor> ya, yb;
  ASSERT_TRUE(s->Run({{"x", a}}, {y->name()}, {}, &ya).ok());
  ASSERT_TRUE(s->Run({{"x", b}}, {y->name()}, {}, &yb).ok());
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t p = 0; p < 6; ++p) {
      float diff = 0;
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t i = (e * 6 + p) * 8 + j;
        diff = std::max(diff, std::fabs(ya[0].data<float>()[i] - yb[0].data<float>()[i]));
      }
      if (p < 5) {
        EXPECT_EQ(diff, 0.0f) << "example " << e << " position " << p << " saw the last position";
      } else {
        EXPECT_GT(diff, 1e-3f) << "the last position sees itself";
      }
    }
  }
}

TEST(SequenceLayersTest, LayersRefuseInputsTheyCannotTake) {
  Scope root = Scope::NewRootScope();
  Output flat = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 8}));
  MultiHeadAttention mha({.heads = 2, .key_dim = 4}, 1, "mha");
  EXPECT_NE(mha.Apply(root, flat).status().message().find("mha"), std::string::npos);
  Output open_seq = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialTensorShape({-1, -1, 8}));
  MultiHeadAttention mha2({.heads = 2, .key_dim = 4}, 1, "mha2");
  EXPECT_NE(mha2.Apply(root, open_seq).status().message().find("seq and features known"), std::string::npos);
  PositionEmbedding pos(4, 8, 1, "pos");
  Output long_seq = ops::Placeholder(root.WithOpName("z"), DT_FLOAT, PartialTensorShape({-1, 6, 8}));
  EXPECT_NE(pos.Apply(root, long_seq).status().message().find("longer than max_length 4"), std::string::npos);
}

// Tokens 0..V-1; the label at position t is the token at t-2 (0 for t < 2):
// no single position's input tells it, attention to earlier positions does.
TEST(SequenceLayersTest, ASmallCausalTransformerLearnsToLookBack) {
  constexpr int64_t kV = 8, kSeq = 8, kD = 32, kBatch = 32;
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, PartialTensorShape({-1, kSeq}));
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, PartialTensorShape({-1}));
  Embedding tokens(kV, kD, 1, "tokens");
  PositionEmbedding positions(kSeq, kD, 2, "positions");
  LayerNormalization ln1(1e-3, "ln1"), ln2(1e-3, "ln2"), ln_out(1e-3, "ln_out");
  MultiHeadAttention attention({.heads = 4, .key_dim = 8, .causal = true}, 3, "attention");
  Dense ff1(64, Activation::kRelu, 4, "ff1"), ff2(kD, Activation::kNone, 5, "ff2"), logits_layer(kV, Activation::kNone, 6, "logits");
  Output h = *positions.Apply(root, *tokens.Apply(root, ids));
  h = ops::AddV2(root, h, *attention.Apply(root, *ln1.Apply(root, h)));
  h = ops::AddV2(root, h, *ff2.Apply(root, *ff1.Apply(root, *ln2.Apply(root, h))));
  Output logits = *logits_layer.Apply(root, *ln_out.Apply(root, h));  // [b, seq, V]
  Output flat = ops::Reshape(root, logits, ops::Const<int32_t>(root, {-1, static_cast<int32_t>(kV)}));
  Output loss = SparseSoftmaxCrossEntropy(root, labels, flat);
  Adam adam(0.01);
  auto train_op = Minimize(root, loss, &adam);
  ASSERT_TRUE(train_op.ok()) << train_op.status();
  ASSERT_TRUE(root.ok()) << root.status();
  auto s = Init(root);
  std::mt19937 rng(5);
  float first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    Tensor x(DT_INT32, TensorShape{kBatch, kSeq}), y(DT_INT32, TensorShape{kBatch * kSeq});
    for (int64_t i = 0; i < kBatch * kSeq; ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng() % kV);
    for (int64_t e = 0; e < kBatch; ++e) {
      for (int64_t t = 0; t < kSeq; ++t) y.data<int32_t>()[e * kSeq + t] = t < 2 ? 0 : x.data<int32_t>()[e * kSeq + t - 2];
    }
    std::vector<Tensor> out;
    absl::Status st = s->Run({{"ids", x}, {"labels", y}}, {loss.name()}, {(*train_op)->name()}, &out);
    ASSERT_TRUE(st.ok()) << st;
    if (step == 0) first = out[0].data<float>()[0];
    last = out[0].data<float>()[0];
  }
  // Guessing gives ln 8 = 2.08 on 6 of 8 positions; looking back, near 0.
  EXPECT_GT(first, 1.5f);
  EXPECT_LT(last, 0.3f) << "from " << first;
}

}  // namespace
}  // namespace train
}  // namespace strata
