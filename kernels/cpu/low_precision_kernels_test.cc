// bfloat16 and half convolutions and pooling on the CPU equal the float
// kernels run on the same (narrow) values, rounded once: each output within
// half a unit in the last place of the narrow dtype, for every op they
// cover, forward and backward.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

// Random values already representable in T (so the float run sees exactly
// what the narrow run does), as a float tensor and a T tensor.
template <typename T>
void Random(const TensorShape& shape, DataType low, std::mt19937& rng, Tensor* f, Tensor* narrow) {
  std::uniform_real_distribution<float> u(-2, 2);
  *f = Tensor(DT_FLOAT, shape);
  *narrow = Tensor(low, shape);
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    const T v = static_cast<T>(u(rng));
    narrow->data<T>()[i] = v;
    f->data<float>()[i] = static_cast<float>(v);
  }
}

template <typename T>
void ExpectRoundedOnce(const Tensor& narrow, const Tensor& wide, double ulp,
                       const std::string& what) {
  ASSERT_EQ(narrow.shape(), wide.shape()) << what;
  for (int64_t i = 0; i < wide.NumElements(); ++i) {
    const float want = wide.data<float>()[i];
    const float got = static_cast<float>(narrow.data<T>()[i]);
    EXPECT_NEAR(got, want, std::abs(want) * ulp + 1e-6) << what << "[" << i << "]";
  }
}

template <typename T>
void CheckOps(DataType low, double ulp) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(5);
  const std::map<std::string, AttrValue> conv = {
      {"strides", MakeAttr(std::vector<int64_t>{1, 1, 1, 1})}, {"padding", MakeAttr("SAME")}};
  const std::map<std::string, AttrValue> pool = {
      {"ksize", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})},
      {"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})},
      {"padding", MakeAttr("VALID")}};
  Tensor xf, x, ff, f, dyf, dy;
  Random<T>(TensorShape{2, 6, 6, 3}, low, rng, &xf, &x);
  Random<T>(TensorShape{3, 3, 3, 4}, low, rng, &ff, &f);
  Random<T>(TensorShape{2, 6, 6, 4}, low, rng, &dyf, &dy);
  auto run = [&](const std::string& op, const std::vector<Tensor>& narrow,
                 const std::vector<Tensor>& wide, const std::map<std::string, AttrValue>& attrs) {
    SCOPED_TRACE(op);
    auto a = RunKernel(&dev, op, narrow, attrs);
    auto b = RunKernel(&dev, op, wide, attrs);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*a)[0].dtype(), low);
    ExpectRoundedOnce<T>((*a)[0], (*b)[0], ulp, op);
  };
  run("Conv2D", {x, f}, {xf, ff}, conv);
  const Tensor in_sizes = Tensor::FromVector<int32_t>({2, 6, 6, 3});
  const Tensor f_sizes = Tensor::FromVector<int32_t>({3, 3, 3, 4});
  run("Conv2DBackpropInput", {in_sizes, f, dy}, {in_sizes, ff, dyf}, conv);
  run("Conv2DBackpropFilter", {x, f_sizes, dy}, {xf, f_sizes, dyf}, conv);
  run("MaxPool", {x}, {xf}, pool);
  run("AvgPool", {x}, {xf}, pool);
  auto y = RunKernel(&dev, "MaxPool", {x}, pool);
  auto yf = RunKernel(&dev, "MaxPool", {xf}, pool);
  ASSERT_TRUE(y.ok() && yf.ok());
  Tensor gf, g;
  Random<T>((*yf)[0].shape(), low, rng, &gf, &g);
  run("MaxPoolGrad", {x, (*y)[0], g}, {xf, (*yf)[0], gf}, pool);
  run("AvgPoolGrad", {in_sizes, g}, {in_sizes, gf}, pool);
}

TEST(LowPrecisionKernelsTest, Bfloat16IsTheFloatKernelRoundedOnce) {
  CheckOps<Eigen::bfloat16>(DT_BFLOAT16, 1.0 / 256);  // 8 bits: half an ulp is 2^-8
}

TEST(LowPrecisionKernelsTest, HalfIsTheFloatKernelRoundedOnce) {
  CheckOps<Eigen::half>(DT_HALF, 1.0 / 2048);  // 11 bits
}

}  // namespace
}  // namespace strata
