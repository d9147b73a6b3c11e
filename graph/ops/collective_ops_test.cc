#include "graph/ops/collective_ops.h"

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(CollectiveOpsTest, ReduceKeepsShapeAndSetsAttrs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialTensorShape({-1, 3}));
  Output y = ops::CollectiveReduce(root.WithOpName("sum"), x, 4, 1, 7,
                                   ops::CollectiveAttrs().MergeOp("Max").FinalOp("Div")
                                       .TimeoutSeconds(2.5f).CommunicationHint("ring"));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.node()->name(), "sum");
  EXPECT_EQ(y.node()->type_string(), "CollectiveReduceV2");
  EXPECT_EQ(y.shape(), PartialTensorShape({-1, 3}));
  EXPECT_EQ(y.node()->num_inputs(), 4);  // input + 3 keys, no ordering tokens
  const auto& attrs = y.node()->def().attr();
  EXPECT_EQ(attrs.at("merge_op").s(), "Max");
  EXPECT_EQ(attrs.at("final_op").s(), "Div");
  EXPECT_EQ(attrs.at("communication_hint").s(), "ring");
  EXPECT_FLOAT_EQ(attrs.at("timeout_seconds").f(), 2.5f);
  EXPECT_EQ(attrs.at("Nordering_token").i(), 0);
  EXPECT_EQ(attrs.at("max_subdivs_per_device").i(), -1);
  EXPECT_FALSE(attrs.at("is_stateless").b());
  auto op = OpRegistry::Global()->LookUp("CollectiveReduceV2");
  ASSERT_TRUE(op.ok());
  EXPECT_TRUE((*op)->is_stateful);
}

TEST(CollectiveOpsTest, BadMergeOpIsRejectedWhenBuilding) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, 1.0f);
  ops::CollectiveReduce(root, x, 2, 1, 1, ops::CollectiveAttrs().MergeOp("Sum"));
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(root.status().message()).find("merge_op"), std::string::npos)
      << root.status();
}

TEST(CollectiveOpsTest, GatherMultipliesFirstDimByGroupSize) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_INT64, PartialTensorShape({5, 2}));
  Output y = ops::CollectiveGather(root, x, 3, 1, 1);
  Output u = ops::Placeholder(root, DT_FLOAT, PartialTensorShape({-1, 2}));
  Output v = ops::CollectiveGather(root, u, 3, 1, 2);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialTensorShape({15, 2}));
  EXPECT_EQ(v.shape(), PartialTensorShape({-1, 2}));
}

TEST(CollectiveOpsTest, GatherOfScalarIsRejected) {
  Scope root = Scope::NewRootScope();
  ops::CollectiveGather(root, ops::Const(root, 1.0f), 2, 1, 1);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CollectiveOpsTest, BroadcastShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialTensorShape({2, 3}));
  Output sent = ops::CollectiveBcastSend(root, x, 2, 1, 1);
  Output got = ops::CollectiveBcastRecv(root, DT_DOUBLE, TensorShape{2, 3}, 2, 1, 1);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(sent.shape(), PartialTensorShape({2, 3}));
  EXPECT_EQ(got.shape(), PartialTensorShape({2, 3}));
  EXPECT_EQ(got.type(), DT_DOUBLE);
  EXPECT_EQ(got.node()->def().attr().at("Tshape").type(), DT_INT32);
}

}  // namespace
}  // namespace strata
