// Mixed precision (train/policy.h) on the CPU: layers under mixed_bfloat16
// keep float32 variables, compute in bfloat16 and train as float32 does,
// within bfloat16's rounding.
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/policy.h"
#include "train/sequence_layers.h"

namespace strata {
namespace train {
namespace {

// Sets the global policy for one test and puts float32 back.
class WithPolicy {
 public:
  explicit WithPolicy(const std::string& name) { SetGlobalPolicy(*PolicyFromName(name)); }
  ~WithPolicy() { SetGlobalPolicy(Policy()); }
};

TEST(MixedPrecisionTest, PolicyNames) {
  EXPECT_EQ(PolicyFromName("float32")->compute_dtype, DT_FLOAT);
  auto mixed = PolicyFromName("mixed_bfloat16");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->compute_dtype, DT_BFLOAT16);
  EXPECT_EQ(mixed->variable_dtype, DT_FLOAT);
  EXPECT_TRUE(mixed->mixed());
  auto half = PolicyFromName("mixed_float16");
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->compute_dtype, DT_HALF);
  EXPECT_EQ(half->variable_dtype, DT_FLOAT);
  EXPECT_NE(PolicyFromName("float64").status().message().find("mixed_bfloat16"), std::string::npos);
  EXPECT_EQ(GlobalPolicy().name, "float32");
}

int CountOps(const Graph& g, const std::string& op, DataType t) {
  int n = 0;
  for (const Node* node : g.nodes()) {
    auto it = node->def().attr().find("T");
    if (node->type_string() == op && it != node->def().attr().end() && it->second.type() == t) ++n;
  }
  return n;
}

struct Trained {
  float loss = NAN, accuracy = NAN;
  int bf16_matmuls = 0, float_matmuls = 0, bf16_bias_grads = 0, bf16_relu_grads = 0;
  bool loss_scaling = false;
};

// Three Gaussian blobs; trains an MLP 100 Adam steps.
Trained TrainBlobs(const std::string& policy) {
  std::mt19937 gen(3);
  std::normal_distribution<float> noise(0, 0.25f);
  const float centers[3][2] = {{1, 0}, {-1, 1}, {-1, -1}};
  Tensor xs(DT_FLOAT, TensorShape{150, 2});
  Tensor ys(DT_INT32, TensorShape{150});
  for (int i = 0; i < 150; ++i) {
    const int c = i % 3;
    xs.data<float>()[2 * i] = centers[c][0] + noise(gen);
    xs.data<float>()[2 * i + 1] = centers[c][1] + noise(gen);
    ys.data<int32_t>()[i] = c;
  }
  WithPolicy p(policy);
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 2}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  auto model = MakeMlp({16}, 3, 7);
  EXPECT_TRUE(model.ok());
  auto logits = (*model)->Build(root, x);
  EXPECT_TRUE(logits.ok()) << logits.status();
  const DataType low = policy == "mixed_float16" ? DT_HALF : DT_BFLOAT16;
  EXPECT_EQ(logits->type(), policy == "float32" ? DT_FLOAT : low);
  for (const Variable* v : (*model)->variables()) EXPECT_EQ(v->dtype(), DT_FLOAT) << v->name();
  Output loss = SparseSoftmaxCrossEntropy(root, y, *logits);
  EXPECT_EQ(loss.type(), DT_FLOAT);
  Output acc = Accuracy(root, y, *logits);
  Adam adam(0.05);
  auto train_op = Minimize(root, loss, (*model)->reads(), &adam);
  EXPECT_TRUE(train_op.ok()) << train_op.status();
  Node* init = GlobalVariablesInitializer(root);
  EXPECT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  EXPECT_TRUE(session.ok()) << session.status();
  EXPECT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  for (int step = 0; step < 100; ++step) {
    absl::Status s = (*session)->Run({{"x", xs}, {"y", ys}}, {loss.name()}, {(*train_op)->name()}, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return Trained();
  }
  EXPECT_TRUE((*session)->Run({{"x", xs}, {"y", ys}}, {loss.name(), acc.name()}, {}, &out).ok());
  Trained t;
  t.loss = *out[0].data<float>();
  t.accuracy = *out[1].data<float>();
  t.bf16_matmuls = CountOps(*root.graph(), "MatMul", low);
  t.float_matmuls = CountOps(*root.graph(), "MatMul", DT_FLOAT);
  t.bf16_bias_grads = CountOps(*root.graph(), "BiasAddGrad", low);
  t.bf16_relu_grads = CountOps(*root.graph(), "ReluGrad", low);
  t.loss_scaling = adam.loss_scaling();
  return t;
}

TEST(MixedPrecisionTest, AnMlpUnderMixedBfloat16ComputesInBfloat16AndTrainsAsFloat32Does) {
  const Trained f32 = TrainBlobs("float32");
  const Trained mixed = TrainBlobs("mixed_bfloat16");
  EXPECT_EQ(f32.bf16_matmuls, 0);
  EXPECT_GE(mixed.bf16_matmuls, 2 + 3) << "both forward products and their gradients (x's is not needed)";
  EXPECT_EQ(mixed.float_matmuls, 0);
  EXPECT_EQ(mixed.bf16_bias_grads, 2);
  EXPECT_EQ(mixed.bf16_relu_grads, 1);
  EXPECT_LT(f32.loss, 0.1f);
  EXPECT_LT(mixed.loss, 0.12f);
  EXPECT_NEAR(mixed.loss, f32.loss, 0.03f);
  EXPECT_GE(mixed.accuracy, 0.97f);
}

// Under mixed_float16 the layers compute in float16 and Minimize turns on
// dynamic loss scaling; the model trains as in float32.
TEST(MixedPrecisionTest, AnMlpUnderMixedFloat16ScalesItsLossAndTrainsAsFloat32Does) {
  const Trained f32 = TrainBlobs("float32");
  const Trained half = TrainBlobs("mixed_float16");
  EXPECT_FALSE(f32.loss_scaling);
  EXPECT_TRUE(half.loss_scaling);
  EXPECT_GE(half.bf16_matmuls, 2 + 3);  // float16 here
  EXPECT_EQ(half.float_matmuls, 0);
  EXPECT_LT(half.loss, 0.12f);
  EXPECT_NEAR(half.loss, f32.loss, 0.03f);
  EXPECT_GE(half.accuracy, 0.97f);
}

// Convolutions and pooling compute in the narrow dtype too (their CPU
// kernels run the float ones, kernels/cpu/low_precision_kernels.cc); a layer
// without narrow kernels refuses a mixed policy, naming itself.
TEST(MixedPrecisionTest, ConvolutionsComputeNarrowAndALayerWithoutKernelsRefuses) {
  WithPolicy p("mixed_bfloat16");
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 8, 8, 1}));
  Conv2D conv(Conv2D::Options{.filters = 4}, 1, "conv");
  auto c = conv.Apply(root, x);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->type(), DT_BFLOAT16);
  MaxPool2D pool;
  auto pooled = pool.Apply(root, *c);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  EXPECT_EQ(pooled->type(), DT_BFLOAT16);
  Flatten flat;
  Dense dense(3, Activation::kNone, 2, "dense");
  auto d = dense.Apply(root, *flat.Apply(root, *pooled));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type(), DT_BFLOAT16);

  Output seq = ops::Placeholder(root.WithOpName("seq"), DT_FLOAT, PartialTensorShape({-1, 4, 8}));
  MultiHeadAttention attention(MultiHeadAttention::Options{.heads = 2, .key_dim = 4}, 1, "attention");
  auto a = attention.Apply(root, seq);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("attention"), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find("float32 policy"), std::string::npos) << a.status();
}

TEST(MixedPrecisionTest, AnEmbeddingKeepsItsTableAndCastsTheRowsItLooksUp) {
  WithPolicy p("mixed_bfloat16");
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, PartialTensorShape({-1}));
  Embedding emb(50, 4, 1, "emb");
  auto rows = emb.Apply(root, ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->type(), DT_BFLOAT16);
  EXPECT_EQ(emb.reads()[0].value.type(), DT_FLOAT) << "the table is read in float32, not cast whole";
  int float_gathers = 0;
  for (const Node* n : root.graph()->nodes()) {
    if (n->type_string() == "GatherV2" && n->output_type(0) == DT_FLOAT) ++float_gathers;
  }
  EXPECT_EQ(float_gathers, 1);
}

}  // namespace
}  // namespace train
}  // namespace strata
