// Gradient bucketing: the plan (reverse creation order, the byte cap, one
// dtype per bucket) and the fused all-reduce's graph and values.
#include "strategy/gradient_bucketing.h"

#include <memory>
#include <vector>

#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"

namespace strata {
namespace distribute {
namespace {

using Buckets = std::vector<std::vector<int>>;

TEST(PlanGradientBucketsTest, FillsFromTheLastMadeVariableUpToTheCap) {
  // Four float gradients of 100, 10, 100, 10 elements (400, 40, 400, 40
  // bytes), made in that order.
  std::vector<GradientSpec> g = {
      {DT_FLOAT, 100, 0}, {DT_FLOAT, 10, 1}, {DT_FLOAT, 100, 2}, {DT_FLOAT, 10, 3}};
  EXPECT_EQ(PlanGradientBuckets(g, 1 << 20), (Buckets{{3, 2, 1, 0}}));
  EXPECT_EQ(PlanGradientBuckets(g, 440), (Buckets{{3, 2}, {1, 0}}));
  EXPECT_EQ(PlanGradientBuckets(g, 500), (Buckets{{3, 2, 1}, {0}}));
  EXPECT_EQ(PlanGradientBuckets(g, 0), (Buckets{{3}, {2}, {1}, {0}}));
  // A gradient larger than the cap gets a bucket of its own.
  EXPECT_EQ(PlanGradientBuckets(g, 100), (Buckets{{3}, {2}, {1}, {0}}));
}

TEST(PlanGradientBucketsTest, CreationOrderNotArgumentOrderAndOneDtypePerBucket) {
  std::vector<GradientSpec> g = {
      {DT_FLOAT, 4, 5}, {DT_DOUBLE, 4, 9}, {DT_FLOAT, 4, 7}, {DT_DOUBLE, 4, 1}};
  EXPECT_EQ(PlanGradientBuckets(g, 1 << 20), (Buckets{{1, 3}, {2, 0}}));
  EXPECT_TRUE(PlanGradientBuckets({}, 1 << 20).empty());
}

TEST(AllReduceInBucketsTest, OneCollectivePerBucketAndShapesRestored) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    const Scope& sc = ctx.scope();
    OutputList grads = {ops::Const<float>(sc, {1, 2, 3, 4, 5, 6}, {2, 3}),
                        ops::Const<float>(sc, {7, 8}), ops::Const(sc, 9.0f)};
    std::vector<TensorShape> shapes = {{2, 3}, {2}, {}};
    STRATA_ASSIGN_OR_RETURN(OutputList out,
                            AllReduceInBuckets(sc, ctx, ReduceOp::kMean, grads, shapes,
                                               {{2, 1}, {0}}));
    return ReplicaResult{out, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  int collectives = 0;
  for (Node* n : root.graph()->nodes()) collectives += n->IsOp("CollectiveReduceV2");
  EXPECT_EQ(collectives, 2 * 2);  // two buckets, two replicas
  EXPECT_EQ(result->values[0][0].shape(), PartialTensorShape({2, 3}));
  EXPECT_EQ(result->values[1][1].shape(), PartialTensorShape({2}));
  EXPECT_EQ(result->values[2][0].shape(), PartialTensorShape({}));
}

TEST(AllReduceInBucketsTest, FusedValuesComeBackInPlace) {
  // One replica: the all-reduce is an identity, so the output is exactly the
  // input after flatten, concat, slice and reshape.
  auto s = *MirroredStrategy::Create({"/cpu:0"}, testing::Machine(1));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    const Scope& sc = ctx.scope();
    OutputList grads = {ops::Const<float>(sc, {1, 2, 3, 4, 5, 6}, {2, 3}),
                        ops::Const<float>(sc, {7, 8}), ops::Const(sc, 9.0f)};
    STRATA_ASSIGN_OR_RETURN(OutputList out, AllReduceInBuckets(sc, ctx, ReduceOp::kSum, grads,
                                                               {{2, 3}, {2}, {}}, {{2, 0, 1}}));
    return ReplicaResult{out, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  auto session = *Session::Create(root, s->session_options());
  auto out = testing::Fetch(*session, {result->values[0][0].name(), result->values[1][0].name(),
                                       result->values[2][0].name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ((*out)[0].data<float>()[5], 6.0f);
  EXPECT_EQ((*out)[1].shape(), TensorShape({2}));
  EXPECT_EQ((*out)[1].data<float>()[0], 7.0f);
  EXPECT_EQ((*out)[2].shape(), TensorShape({}));
  EXPECT_EQ(*(*out)[2].data<float>(), 9.0f);
}

TEST(AllReduceInBucketsTest, BadBucketsAreRejected) {
  auto s = *MirroredStrategy::Create({"/cpu:0"}, testing::Machine(1));
  Scope root = Scope::NewRootScope();
  auto result = s->Run(root, [](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    const Scope& sc = ctx.scope();
    OutputList grads = {ops::Const<float>(sc, {1, 2}), ops::Const(sc, 2.0)};
    EXPECT_EQ(AllReduceInBuckets(sc, ctx, ReduceOp::kSum, grads, {{2}, {}}, {{0}}).status().code(),
              absl::StatusCode::kInvalidArgument);  // gradient 1 in no bucket
    EXPECT_EQ(AllReduceInBuckets(sc, ctx, ReduceOp::kSum, grads, {{2}, {}}, {{0, 0}, {1}})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);  // repeated
    EXPECT_EQ(AllReduceInBuckets(sc, ctx, ReduceOp::kSum, grads, {{2}, {}}, {{0, 1}}).status().code(),
              absl::StatusCode::kInvalidArgument);  // mixed dtypes
    return ReplicaResult{};
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
