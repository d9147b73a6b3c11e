// Strategy basics: device specs, replica tracing (names, devices, inputs,
// outputs), Reduce, and Run's errors.
#include "strategy/strategy.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/mirrored_variable.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/initializers.h"

namespace strata {
namespace distribute {
namespace {

using testing::CpuSpecs;
using testing::Machine;

std::string Cpu(int i) { return absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", i); }

TEST(StrategyDevicesTest, ResolvesTensorFlowSpecsInReplicaOrder) {
  auto s = MirroredStrategy::Create(
      {"/cpu:2", "/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"}, Machine(3));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->devices(), (std::vector<std::string>{Cpu(2), Cpu(0), Cpu(1)}));
  EXPECT_EQ((*s)->num_replicas_in_sync(), 3);
  EXPECT_EQ((*s)->session_options().devices.num_cpu_devices, 3);
}

TEST(StrategyDevicesTest, DefaultIsTheFirstCpuWithoutGpus) {
  auto s = MirroredStrategy::Create({}, Machine(4));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->devices(), std::vector<std::string>{Cpu(0)});
}

TEST(StrategyDevicesTest, UnknownDevicesAreNamed) {
  for (const std::string bad : {"/gpu:0", "/device:GPU:1", "/cpu:4", "/job:worker/cpu:0"}) {
    auto s = MirroredStrategy::Create({"/cpu:0", bad}, Machine(4));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.status().message(), absl::StrCat("'", bad, "'")))
        << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), "unknown device")) << s.status();
  }
  auto one = OneDeviceStrategy::Create("/gpu:0", Machine(1));
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StrategyDevicesTest, DuplicatesAmbiguousAndMalformedSpecsFail) {
  auto dup = MirroredStrategy::Create({"/cpu:1", "/cpu:0", "/device:CPU:1"}, Machine(2));
  ASSERT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(dup.status().message(), "'/device:CPU:1' and '/cpu:1'"))
      << dup.status();
  auto wildcard = MirroredStrategy::Create({"/device:CPU:*"}, Machine(2));
  ASSERT_EQ(wildcard.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(wildcard.status().message(), "/device:CPU:*")) << wildcard.status();
  auto malformed = MirroredStrategy::Create({"cpu0"}, Machine(2));
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StrategyRunTest, TracesEachReplicaUnderItsPrefixAndDevice) {
  auto s = *MirroredStrategy::Create(CpuSpecs(3), Machine(3));
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  for (int r = 0; r < 3; ++r) {
    xs.push_back(ops::Const(root.WithOpName(absl::StrCat("x", r)), float(r + 1)));
  }
  std::vector<int> seen;
  auto result = s->Run(
      root,
      [&](ReplicaContext& ctx, const std::vector<Output>& in) -> absl::StatusOr<ReplicaResult> {
        EXPECT_EQ(ReplicaContext::Current(), &ctx);
        EXPECT_EQ(ctx.num_replicas_in_sync(), 3);
        EXPECT_EQ(ctx.device(), Cpu(ctx.replica_id()));
        seen.push_back(ctx.replica_id());
        Output y = ops::Mul(ctx.scope().WithOpName("y"), in[0], ops::Const(ctx.scope(), 10.0f));
        return ReplicaResult{{y}, {ops::NoOp(ctx.scope())}};
      },
      {PerReplica(xs)});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReplicaContext::Current(), nullptr);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(result->values.size(), 1u);
  ASSERT_NE(result->op, nullptr);
  for (int r = 0; r < 3; ++r) {
    Node* y = result->values[0][r].node();
    EXPECT_EQ(y->name(), absl::StrCat("replica_", r, "/y"));
    EXPECT_EQ(y->requested_device(), Cpu(r));
  }
  auto session = *Session::Create(root, s->session_options());
  auto out = testing::Fetch(*session, result->values[0].names());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(*(*out)[r].data<float>(), 10.0f * (r + 1));
  EXPECT_TRUE(session->Run({}, {}, {result->op->name()}, nullptr).ok());
}

TEST(StrategyRunTest, ReduceSumsAndAveragesOnTheFirstDevice) {
  auto s = *MirroredStrategy::Create(CpuSpecs(4), Machine(4));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    return ReplicaResult{{ops::Const<float>(ctx.scope(), {float(ctx.replica_id()), 1.0f})}, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->op, nullptr);
  auto sum = s->Reduce(root, ReduceOp::kSum, result->values[0]);
  auto mean = s->Reduce(root, ReduceOp::kMean, result->values[0]);
  ASSERT_TRUE(sum.ok() && mean.ok()) << sum.status() << mean.status();
  EXPECT_EQ(sum->node()->requested_device(), Cpu(0));
  auto session = *Session::Create(root, s->session_options());
  auto out = testing::Fetch(*session, {sum->name(), mean->name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<float>()[0], 6.0f);
  EXPECT_EQ((*out)[0].data<float>()[1], 4.0f);
  EXPECT_EQ((*out)[1].data<float>()[0], 1.5f);
  EXPECT_EQ((*out)[1].data<float>()[1], 1.0f);

  // Wrong replica count; integer mean.
  EXPECT_EQ(s->Reduce(root, ReduceOp::kSum, PerReplica({*sum})).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<Output> ints;
  for (int r = 0; r < 4; ++r) ints.push_back(ops::Const(root, r));
  EXPECT_EQ(s->Reduce(root, ReduceOp::kMean, PerReplica(ints)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s->Reduce(root, ReduceOp::kSum, PerReplica(ints)).ok());
}

TEST(StrategyRunTest, ErrorsNameTheReplica) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  auto failing = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                  -> absl::StatusOr<ReplicaResult> {
    if (ctx.replica_id() == 1) return absl::InvalidArgumentError("bad step");
    return ReplicaResult{};
  });
  ASSERT_EQ(failing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(failing.status().message(), "replica 1")) << failing.status();
  EXPECT_TRUE(absl::StrContains(failing.status().message(), "bad step"));

  // Inputs need one value per replica.
  Scope root2 = Scope::NewRootScope();
  Output x = ops::Const(root2, 1.0f);
  auto wrong = s->Run(root2, [](ReplicaContext&, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> { return ReplicaResult{}; },
                      {PerReplica({x})});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);

  // Replicas returning different numbers of values.
  auto uneven = s->Run(root2, [](ReplicaContext& ctx, const std::vector<Output>&)
                                  -> absl::StatusOr<ReplicaResult> {
    ReplicaResult r;
    for (int i = 0; i <= ctx.replica_id(); ++i) r.values.push_back(ops::Const(ctx.scope(), 1.0f));
    return r;
  });
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);

  // Run inside Run.
  auto nested = s->Run(root2, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                  -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(s->Run(ctx.scope(), [](ReplicaContext&, const std::vector<Output>&)
                                                    -> absl::StatusOr<ReplicaResult> {
                             return ReplicaResult{};
                           }).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(nested.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StrategyScopeTest, VariablesUnderTwoStrategiesFail) {
  auto a = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  auto b = *OneDeviceStrategy::Create("/cpu:1", Machine(2));
  Scope root = Scope::NewRootScope();
  StrategyScope in_a = a->Scope();
  {
    StrategyScope again = a->Scope();  // re-entering one's own scope is harmless
    train::Variable* v = train::CreateVariable(root, "v", TensorShape{2}, DT_FLOAT, train::Ones());
    ASSERT_NE(v, nullptr) << root.status();
    auto* m = dynamic_cast<MirroredVariable*>(v);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->num_components(), 2);
    EXPECT_EQ(dynamic_cast<MirroredVariable*>(m->component(0)), nullptr);  // not wrapped twice
  }
  StrategyScope in_b = b->Scope();
  train::Variable* w = train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones());
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(root.status().message(), "two strategies")) << root.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
