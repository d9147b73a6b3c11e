#include "train/learning_rate.h"

#include <cmath>
#include <memory>
#include <vector>

#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace train {
namespace {

// The schedule's value at each step, fed through an int64 placeholder.
std::vector<double> ValuesAt(const LearningRateSchedule& schedule,
                             const std::vector<int64_t>& steps) {
  Scope root = Scope::NewRootScope();
  Output step = ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialTensorShape({}));
  Output lr = schedule(root, step);
  EXPECT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(lr.type(), DT_DOUBLE);
  auto session = Session::Create(root);
  EXPECT_TRUE(session.ok());
  std::vector<double> out;
  for (int64_t s : steps) {
    std::vector<Tensor> t;
    EXPECT_TRUE((*session)->Run({{"step", Tensor::Scalar<int64_t>(s)}}, {lr.name()}, {}, &t).ok());
    out.push_back(*t[0].data<double>());
  }
  return out;
}

TEST(LearningRateTest, Constant) {
  EXPECT_EQ(ValuesAt(ConstantLearningRate(0.25), {0, 1000}), (std::vector<double>{0.25, 0.25}));
}

TEST(LearningRateTest, ExponentialDecay) {
  const std::vector<int64_t> steps = {0, 1, 99, 100, 150, 1000};
  auto smooth = ValuesAt(ExponentialDecay(0.1, 100, 0.5), steps);
  auto stairs = ValuesAt(ExponentialDecay(0.1, 100, 0.5, /*staircase=*/true), steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double s = static_cast<double>(steps[i]);
    EXPECT_NEAR(smooth[i], 0.1 * std::pow(0.5, s / 100), 1e-15) << steps[i];
    EXPECT_NEAR(stairs[i], 0.1 * std::pow(0.5, std::floor(s / 100)), 1e-15) << steps[i];
  }
  EXPECT_DOUBLE_EQ(stairs[2], 0.1);   // step 99: still the first stair
  EXPECT_DOUBLE_EQ(stairs[3], 0.05);  // step 100
  EXPECT_DOUBLE_EQ(stairs[5], 0.1 / 1024);
}

TEST(LearningRateTest, CosineDecay) {
  const std::vector<int64_t> steps = {0, 1, 250, 500, 731, 999, 1000, 5000};
  auto got = ValuesAt(CosineDecay(0.2, 1000, /*alpha=*/0.1), steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double p = std::min<double>(steps[i], 1000) / 1000;
    const double want = 0.2 * ((1 - 0.1) * 0.5 * (1 + std::cos(M_PI * p)) + 0.1);
    EXPECT_NEAR(got[i], want, 1e-13) << steps[i];
  }
  EXPECT_NEAR(got[0], 0.2, 1e-13);
  EXPECT_NEAR(got[3], 0.2 * (0.45 + 0.1), 1e-13);  // halfway: cos = 0
  EXPECT_NEAR(got[7], 0.2 * 0.1, 1e-13);           // past the end: alpha * lr
}

TEST(LearningRateTest, BadArgumentsAreRecorded) {
  Scope root = Scope::NewRootScope();
  Output step = ops::Placeholder(root, DT_INT32, PartialTensorShape({}));
  ExponentialDecay(0.1, 10, 0.5)(root, step);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  Scope r2 = Scope::NewRootScope();
  CosineDecay(0.1, 0)(r2, ops::Placeholder(r2, DT_INT64, PartialTensorShape({})));
  EXPECT_EQ(r2.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace train
}  // namespace strata
