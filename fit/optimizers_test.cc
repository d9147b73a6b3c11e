#include "fit/optimizers.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace strata {
namespace fit {
namespace {

TEST(OptimizersTest, EveryNameMakesItsOptimizer) {
  for (const char* name : {"sgd", "momentum", "adam", "adamw"}) {
    auto o = MakeOptimizer(name, 0);
    ASSERT_TRUE(o.ok()) << name << ": " << o.status();
    EXPECT_GT(DefaultLearningRate(name), 0) << name;
  }
  EXPECT_EQ((*MakeOptimizer("adamw", 0.01))->name(), "AdamW");
  OptimizerOptions clip;
  clip.clip_global_norm = 2.5;
  EXPECT_EQ((*MakeOptimizer("sgd", 0.1, clip))->clip_global_norm(), 2.5);
}

TEST(OptimizersTest, BadSettingsAreRefusedByName) {
  auto unknown = MakeOptimizer("lamb", 0.1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "'lamb'")) << unknown.status();
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "adamw")) << unknown.status();
  EXPECT_FALSE(MakeOptimizer("sgd", -1).ok());
  OptimizerOptions o;
  o.weight_decay = -0.1;
  EXPECT_FALSE(MakeOptimizer("adamw", 0, o).ok());
  o = OptimizerOptions();
  o.clip_global_norm = -1;
  EXPECT_FALSE(MakeOptimizer("adam", 0, o).ok());
  o = OptimizerOptions();
  o.momentum = 1.5;
  EXPECT_FALSE(MakeOptimizer("momentum", 0, o).ok());
}

}  // namespace
}  // namespace fit
}  // namespace strata
