// Acceptance for MirroredStrategy: with a fixed seed, the trainer's MLP
// trained mirrored over 1, 2 and 4 virtual CPU devices on global batch B ends
// with the weights of OneDeviceStrategy on batch B, every replica's copies
// are bitwise equal after every step's update, and the digits MLP reaches
// the same test accuracy on 4 devices as on one. The model code is the same
// for every strategy (strategy/test_util.cc, TrainMlp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/test_util.h"

namespace strata {
namespace distribute {
namespace {

// ||a - b|| / ||b|| over float tensors of one shape.
double RelativeDifference(const Tensor& a, const Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const double d = double{a.data<float>()[i]} - double{b.data<float>()[i]};
    diff += d * d;
    norm += double{b.data<float>()[i]} * b.data<float>()[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

void ExpectReplicasBitwiseEqual(const testing::TrainOutcome& out) {
  for (size_t r = 1; r < out.copies.size(); ++r) {
    for (size_t k = 0; k < out.names.size(); ++k) {
      EXPECT_TRUE(testing::SameBits(out.copies[r][k], out.copies[0][k]))
          << "replica " << r << " differs from replica 0 in " << out.names[k];
    }
  }
}

class MirroredDeterminismTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MirroredDeterminismTest, SameWeightsAsOneDeviceAfter100Steps) {
  auto data = testing::SyntheticData(1024, 128, 16, 4);
  ASSERT_TRUE(data.ok()) << data.status();
  testing::TrainConfig c;
  c.hidden = {32, 32};
  c.num_classes = 4;
  c.global_batch = 32;
  c.steps = 100;
  c.optimizer = GetParam();
  c.learning_rate = c.optimizer == "adam" ? 1e-3 : c.optimizer == "momentum" ? 0.05 : 0.1;
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto baseline = testing::TrainMlp(*one, c, *data);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  EXPECT_LT(baseline->losses.back(), 0.7 * baseline->losses.front());

  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(testing::CpuSpecs(n).back());
    auto mirrored = *MirroredStrategy::Create(testing::CpuSpecs(n), testing::Machine(n));
    auto out = testing::TrainMlp(*mirrored, c, *data);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->names, baseline->names);
    double worst = 0;
    for (size_t k = 0; k < out->names.size(); ++k) {
      const double rel = RelativeDifference(out->weights[k], baseline->weights[k]);
      EXPECT_LE(rel, 1e-5) << out->names[k] << " over " << n << " replicas";
      worst = std::max(worst, rel);
    }
    std::printf("%s, %d replicas: largest relative weight difference to one device %.3g\n",
                c.optimizer.c_str(), n, worst);
    ASSERT_EQ(out->copies.size(), static_cast<size_t>(n));
    ExpectReplicasBitwiseEqual(*out);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, MirroredDeterminismTest,
                         ::testing::Values("sgd", "momentum", "adam"));

TEST(MirroredDigitsTest, FourDevicesReachOneDevicesTestAccuracy) {
  auto digits = testing::LoadDigits();
  ASSERT_TRUE(digits.ok()) << digits.status();
  testing::TrainConfig c;
  c.hidden = {64};
  c.num_classes = 10;
  c.global_batch = 64;
  c.steps = 400;
  c.optimizer = "adam";
  c.learning_rate = 1e-3;
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto baseline = testing::TrainMlp(*one, c, *digits);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  auto mirrored = *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4));
  auto out = testing::TrainMlp(*mirrored, c, *digits);
  ASSERT_TRUE(out.ok()) << out.status();
  std::printf("digits test accuracy: one device %.4f, mirrored x4 %.4f\n", baseline->test_accuracy,
              out->test_accuracy);
  EXPECT_GE(baseline->test_accuracy, 0.93);
  EXPECT_NEAR(out->test_accuracy, baseline->test_accuracy, 0.01);
  ExpectReplicasBitwiseEqual(*out);
}

}  // namespace
}  // namespace distribute
}  // namespace strata
