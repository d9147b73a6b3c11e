// Models: Sequential naming and seeding, the MLP and CNN factories, and
// Minimize training a model end to end through the session.
#include "train/models.h"

#include <memory>
#include <random>
#include <vector>

#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/losses.h"
#include "train/initializers.h"
#include "train/optimizers.h"

namespace strata {
namespace train {
namespace {

std::vector<std::string> Names(const std::vector<Variable*>& vars) {
  std::vector<std::string> out;
  for (const Variable* v : vars) out.push_back(v->name());
  return out;
}

TEST(ModelsTest, MlpNamesShapesAndParameterCount) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
  auto model = MakeMlp({128, 64}, 10, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  auto logits = (*model)->Build(root, x);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape().DebugString(), "[?,10]");
  EXPECT_EQ(Names((*model)->variables()),
            (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                                      "dense_2/kernel", "dense_2/bias"}));
  EXPECT_EQ((*model)->num_parameters(), 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10);
  EXPECT_EQ((*model)->reads().size(), 6u);
  EXPECT_EQ((*model)->trainable_variables().size(), 6u);
}

TEST(ModelsTest, SmallCnnShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
  auto model = MakeSmallCnn(8, 8, 1, 10, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  auto logits = (*model)->Build(root, x);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape().DebugString(), "[?,10]");
  EXPECT_EQ(Names((*model)->variables()),
            (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "conv2d_1/kernel",
                                      "conv2d_1/bias", "dense/kernel", "dense/bias",
                                      "dense_1/kernel", "dense_1/bias"}));
  EXPECT_EQ((*model)->num_parameters(),
            3 * 3 * 16 + 16 + 3 * 3 * 16 * 32 + 32 + 4 * 4 * 32 * 64 + 64 + 64 * 10 + 10);
}

// The hand-built Sequential of docs/training.md.
TEST(ModelsTest, HandBuiltSequentialFromTheDocs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
  train::Sequential model(/*seed=*/1);
  model.Add<train::Reshape>(std::vector<int64_t>{8, 8, 1});
  model.Add<train::Conv2D>(train::Conv2D::Options{/*filters=*/16});
  model.Add<train::MaxPool2D>(2);
  model.Add<train::Flatten>();
  model.Add<train::Dense>(10);  // logits
  auto logits = model.Build(root, x);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape().DebugString(), "[?,10]");
  EXPECT_EQ(Names(model.variables()),
            (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"}));
  EXPECT_EQ(model.layers()[3]->name(), "flatten");
  // Unseeded layers get seed + index.
  EXPECT_EQ(model.layers()[1]->seed(), 2);
}

TEST(ModelsTest, FactoriesRejectBadSizes) {
  EXPECT_EQ(MakeMlp({128, 0}, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeMlp({16}, 1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSmallCnn(1, 8, 1, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  Sequential empty;
  Scope root = Scope::NewRootScope();
  EXPECT_FALSE(empty.Build(root, ops::Placeholder(root, DT_FLOAT)).ok());
}

TEST(ModelsTest, BuildingTwiceSharesTheWeights) {
  Scope root = Scope::NewRootScope();
  auto model = MakeMlp({8}, 3, 1);
  ASSERT_TRUE(model.ok());
  Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT, PartialTensorShape({-1, 4}));
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, PartialTensorShape({-1, 4}));
  auto la = (*model)->Build(root, a);
  auto lb = (*model)->Build(root, b);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(GlobalVariables(root).size(), 4u);
  Node* init = GlobalVariablesInitializer(root);
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  Tensor in(DT_FLOAT, TensorShape{2, 4});
  for (int i = 0; i < 8; ++i) in.data<float>()[i] = 0.25f * i - 1;
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({{"a", in}, {"b", in}}, {la->name(), lb->name()}, {}, &out).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], out[1].data<float>()[i]);
}

// Three Gaussian blobs in 2-D: Minimize with Adam separates them.
TEST(ModelsTest, MinimizeTrainsAnMlp) {
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
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 2}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  auto model = MakeMlp({16}, 3, 7);
  ASSERT_TRUE(model.ok());
  auto logits = (*model)->Build(root, x);
  ASSERT_TRUE(logits.ok()) << logits.status();
  Output loss = SparseSoftmaxCrossEntropy(root, y, *logits);
  Output acc = Accuracy(root, y, *logits);
  Adam adam(0.05);
  auto train_op = Minimize(root, loss, (*model)->reads(), &adam);
  ASSERT_TRUE(train_op.ok()) << train_op.status();
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  for (int step = 0; step < 100; ++step) {
    ASSERT_TRUE((*session)->Run({{"x", xs}, {"y", ys}}, {loss.name()}, {(*train_op)->name()}, &out).ok());
  }
  ASSERT_TRUE((*session)->Run({{"x", xs}, {"y", ys}}, {loss.name(), acc.name()}, {}, &out).ok());
  EXPECT_LT(*out[0].data<float>(), 0.1f);
  EXPECT_GE(*out[1].data<float>(), 0.98f);
  // One plan for the step, one for the evaluation, one for the initializer.
  EXPECT_EQ((*session)->num_plans_built(), 3);
}

TEST(ModelsTest, MinimizeSumsTheGradientsOfEveryReadOfAVariable) {
  // loss = sum(3 w) + sum(w^2), the penalty on a read of its own:
  // d loss / d w = 3 + 2 w = 5 at w = 1, so one SGD step of 0.1 gives 0.5
  // (0.7 if the penalty's read were lost).
  Scope root = Scope::NewRootScope();
  Variable* w = CreateVariable(root, "w", TensorShape{1}, DT_FLOAT, Ones());
  Output read = w->Read(root);
  Output data_term = ops::Sum(root, ops::Mul(root, read, ops::Const(root, 3.0f)), ops::Const(root, 0));
  Output penalty = ops::Sum(root, ops::Square(root, w->Read(root)), ops::Const(root, 0));
  Output loss = ops::Add(root, data_term, penalty);
  // Only the data term's read is handed over, as model->reads() would.
  const std::vector<VariableRead> reads = {{w, read}};
  SGD sgd(0.1);
  auto train_op = Minimize(root, loss, reads, &sgd);
  ASSERT_TRUE(train_op.ok()) << train_op.status();
  Output after = w->Read(root.WithOpName("w_after"));
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  ASSERT_TRUE((*session)->Run({}, {}, {(*train_op)->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {after.name()}, {}, &out).ok());
  EXPECT_FLOAT_EQ(*out[0].data<float>(), 0.5f);
}

TEST(ModelsTest, MinimizeRefusesALossReadingATrainableVariableItDoesNotUpdate) {
  Scope root = Scope::NewRootScope();
  Variable* a = CreateVariable(root, "a", TensorShape{}, DT_FLOAT, Ones());
  Variable* b = CreateVariable(root, "b", TensorShape{}, DT_FLOAT, Ones());
  Output read_a = a->Read(root);
  Output read_b = b->Read(root.WithOpName("b_read"));
  Output loss = ops::Mul(root, read_a, read_b);
  SGD sgd(0.1);
  auto train_op = Minimize(root, loss, {{a, read_a}}, &sgd);
  ASSERT_FALSE(train_op.ok());
  EXPECT_EQ(train_op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(train_op.status().message().find("'b_read'"), std::string::npos) << train_op.status();
  EXPECT_NE(train_op.status().message().find("'b'"), std::string::npos) << train_op.status();
  // Both handed over, or b not trainable: fine.
  EXPECT_TRUE(Minimize(root, loss, {{a, read_a}, {b, read_b}}, &sgd).ok());
  Variable* c = CreateVariable(root, "c", TensorShape{}, DT_FLOAT, Ones(), /*trainable=*/false);
  Output loss_c = ops::Mul(root, read_a, c->Read(root));
  EXPECT_TRUE(Minimize(root, loss_c, {{a, read_a}}, &sgd).ok());
}

TEST(ModelsTest, MinimizeWithoutAListTrainsEveryTrainableVariableTheLossReads) {
  // loss = sum(3 a) + sum(b^2) + c; c is not trainable, d is not read.
  Scope root = Scope::NewRootScope();
  Variable* a = CreateVariable(root, "a", TensorShape{1}, DT_FLOAT, Ones());
  Variable* b = CreateVariable(root, "b", TensorShape{1}, DT_FLOAT, Ones());
  Variable* c = CreateVariable(root, "c", TensorShape{}, DT_FLOAT, Ones(), /*trainable=*/false);
  Variable* d = CreateVariable(root, "d", TensorShape{}, DT_FLOAT, Ones());
  Output loss = ops::Add(
      root,
      ops::Add(root, ops::Sum(root, ops::Mul(root, a->Read(root), ops::Const(root, 3.0f)), ops::Const(root, 0)),
               ops::Sum(root, ops::Square(root, b->Read(root)), ops::Const(root, 0))),
      c->Read(root));
  SGD sgd(0.1);
  auto train_op = Minimize(root, loss, &sgd);
  ASSERT_TRUE(train_op.ok()) << train_op.status();
  Output after_a = a->Read(root.WithOpName("a_after"));
  Output after_b = b->Read(root.WithOpName("b_after"));
  Output after_d = d->Read(root.WithOpName("d_after"));
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  ASSERT_TRUE((*session)->Run({}, {}, {(*train_op)->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {after_a.name(), after_b.name(), after_d.name()}, {}, &out).ok());
  EXPECT_FLOAT_EQ(*out[0].data<float>(), 0.7f);  // 1 - 0.1 * 3
  EXPECT_FLOAT_EQ(*out[1].data<float>(), 0.8f);  // 1 - 0.1 * 2
  EXPECT_FLOAT_EQ(*out[2].data<float>(), 1.0f);  // not read: untouched
  Scope other = Scope::NewRootScope();
  EXPECT_EQ(Minimize(other, ops::Const(other, 1.0f), &sgd).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelsTest, MinimizeRejectsNothingToTrain) {
  Scope root = Scope::NewRootScope();
  SGD sgd(0.1);
  Output loss = ops::Const(root, 1.0f);
  auto s = Minimize(root, loss, {}, &sgd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Minimize(root, Output(), {}, &sgd).ok());
}

}  // namespace
}  // namespace train
}  // namespace strata
