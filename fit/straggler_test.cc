#include "fit/straggler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace fit {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kNames = {"w0", "w1", "w2"};
const std::vector<double> kNoCpuWait = {0, 0, 0};

TEST(StragglerDetectorTest, NamesTheWorkerTheOthersWaitFor) {
  StragglerDetector d(3, 10);
  std::optional<std::string> r;
  for (int i = 0; i < 10; ++i) {
    // w1 arrives last: it waits 1 ms, the others 40 ms, of a 100 ms step.
    std::optional<std::string> got = d.Add({0.041, 0.001, 0.040}, kNoCpuWait, 0.1, kNames);
    if (i < 9) {
      EXPECT_FALSE(got.has_value());
    }
    r = got;
  }
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(*r, HasSubstr("straggler: w1 holds the others up"));
  EXPECT_THAT(*r, HasSubstr("late by 40.0 ms per step (40% of the step; it waited 0.0 ms for a "
                            "CPU) in 10 of the last 10 steps"));
}

TEST(StragglerDetectorTest, NamesAWorkerStarvedOfCpuWhenEveryoneWaitsAlike) {
  // Collectives need every worker's CPU: all wait 20 ms in them, but w0
  // waited 30 ms for a CPU.
  StragglerDetector d(2, 10);
  std::optional<std::string> r;
  for (int i = 0; i < 10; ++i) r = d.Add({0.020, 0.020}, {0.030, 0.001}, 0.1, kNames);
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(*r, HasSubstr("straggler: w0"));
  EXPECT_THAT(*r, HasSubstr("it waited 30.0 ms for a CPU"));
}

TEST(StragglerDetectorTest, EvenWorkersAndSmallGapsAreNotReported) {
  StragglerDetector d(2, 10);
  for (int i = 0; i < 30; ++i) {
    // Alternating who waits: nobody is consistently last.
    EXPECT_FALSE(d.Add(i % 2 ? std::vector<double>{0.02, 0.0} : std::vector<double>{0.0, 0.02},
                       kNoCpuWait, 0.1, kNames)
                     .has_value());
  }
  StragglerDetector small(2, 10);
  for (int i = 0; i < 10; ++i) {
    // w1 always last but by 3% of the step: noise, not a straggler.
    EXPECT_FALSE(small.Add({0.003, 0.0}, {0.0, 0.0}, 0.1, kNames).has_value());
  }
  // One worker, bad input: nothing.
  StragglerDetector one(1, 1);
  EXPECT_FALSE(one.Add({0.5}, {0.0}, 1, kNames).has_value());
  StragglerDetector bad(2, 1);
  EXPECT_FALSE(bad.Add({0.5}, {0.0, 0.0}, 1, kNames).has_value());
  EXPECT_FALSE(bad.Add({0.5, 0.0}, {0.0}, 1, kNames).has_value());
  EXPECT_FALSE(bad.Add({0.5, 0.0}, {0.0, 0.0}, 0, kNames).has_value());
}

TEST(StragglerDetectorTest, MostButNotAllStepsSuffice) {
  StragglerDetector d(2, 10);
  std::optional<std::string> r;
  for (int i = 0; i < 10; ++i) {
    r = d.Add(i < 8 ? std::vector<double>{0.03, 0.0} : std::vector<double>{0.0, 0.0}, {0.0, 0.0},
              0.1, kNames);
  }
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(*r, HasSubstr("straggler: w1"));
  EXPECT_THAT(*r, HasSubstr("in 8 of the last 10 steps"));
}

}  // namespace
}  // namespace fit
}  // namespace strata
