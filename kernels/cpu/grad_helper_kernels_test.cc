// The gradient helper kernels against hand-computed results (TensorFlow's
// where TensorFlow has the op), and their errors on bad input.
#include <cstdint>
#include <vector>

#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
}

Tensor I32(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }
Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }
Tensor F32(std::vector<float> v, const TensorShape& s) { return Tensor::FromVector<float>(v, s); }

class GradHelperKernelsTest : public ::testing::Test {
 protected:
  StandaloneCpuDevice dev_{2};
};

TEST_F(GradHelperKernelsTest, BroadcastGradientArgs) {
  auto out = RunKernel(&dev_, "BroadcastGradientArgs", {I32({2, 1, 3}), I32({4, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{1}));     // s0's 1 vs 4
  EXPECT_EQ(Values<int32_t>((*out)[1]), (std::vector<int32_t>{0}));     // s1 lacks dim 0
  out = RunKernel(&dev_, "BroadcastGradientArgs", {I64({5, 1}), I64({1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Values<int64_t>((*out)[0]).empty());
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{0}));
  out = RunKernel(&dev_, "BroadcastGradientArgs", {I32({2, 3}), I32({4, 3})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, BroadcastTo) {
  auto out = RunKernel(&dev_, "BroadcastTo", {F32({1, 2, 3}, {3}), I32({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (TensorShape{2, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  out = RunKernel(&dev_, "BroadcastTo", {F32({1, 2}, {2, 1}), I32({2, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]),
            (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
  out = RunKernel(&dev_, "BroadcastTo", {F32({1, 2}, {2}), I32({3})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, ReducedShape) {
  auto out = RunKernel(&dev_, "ReducedShape", {I32({2, 3, 4}), I32({0, -1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{1, 3, 1}));
  out = RunKernel(&dev_, "ReducedShape", {I32({2, 3}), I32({2})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, Size) {
  auto out = RunKernel(&dev_, "Size", {F32({1, 2, 3, 4, 5, 6}, {2, 3})},
                       {{"out_type", MakeAttr(DT_INT64)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<int64_t>(), 6);
}

TEST_F(GradHelperKernelsTest, Pad) {
  Tensor pads = Tensor::FromVector<int32_t>({1, 0, 0, 2}, TensorShape{2, 2});
  auto out = RunKernel(&dev_, "Pad", {F32({1, 2, 3, 4}, {2, 2}), pads});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (TensorShape{3, 4}));
  EXPECT_EQ(Values<float>((*out)[0]),
            (std::vector<float>{0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0}));
  Tensor negative = Tensor::FromVector<int32_t>({-1, 0, 0, 0}, TensorShape{2, 2});
  out = RunKernel(&dev_, "Pad", {F32({1, 2, 3, 4}, {2, 2}), negative});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, ConcatOffset) {
  auto out = RunKernelWithListInputs(&dev_, "ConcatOffset",
                                     {{Tensor::Scalar<int32_t>(1)},
                                      {I32({2, 3, 5}), I32({2, 1, 5}), I32({2, 4, 5})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(Values<int32_t>((*out)[1]), (std::vector<int32_t>{0, 3, 0}));
  EXPECT_EQ(Values<int32_t>((*out)[2]), (std::vector<int32_t>{0, 4, 0}));
  out = RunKernelWithListInputs(&dev_, "ConcatOffset",
                                {{Tensor::Scalar<int32_t>(1)}, {I32({2, 3}), I32({3, 3})}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, Unpack) {
  auto out = RunKernel(&dev_, "Unpack", {F32({1, 2, 3, 4, 5, 6}, {2, 3})},
                       {{"num", MakeAttr(3)}, {"axis", MakeAttr(-1)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{2, 5}));
  out = RunKernel(&dev_, "Unpack", {F32({1, 2, 3, 4, 5, 6}, {2, 3})},
                  {{"num", MakeAttr(3)}, {"axis", MakeAttr(0)}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GradHelperKernelsTest, InvertPermutation) {
  auto out = RunKernel(&dev_, "InvertPermutation", {I32({2, 0, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{1, 2, 0}));
  out = RunKernel(&dev_, "InvertPermutation", {I32({0, 0})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
