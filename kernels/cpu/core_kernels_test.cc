#include "graph/ops/core_ops.h"

#include "graph/attr_value.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

TEST(CoreOpsTest, ConstBuildersAndShapes) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, TensorShape{2, 3});
  Output s = ops::Const(root, 1.5f);
  Output i = ops::Const(root, int64_t{7});
  Output r = ops::Const<int32_t>(root, {1, 2, 3});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v.type(), DT_FLOAT);
  EXPECT_EQ(v.shape(), PartialTensorShape({2, 3}));
  EXPECT_EQ(s.shape(), PartialTensorShape(TensorShape()));
  EXPECT_EQ(i.type(), DT_INT64);
  EXPECT_EQ(r.shape(), PartialTensorShape({3}));

  ops::Const<float>(root, {1, 2, 3}, TensorShape{2, 2});
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoreOpsTest, PlaceholderAndIdentityShapes) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root.WithOpName("p"), DT_FLOAT, PartialTensorShape({-1, 4}));
  Output unknown = ops::Placeholder(root, DT_INT32);
  Output id = ops::Identity(root, p);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(id.shape(), PartialTensorShape({-1, 4}));
  EXPECT_TRUE(unknown.shape().unknown_rank());
  EXPECT_EQ(p.node()->name(), "p");
}

TEST(CoreOpsTest, ConstWithMismatchedDtypeIsRejected) {
  Scope root = Scope::NewRootScope();
  NodeBuilder(root.WithOpName("c"), "Const")
      .Attr("value", MakeAttr(Tensor::Scalar<float>(1)))
      .Attr("dtype", MakeAttr(DT_INT32))
      .Finalize();
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("'c'"), std::string::npos) << root.status();
}

TEST(CoreKernelsTest, ConstOutputsItsValueSharingOneBuffer) {
  StandaloneCpuDevice dev;
  Tensor v = Tensor::FromVector<float>({1, 2, 3});
  auto out = RunKernel(&dev, "Const", {}, {{"value", MakeAttr(v)}, {"dtype", MakeAttr(DT_FLOAT)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), TensorShape{3});
  EXPECT_EQ((*out)[0].data<float>()[2], 3.0f);
}

TEST(CoreKernelsTest, IdentityPassesTheBufferThrough) {
  StandaloneCpuDevice dev;
  Tensor x = Tensor::FromVector<int32_t>({4, 5});
  auto out = RunKernel(&dev, "Identity", {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].SharesBufferWith(x));
}

TEST(CoreKernelsTest, UnfedPlaceholderSaysSo) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "Placeholder", {},
                       {{"dtype", MakeAttr(DT_FLOAT)}, {"shape", MakeAttr(PartialTensorShape({-1, 2}))}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("You must feed a value for placeholder 'test_Placeholder'"),
            std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("[?,2]"), std::string::npos) << out.status();
}

TEST(CoreKernelsTest, NoOpHasNoOutputs) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "NoOp", {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->empty());
}

TEST(CoreKernelsTest, InternalOpsNeedTheirRuntimeServices) {
  StandaloneCpuDevice dev;
  // Outside an executor there is no call frame or rendezvous: a clear error,
  // not a crash.
  auto arg = RunKernel(&dev, "_Arg", {}, {{"T", MakeAttr(DT_FLOAT)}, {"index", MakeAttr(0)}});
  EXPECT_EQ(arg.status().code(), absl::StatusCode::kFailedPrecondition);
  auto send = RunKernel(&dev, "_Send", {Tensor::Scalar<float>(1)},
                        {{"tensor_name", MakeAttr("x:0")},
                         {"send_device", MakeAttr("/job:a/replica:0/task:0/device:CPU:0")},
                         {"send_device_incarnation", MakeAttr(int64_t{1})},
                         {"recv_device", MakeAttr("/job:a/replica:0/task:0/device:CPU:1")}});
  EXPECT_EQ(send.status().code(), absl::StatusCode::kFailedPrecondition);
  auto bad_index = RunKernel(&dev, "_Arg", {}, {{"T", MakeAttr(DT_FLOAT)}, {"index", MakeAttr(-1)}});
  EXPECT_EQ(bad_index.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
