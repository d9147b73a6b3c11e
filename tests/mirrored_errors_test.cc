// MirroredStrategy failures at run time end in a clear error, never a hang:
// a replica whose collective never runs (the step fetched only another
// replica's all-reduce) makes its partners fail with DeadlineExceeded after
// the collective timeout; replicas whose all-reduces disagree in shape at
// run time fail with InvalidArgument.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"

namespace strata {
namespace distribute {
namespace {

// Each replica all-reduces its own placeholder of unknown length.
struct AllReduceStep {
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  RunResult step;
};

std::unique_ptr<AllReduceStep> Build(Strategy& s) {
  auto b = std::make_unique<AllReduceStep>();
  for (int r = 0; r < s.num_replicas_in_sync(); ++r) {
    b->xs.push_back(ops::Placeholder(b->root.WithOpName("x" + std::to_string(r)).WithDevice(
                                         s.devices()[r]),
                                     DT_FLOAT, PartialTensorShape({-1})));
  }
  auto result = s.Run(b->root,
                      [](ReplicaContext& ctx, const std::vector<Output>& in)
                          -> absl::StatusOr<ReplicaResult> {
                        STRATA_ASSIGN_OR_RETURN(Output y,
                                                ctx.AllReduce(ctx.scope(), ReduceOp::kSum, in[0]));
                        return ReplicaResult{{y}, {}};
                      },
                      {PerReplica(b->xs)});
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) b->step = *result;
  return b;
}

TEST(MirroredErrorsTest, AllReduceSumsAcrossReplicas) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(3), testing::Machine(3));
  auto b = Build(*s);
  auto session = *Session::Create(b->root, s->session_options());
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (int r = 0; r < 3; ++r) {
    feeds.emplace_back(b->xs[r].name(), Tensor::FromVector<float>({float(r), 1}));
  }
  auto out = testing::Fetch(*session, b->step.values[0].names(), feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ((*out)[r].data<float>()[0], 3.0f);
    EXPECT_EQ((*out)[r].data<float>()[1], 3.0f);
  }
}

TEST(MirroredErrorsTest, MissingReplicaTimesOutWithDeadlineExceeded) {
  StrategyOptions o;
  o.collective_timeout_seconds = 1;
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), o);
  auto b = Build(*s);
  auto session = *Session::Create(b->root, s->session_options());
  // Only replica 0's value is fetched: replica 1's collective is pruned away.
  const auto start = std::chrono::steady_clock::now();
  auto out = testing::Fetch(*session, {b->step.values[0][0].name()},
                            {{b->xs[0].name(), Tensor::FromVector<float>({1, 2})}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_LT(seconds, 30.0);
}

TEST(MirroredErrorsTest, ShapesThatDisagreeAtRunTimeFail) {
  StrategyOptions o;
  o.collective_timeout_seconds = 10;
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), o);
  auto b = Build(*s);
  auto session = *Session::Create(b->root, s->session_options());
  auto out = testing::Fetch(*session, b->step.values[0].names(),
                            {{b->xs[0].name(), Tensor::FromVector<float>({1, 2})},
                             {b->xs[1].name(), Tensor::FromVector<float>({1, 2, 3})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
