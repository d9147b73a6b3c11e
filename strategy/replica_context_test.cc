// ReplicaContext::AllReduce: the collective nodes it makes (one per replica,
// shared group and instance keys handed out in trace order), the
// single-replica identity, and Run's check that replicas made the same
// collectives.
#include "strategy/replica_context.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/test_util.h"

namespace strata {
namespace distribute {
namespace {

using testing::CpuSpecs;
using testing::Machine;

// The int32 value of the Const feeding input `i` of `n`.
int ConstInput(const Node* n, int i) {
  const Node* c = n->input_edge(i)->src;
  EXPECT_TRUE(c->IsOp("Const")) << c->DebugString();
  Tensor t;
  EXPECT_TRUE(GetAttr(c->attrs(), "value", &t).ok());
  return *t.data<int32_t>();
}

std::string StringAttr(const Node* n, const std::string& name) {
  std::string v;
  EXPECT_TRUE(GetAttr(n->attrs(), name, &v).ok()) << name;
  return v;
}

float FloatAttr(const Node* n, const std::string& name) {
  float v = 0;
  EXPECT_TRUE(GetAttr(n->attrs(), name, &v).ok()) << name;
  return v;
}

TEST(ReplicaContextTest, AllReduceMakesOneCollectivePerReplicaWithSharedKeys) {
  StrategyOptions o;
  o.communication_hint = "ring";
  o.collective_timeout_seconds = 5;
  auto s = *MirroredStrategy::Create(CpuSpecs(3), Machine(3), o);
  Scope root = Scope::NewRootScope();
  auto step = [](ReplicaContext& ctx, const std::vector<Output>&) -> absl::StatusOr<ReplicaResult> {
    Output a = ops::Const<float>(ctx.scope(), {1, 2});
    Output b = ops::Const(ctx.scope(), 3.0);
    STRATA_ASSIGN_OR_RETURN(std::vector<Output> mean, ctx.AllReduce(ctx.scope(), ReduceOp::kMean, {a, b}));
    STRATA_ASSIGN_OR_RETURN(Output sum, ctx.AllReduce(ctx.scope(), ReduceOp::kSum, a));
    return ReplicaResult{{mean[0], mean[1], sum}, {}};
  };
  auto first = s->Run(root, step);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = s->Run(root, step);
  ASSERT_TRUE(second.ok()) << second.status();
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) {
      const Node* n = first->values[k][r].node();
      ASSERT_TRUE(n->IsOp("CollectiveReduceV2")) << n->DebugString();
      EXPECT_EQ(n->requested_device(), s->devices()[r]);
      EXPECT_EQ(ConstInput(n, 1), 3);                            // group_size
      EXPECT_EQ(ConstInput(n, 2), s->collective_group_key());    // group_key
      EXPECT_EQ(ConstInput(n, 3), 1 + k);                        // instance_key, trace order
      EXPECT_EQ(ConstInput(second->values[k][r].node(), 3), 4 + k);  // the next Run goes on
      EXPECT_EQ(StringAttr(n, "merge_op"), "Add");
      EXPECT_EQ(StringAttr(n, "final_op"), k < 2 ? "Div" : "Id");
      EXPECT_EQ(StringAttr(n, "communication_hint"), "ring");
      EXPECT_EQ(FloatAttr(n, "timeout_seconds"), 5.0f);
    }
  }
  // Another strategy has another group.
  auto other = *MirroredStrategy::Create(CpuSpecs(3), Machine(3));
  EXPECT_NE(other->collective_group_key(), s->collective_group_key());
}

// ReduceScatter and AllGather run end to end on 3 replicas: each replica
// gets its block of the mean, and gathering the blocks back gives the whole
// mean on every replica, as ZeRO's reduce-scatter then all-gather does.
TEST(ReplicaContextTest, ReduceScatterThenAllGatherIsTheAllReduce) {
  auto s = *MirroredStrategy::Create(CpuSpecs(3), Machine(3));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    // Replica r: [6, 2] of r * 100 + i.
    std::vector<float> x(12);
    for (int i = 0; i < 12; ++i) x[i] = float(ctx.replica_id() * 100 + i);
    Output v = ops::Const<float>(ctx.scope(), x, TensorShape{6, 2});
    STRATA_ASSIGN_OR_RETURN(Output block, ctx.ReduceScatter(ctx.scope(), ReduceOp::kMean, v));
    STRATA_ASSIGN_OR_RETURN(Output whole, ctx.AllGather(ctx.scope(), block));
    EXPECT_EQ(ctx.collective_rank(), ctx.replica_id());
    return ReplicaResult{{block, whole}, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->values[0][1].node()->IsOp("CollectiveReduceScatterV2"));
  EXPECT_EQ(result->values[0][1].shape().DebugString(), PartialTensorShape({2, 2}).DebugString());
  auto session = *Session::Create(root, s->session_options());
  std::vector<std::string> names = result->values[0].names();
  for (const std::string& n : result->values[1].names()) names.push_back(n);
  auto out = testing::Fetch(*session, names);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int r = 0; r < 3; ++r) {
    const Tensor& block = (*out)[r];
    const Tensor& whole = (*out)[3 + r];
    ASSERT_EQ(block.shape(), TensorShape({2, 2}));
    ASSERT_EQ(whole.shape(), TensorShape({6, 2}));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(block.data<float>()[i], 100.0f + 4 * r + i);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(whole.data<float>()[i], 100.0f + i);
  }
  // A dimension 0 that does not split, and a scalar, are refused at trace.
  Scope other = Scope::NewRootScope();
  auto bad = s->Run(other, [](ReplicaContext& ctx, const std::vector<Output>&)
                               -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(
        ctx.ReduceScatter(ctx.scope(), ReduceOp::kSum, ops::Const<float>(ctx.scope(), {1, 2})).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "3 replicas' equal blocks")) << bad.status();
  Scope third = Scope::NewRootScope();
  bad = s->Run(third, [](ReplicaContext& ctx, const std::vector<Output>&) -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(ctx.AllGather(ctx.scope(), ops::Const(ctx.scope(), 1.0f)).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "scalar")) << bad.status();
}

TEST(ReplicaContextTest, OneReplicaNeedsNoCollective) {
  auto s = *OneDeviceStrategy::Create("/cpu:0", Machine(1));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output y, ctx.AllReduce(ctx.scope(), ReduceOp::kMean,
                                                    ops::Const<float>(ctx.scope(), {4, 6})));
    return ReplicaResult{{y}, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->values[0][0].node()->IsOp("Identity"));
  auto session = *Session::Create(root, s->session_options());
  auto out = testing::Fetch(*session, result->values[0].names());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<float>()[1], 6.0f);
}

TEST(ReplicaContextTest, ReplicasMakingDifferentCollectivesFailAtTrace) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  // Replica 1 makes one all-reduce more.
  auto extra = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                -> absl::StatusOr<ReplicaResult> {
    for (int i = 0; i <= ctx.replica_id(); ++i) {
      STRATA_RETURN_IF_ERROR(
          ctx.AllReduce(ctx.scope(), ReduceOp::kSum, ops::Const(ctx.scope(), 1.0f)).status());
    }
    return ReplicaResult{};
  });
  ASSERT_EQ(extra.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(extra.status().message(), "replica 1 made 2 collectives"))
      << extra.status();
  // Same count, different shapes.
  auto shapes = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    std::vector<float> v(ctx.replica_id() + 1, 1.0f);
    STRATA_RETURN_IF_ERROR(ctx.AllReduce(ctx.scope(), ReduceOp::kSum,
                                         ops::Const(ctx.scope(), v, TensorShape{int64_t(v.size())}))
                               .status());
    return ReplicaResult{};
  });
  ASSERT_EQ(shapes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(shapes.status().message(), "[1]")) << shapes.status();
  EXPECT_TRUE(absl::StrContains(shapes.status().message(), "[2]")) << shapes.status();
}

TEST(ReplicaContextTest, BadValuesAreRejected) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  auto null_value = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                     -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(ctx.AllReduce(ctx.scope(), ReduceOp::kSum, Output()).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(null_value.status().code(), absl::StatusCode::kInvalidArgument);
  auto int_mean = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                   -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(
        ctx.AllReduce(ctx.scope(), ReduceOp::kMean, ops::Const(ctx.scope(), 1)).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(int_mean.status().code(), absl::StatusCode::kInvalidArgument);
  auto strings = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                  -> absl::StatusOr<ReplicaResult> {
    STRATA_RETURN_IF_ERROR(
        ctx.AllReduce(ctx.scope(), ReduceOp::kSum, ops::Const(ctx.scope(), true)).status());
    return ReplicaResult{};
  });
  EXPECT_EQ(strings.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distribute
}  // namespace strata
