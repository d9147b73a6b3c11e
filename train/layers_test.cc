// Layers: output shapes, weight names and shapes, seeded initial values,
// reuse of weights across applications, the creator hook, and errors.
#include "train/layers.h"

#include <cmath>
#include <memory>
#include <vector>

#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace train {
namespace {

Output FloatInput(const Scope& root, const PartialTensorShape& shape) {
  return ops::Placeholder(root.WithOpName("x"), DT_FLOAT, shape);
}

TEST(LayersTest, DenseShapesNamesAndGlorotRange) {
  Scope root = Scope::NewRootScope();
  Output x = FloatInput(root, PartialTensorShape({-1, 6}));
  Dense dense(4, Activation::kRelu, /*seed=*/3, "hidden");
  absl::StatusOr<Output> y = dense.Apply(root, x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape().DebugString(), "[?,4]");
  ASSERT_EQ(dense.variables().size(), 2u);
  EXPECT_EQ(dense.variables()[0]->name(), "hidden/kernel");
  EXPECT_EQ(dense.variables()[0]->shape(), (TensorShape{6, 4}));
  EXPECT_EQ(dense.variables()[1]->name(), "hidden/bias");
  EXPECT_EQ(dense.variables()[1]->shape(), (TensorShape{4}));
  ASSERT_EQ(dense.reads().size(), 2u);

  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)
                  ->Run({}, {dense.reads()[0].value.name(), dense.reads()[1].value.name()}, {}, &out)
                  .ok());
  const float limit = std::sqrt(6.0f / (6 + 4));
  bool any_nonzero = false;
  for (int i = 0; i < 24; ++i) {
    const float w = out[0].data<float>()[i];
    EXPECT_LE(std::fabs(w), limit);
    any_nonzero |= w != 0;
  }
  EXPECT_TRUE(any_nonzero);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[1].data<float>()[i], 0.0f);

  // ReLU: a fed batch gives non-negative outputs.
  Tensor batch(DT_FLOAT, TensorShape{3, 6});
  for (int i = 0; i < 18; ++i) batch.data<float>()[i] = (i % 5) - 2.0f;
  ASSERT_TRUE((*session)->Run({{"x", batch}}, {y->name()}, {}, &out).ok());
  ASSERT_EQ(out[0].shape(), (TensorShape{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_GE(out[0].data<float>()[i], 0.0f);
}

// Same seed, same initial weights; another seed, other weights.
TEST(LayersTest, GeluActivationsMatchTheirFormulas) {
  // The same seed gives the same weights: gelu(Dense(kNone)(x)) computed
  // here against Dense(kGelu)(x) and Dense(kGeluTanh)(x).
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 4}));
  Dense plain(6, Activation::kNone, 3, "plain"), exact(6, Activation::kGelu, 3, "exact"),
      approx(6, Activation::kGeluTanh, 3, "approx");
  Output p = *plain.Apply(root, x), e = *exact.Apply(root, x), a = *approx.Apply(root, x);
  const std::string init = GlobalVariablesInitializer(root)->name();
  auto s = Session::Create(root);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Run({}, {}, {init}, nullptr).ok());
  Tensor in(DT_FLOAT, TensorShape{5, 4});
  for (int64_t i = 0; i < in.NumElements(); ++i) in.data<float>()[i] = 0.7f * static_cast<float>(i % 9) - 2.5f;
  std::vector<Tensor> out;
  ASSERT_TRUE((*s)->Run({{"x", in}}, {p.name(), e.name(), a.name()}, {}, &out).ok());
  for (int64_t i = 0; i < out[0].NumElements(); ++i) {
    const double v = out[0].data<float>()[i];
    const double exact_gelu = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double tanh_gelu = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(out[1].data<float>()[i], exact_gelu, 1e-5) << i;
    EXPECT_NEAR(out[2].data<float>()[i], tanh_gelu, 1e-5) << i;
  }
}

TEST(LayersTest, SeedDeterminesInitialWeights) {
  auto initial_kernel = [](int64_t seed) {
    Scope root = Scope::NewRootScope();
    Dense dense(5, Activation::kNone, seed);
    auto y = dense.Apply(root, FloatInput(root, PartialTensorShape({-1, 7})));
    EXPECT_TRUE(y.ok()) << y.status();
    Node* init = GlobalVariablesInitializer(root);
    auto session = Session::Create(root);
    EXPECT_TRUE(session.ok());
    std::vector<Tensor> out;
    EXPECT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
    EXPECT_TRUE((*session)->Run({}, {dense.reads()[0].value.name()}, {}, &out).ok());
    return std::vector<float>(out[0].data<float>(), out[0].data<float>() + 35);
  };
  EXPECT_EQ(initial_kernel(11), initial_kernel(11));
  EXPECT_NE(initial_kernel(11), initial_kernel(12));
}

TEST(LayersTest, SecondApplicationReusesWeights) {
  Scope root = Scope::NewRootScope();
  Dense dense(3, Activation::kNone, 1);
  Output x = FloatInput(root, PartialTensorShape({-1, 2}));
  ASSERT_TRUE(dense.Apply(root, x).ok());
  const std::vector<Variable*> first = dense.variables();
  const Output first_read = dense.reads()[0].value;
  ASSERT_TRUE(dense.Apply(root, x).ok());
  EXPECT_EQ(dense.variables(), first);
  EXPECT_NE(dense.reads()[0].value.node(), first_read.node());
  EXPECT_EQ(GlobalVariables(root).size(), 2u);
  // A different feature count cannot reuse the weights.
  absl::StatusOr<Output> bad = dense.Apply(root, FloatInput(root.NewSubScope("b"), PartialTensorShape({-1, 9})));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("dense"), std::string::npos) << bad.status();
}

TEST(LayersTest, ConvPoolFlattenShapes) {
  Scope root = Scope::NewRootScope();
  Output x = FloatInput(root, PartialTensorShape({-1, 64}));
  Reshape reshape({8, 8, 1});
  Conv2D::Options o;
  o.filters = 16;
  Conv2D conv(o, 1);
  MaxPool2D pool(2);
  o.filters = 32;
  o.stride = 2;
  o.padding = PaddingMode::kValid;
  Conv2D conv2(o, 2, "conv_b");
  Flatten flatten;
  auto h = reshape.Apply(root, x);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->shape().DebugString(), "[?,8,8,1]");
  h = conv.Apply(root, *h);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->shape().DebugString(), "[?,8,8,16]");
  EXPECT_EQ(conv.variables()[0]->shape(), (TensorShape{3, 3, 1, 16}));
  h = pool.Apply(root, *h);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->shape().DebugString(), "[?,4,4,16]");
  EXPECT_TRUE(pool.variables().empty());
  h = conv2.Apply(root, *h);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->shape().DebugString(), "[?,1,1,32]");
  EXPECT_EQ(conv2.variables()[0]->name(), "conv_b/kernel");
  h = flatten.Apply(root, *h);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->shape().DebugString(), "[?,32]");
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(LayersTest, ErrorsNameTheLayer) {
  Scope root = Scope::NewRootScope();
  Dense zero(0, Activation::kNone, 1, "zero_units");
  auto s = zero.Apply(root, FloatInput(root, PartialTensorShape({-1, 3})));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("zero_units"), std::string::npos) << s.status();

  Dense unknown(4);
  s = unknown.Apply(root, ops::Placeholder(root.WithOpName("u"), DT_FLOAT, PartialTensorShape({-1, -1})));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("known features"), std::string::npos) << s.status();

  Conv2D::Options o;
  Conv2D conv(o);
  s = conv.Apply(root, FloatInput(root.NewSubScope("c"), PartialTensorShape({-1, 3})));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("conv2d"), std::string::npos) << s.status();

  Reshape reshape({5, 5});
  s = reshape.Apply(root, FloatInput(root.NewSubScope("r"), PartialTensorShape({-1, 24})));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cannot reshape"), std::string::npos) << s.status();

  Flatten flatten;
  s = flatten.Apply(root, Output());
  ASSERT_FALSE(s.ok());
  // None of this poisoned the scope: layer errors are returned, not recorded.
  EXPECT_TRUE(root.ok()) << root.status();
}

// Variables go through the creator hook, so a strategy can change them.
TEST(LayersTest, VariablesGoThroughTheCreatorHook) {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> seen;
  VariableCreatorScope hook([&seen](const Scope& s, const VariableArgs& a,
                                    const VariableCreatorFn& next) {
    seen.push_back(a.name);
    return next(s, a);
  });
  Dense dense(2, Activation::kNone, 1);
  ASSERT_TRUE(dense.Apply(root, FloatInput(root, PartialTensorShape({-1, 3}))).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"dense/kernel", "dense/bias"}));
}

TEST(LayersTest, ALayerBuiltInOneGraphRefusesAnother) {
  Dense dense(2);
  Scope a = Scope::NewRootScope();
  ASSERT_TRUE(dense.Apply(a, ops::Placeholder(a, DT_FLOAT, PartialTensorShape({-1, 3}))).ok());
  Scope b = Scope::NewRootScope();
  absl::StatusOr<Output> again = dense.Apply(b, ops::Placeholder(b, DT_FLOAT, PartialTensorShape({-1, 3})));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("was built in another graph"), std::string::npos) << again.status();
  EXPECT_NE(again.status().message().find("'dense'"), std::string::npos) << again.status();
}

TEST(LayersTest, EmbeddingLooksUpRowsAndTrainsOnlyThem) {
  Scope root = Scope::NewRootScope();
  Embedding emb(/*vocabulary=*/5, /*dim=*/3, /*seed=*/1);
  Output ids = ops::Const<int32_t>(root, {0, 4, 2, 2}, TensorShape{2, 2});
  absl::StatusOr<Output> y = emb.Apply(root, ids);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape().DebugString(), "[2,2,3]");
  ASSERT_EQ(emb.variables().size(), 1u);
  EXPECT_EQ(emb.variables()[0]->name(), "embedding/embeddings");
  // loss = sum(y): each looked-up row gets 1 per lookup (row 2 twice).
  Output loss = ops::Sum(root, ops::Reshape(root, *y, ops::Const(root, {-1})), ops::Const(root, 0));
  SGD sgd(1.0);
  auto train = Minimize(root, loss, &sgd);
  ASSERT_TRUE(train.ok()) << train.status();
  Output before = emb.variables()[0]->Read(root.WithOpName("e"));
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {before.name()}, {}, &out).ok());
  const Tensor e0 = out[0];
  ASSERT_TRUE((*session)->Run({}, {}, {(*train)->name()}, nullptr).ok());
  ASSERT_TRUE((*session)->Run({}, {before.name()}, {}, &out).ok());
  const float lookups[5] = {1, 0, 2, 0, 1};
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_FLOAT_EQ(out[0].data<float>()[r * 3 + c], e0.data<float>()[r * 3 + c] - lookups[r]) << r;
    }
  }
  // Float input is refused, naming the layer.
  Embedding other(5, 3);
  absl::StatusOr<Output> bad = other.Apply(root, ops::Const(root, 1.0f));
  EXPECT_NE(bad.status().message().find("int32 or int64 ids"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace train
}  // namespace strata
