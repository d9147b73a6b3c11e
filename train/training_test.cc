// End-to-end training with automatic differentiation (graph/gradients):
// the loss's gradients with respect to the variables' reads go to an
// optimizer, and the session runs the train op until the loss is ~0.
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "graph/gradients/gradients.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace train {
namespace {

// y = 3x + 2 from 64 points in [-1, 1], fitted by SGD on the mean squared error.
TEST(TrainingTest, LinearRegressionWithSgdReachesZeroLoss) {
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i) {
    const float x = -1.0f + 2.0f * i / 63;
    xs.push_back(x);
    ys.push_back(3 * x + 2);
  }
  Scope root = Scope::NewRootScope();
  Output x = ops::Const<float>(root, xs, TensorShape{64, 1});
  Output y = ops::Const<float>(root, ys, TensorShape{64, 1});
  Variable* w = CreateVariable(root, "w", TensorShape{1, 1}, DT_FLOAT, GlorotUniform(1));
  Variable* b = CreateVariable(root, "b", TensorShape{1}, DT_FLOAT, Zeros());
  Output w_read = w->Read(root), b_read = b->Read(root);
  Output pred = ops::AddV2(root, ops::MatMul(root, x, w_read), b_read);
  Output loss = MeanSquaredError(root, y, pred);
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {w_read, b_read}, &grads).ok());
  SGD sgd(0.3);
  Node* train = sgd.ApplyGradients(root, {{grads[0], w}, {grads[1], b}});
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {loss.name()}, {}, &out).ok());
  const float initial = *out[0].data<float>();
  for (int step = 0; step < 300; ++step) {
    ASSERT_TRUE((*session)->Run({}, {}, {train->name()}, nullptr).ok());
  }
  ASSERT_TRUE((*session)->Run({}, {loss.name(), w_read.name(), b_read.name()}, {}, &out).ok());
  EXPECT_GT(initial, 1.0f);
  EXPECT_LT(*out[0].data<float>(), 1e-8f);
  EXPECT_NEAR(*out[1].data<float>(), 3.0f, 1e-4);
  EXPECT_NEAR(*out[2].data<float>(), 2.0f, 1e-4);
}

// Two Gaussian blobs, a softmax classifier trained by Adam on the sparse
// cross-entropy; it separates them.
TEST(TrainingTest, SoftmaxClassifierWithAdamSeparatesTwoBlobs) {
  std::mt19937 gen(5);
  std::normal_distribution<float> noise(0, 0.3f);
  std::vector<float> xs;
  std::vector<int32_t> labels;
  for (int i = 0; i < 100; ++i) {
    const int c = i % 2;
    xs.push_back((c ? 1.0f : -1.0f) + noise(gen));
    xs.push_back((c ? -1.0f : 1.0f) + noise(gen));
    labels.push_back(c);
  }
  Scope root = Scope::NewRootScope();
  Output x = ops::Const<float>(root, xs, TensorShape{100, 2});
  Output y = ops::Const<int32_t>(root, labels, TensorShape{100});
  Variable* w = CreateVariable(root, "w", TensorShape{2, 2}, DT_FLOAT, GlorotUniform(2));
  Variable* b = CreateVariable(root, "b", TensorShape{2}, DT_FLOAT, Zeros());
  Output w_read = w->Read(root), b_read = b->Read(root);
  Output logits = ops::BiasAdd(root, ops::MatMul(root, x, w_read), b_read);
  Output loss = SparseSoftmaxCrossEntropy(root, y, logits);
  Output acc = Accuracy(root, y, logits);
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {w_read, b_read}, &grads).ok());
  Adam adam(0.05);
  Node* train = adam.ApplyGradients(root, {{grads[0], w}, {grads[1], b}});
  Node* init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  auto session = Session::Create(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}, nullptr).ok());
  for (int step = 0; step < 200; ++step) {
    ASSERT_TRUE((*session)->Run({}, {}, {train->name()}, nullptr).ok());
  }
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {loss.name(), acc.name()}, {}, &out).ok());
  EXPECT_LT(*out[0].data<float>(), 0.05f);
  EXPECT_EQ(*out[1].data<float>(), 1.0f);
}

}  // namespace
}  // namespace train
}  // namespace strata
