#include "train/losses.h"

#include <cmath>
#include <memory>
#include <vector>

#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace train {
namespace {

double Eval(const Scope& root, Output x) {
  EXPECT_TRUE(root.ok()) << root.status();
  auto s = Session::Create(root);
  EXPECT_TRUE(s.ok()) << s.status();
  std::vector<Tensor> out;
  absl::Status st = (*s)->Run({}, {x.name()}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return NAN;
  EXPECT_EQ(out[0].dims(), 0);
  return out[0].dtype() == DT_DOUBLE ? *out[0].data<double>() : *out[0].data<float>();
}

TEST(LossesTest, SparseSoftmaxCrossEntropyIsTheBatchMean) {
  const std::vector<float> logits = {1, 2, 3, 0.5f, -1, 2, 0, 0, 0};
  const std::vector<int64_t> labels = {2, 0, 1};
  Scope root = Scope::NewRootScope();
  Output loss = SparseSoftmaxCrossEntropy(root, ops::Const<int64_t>(root, {2, 0, 1}),
                                          ops::Const<float>(root, logits, TensorShape{3, 3}));
  double want = 0;
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(logits[r * 3 + c]);
    want += (std::log(z) - logits[r * 3 + labels[r]]) / 3;
  }
  EXPECT_NEAR(Eval(root, loss), want, 1e-6);
  EXPECT_EQ(loss.type(), DT_FLOAT);
}

TEST(LossesTest, MeanSquaredErrorOverEveryElement) {
  Scope root = Scope::NewRootScope();
  Output mse = MeanSquaredError(root, ops::Const<double>(root, {1, 2, 3, 4}, TensorShape{2, 2}),
                                ops::Const<double>(root, {1, 0, 3, 7}, TensorShape{2, 2}));
  EXPECT_DOUBLE_EQ(Eval(root, mse), (0 + 4 + 0 + 9) / 4.0);
}

TEST(LossesTest, Accuracy) {
  Scope root = Scope::NewRootScope();
  // Row predictions: 2, 0, 1, 1; labels 2, 0, 0, 1: three of four right.
  Output logits = ops::Const<float>(root, {0, 1, 5, 9, 1, 1, 0, 3, 2, -1, 4, 0},
                                    TensorShape{4, 3});
  Output acc = Accuracy(root, ops::Const<int32_t>(root, {2, 0, 0, 1}), logits);
  EXPECT_FLOAT_EQ(Eval(root, acc), 0.75);
  EXPECT_EQ(acc.type(), DT_FLOAT);
}

TEST(LossesTest, MismatchedInputsAreRecorded) {
  Scope root = Scope::NewRootScope();
  SparseSoftmaxCrossEntropy(root, ops::Const<int64_t>(root, {1, 2}),
                            ops::Const<float>(root, {1, 2, 3}, TensorShape{1, 3}));
  EXPECT_FALSE(root.ok());
  Scope r2 = Scope::NewRootScope();
  MeanSquaredError(r2, ops::Const<float>(r2, {1, 2}), ops::Const<double>(r2, {1, 2}));
  EXPECT_FALSE(r2.ok());
}

}  // namespace
}  // namespace train
}  // namespace strata
