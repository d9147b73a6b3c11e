// Dynamic loss scaling (train::LossScaleOptions) under every strategy: a
// step whose gradients hold an Inf on any one replica is skipped on every
// replica (weights, step counter unchanged) and halves the scale; finite
// steps apply the unscaled mean gradient and double the scale after
// growth_steps of them in a row. Under ZeRO stage 1 each replica checks only
// its shard of the gradients, and the check is combined over the replicas.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/initializers.h"

namespace strata {
namespace distribute {
namespace {

void RunSkipsExactlyTheNonFiniteSteps(Strategy& s, const std::string& what) {
  SCOPED_TRACE(what);
  const int n = s.num_replicas_in_sync();
  Scope root = Scope::NewRootScope();
  train::Variable* w = nullptr;
  {
    StrategyScope in_scope = s.Scope();
    w = train::CreateVariable(root, "w", TensorShape{5}, DT_FLOAT, train::Zeros());
  }
  ASSERT_NE(w, nullptr);
  DistributedOptimizer<train::SGD> sgd(1.0);
  train::LossScaleOptions o;
  o.initial_scale = 8;
  o.growth_steps = 3;
  sgd.set_loss_scale(o);
  std::vector<std::string> feeds(n);
  auto result = s.Run(
      root, [&](ReplicaContext& ctx, const std::vector<Output>&) -> absl::StatusOr<ReplicaResult> {
        Output g = ops::Placeholder(ctx.scope().WithOpName("g"), DT_FLOAT, PartialTensorShape({5}));
        feeds[ctx.replica_id()] = g.name();
        Node* op = sgd.ApplyGradients(ctx.scope(), {{g, w}});
        STRATA_RETURN_IF_ERROR(ctx.scope().status());
        return ReplicaResult{{}, {op}};
      });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_NE(sgd.loss_scale(), nullptr);
  std::vector<std::string> reads;
  for (int r = 0; r < n; ++r) reads.push_back(w->replica(r)->Read(root).name());
  reads.push_back(sgd.iterations()->Read(root).name());
  reads.push_back(sgd.loss_scale()->Read(root).name());
  reads.push_back(sgd.good_steps()->Read(root).name());
  Node* init = train::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = *Session::Create(root, s.session_options());
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());

  // Each replica feeds scale * (1, 2, 3, 4, 5), so the unscaled mean is
  // (1, ..., 5); on the poisoned steps replica n-1 has an Inf (or a NaN).
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Step {
    float poison;  // 0: none
    float scale_after;
    int64_t good_after;
  };
  const std::vector<Step> steps = {{0, 8, 1}, {inf, 4, 0}, {0, 4, 1},    {0, 4, 2},
                                   {0, 8, 0}, {nan, 4, 0}, {-inf, 2, 0}, {0, 2, 1}};
  float scale = 8;
  int64_t applied = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<std::pair<std::string, Tensor>> in;
    for (int r = 0; r < n; ++r) {
      std::vector<float> g = {scale, 2 * scale, 3 * scale, 4 * scale, 5 * scale};
      if (steps[k].poison != 0 && r == n - 1) g[2] = steps[k].poison;
      in.push_back({feeds[r], Tensor::FromVector<float>(g)});
    }
    absl::Status ran = session->Run(in, {}, {result->op->name()}, nullptr);
    ASSERT_TRUE(ran.ok()) << "step " << k << ": " << ran;
    if (steps[k].poison == 0) ++applied;
    auto v = testing::Fetch(*session, reads);
    ASSERT_TRUE(v.ok()) << v.status();
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 5; ++i) {
        ASSERT_NEAR((*v)[r].data<float>()[i], -(i + 1.0f) * applied, 1e-5)
            << "step " << k << ", replica " << r << "'s w[" << i << "]";
      }
    }
    EXPECT_EQ(*(*v)[n].data<int64_t>(), applied) << "step " << k << ": the step counter";
    EXPECT_EQ(*(*v)[n + 1].data<float>(), steps[k].scale_after) << "step " << k;
    EXPECT_EQ(*(*v)[n + 2].data<int64_t>(), steps[k].good_after) << "step " << k;
    scale = steps[k].scale_after;
  }
}

TEST(LossScaleTest, NonFiniteStepsAreSkippedOnEveryReplica) {
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  RunSkipsExactlyTheNonFiniteSteps(*one, "one device");
  for (int replicas : {2, 3}) {
    auto m = *MirroredStrategy::Create(testing::CpuSpecs(replicas), testing::Machine(replicas));
    RunSkipsExactlyTheNonFiniteSteps(*m, absl::StrCat("mirrored x", replicas));
  }
  StrategyOptions zero;
  zero.zero_stage = 1;
  auto z = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), zero);
  // w's 5 elements are cut into blocks of 3: the Inf is in replica 0's block
  // only, so replica 1 learns of it from the combined check.
  RunSkipsExactlyTheNonFiniteSteps(*z, "zero_stage 1 x2");
}

TEST(LossScaleTest, BadOptionsAreRefusedByName) {
  Scope root = Scope::NewRootScope();
  train::SGD sgd(0.1);
  train::LossScaleOptions o;
  o.multiplier = 1;
  sgd.set_loss_scale(o);
  Output scaled = sgd.ScaleLoss(root, ops::Const(root, 1.0f));
  EXPECT_FALSE(scaled.ok());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("multiplier > 1"), std::string::npos) << root.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
