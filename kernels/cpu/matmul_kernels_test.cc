// MatMul against a triple loop: every transpose combination, sizes on both
// sides of the inline/thread-pool threshold, empty and k = 0 products, other
// dtypes, and the shape errors.

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using testing::ExpectTensorNear;
using testing::RandomTensor;

// want = op(a) @ op(b), accumulated in double.
template <typename T>
Tensor Reference(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t m = a.dim_size(ta ? 1 : 0), k = a.dim_size(ta ? 0 : 1);
  const int64_t n = b.dim_size(tb ? 0 : 1);
  Tensor c(DataTypeToEnum<T>::value, TensorShape{m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const T x = ta ? a.data<T>()[p * m + i] : a.data<T>()[i * k + p];
        const T y = tb ? b.data<T>()[j * k + p] : b.data<T>()[p * n + j];
        acc += static_cast<double>(x) * static_cast<double>(y);
      }
      c.data<T>()[i * n + j] = static_cast<T>(acc);
    }
  }
  return c;
}

template <typename T>
void Check(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads, double tol) {
  SCOPED_TRACE(absl::StrCat(m, "x", k, "x", n, " ta=", ta, " tb=", tb, " threads=", threads));
  StandaloneCpuDevice dev(threads);
  std::mt19937 rng(static_cast<unsigned>(m * 31 + k * 7 + n));
  Tensor a = RandomTensor<T>(ta ? TensorShape{k, m} : TensorShape{m, k}, rng, -2, 2);
  Tensor b = RandomTensor<T>(tb ? TensorShape{n, k} : TensorShape{k, n}, rng, -2, 2);
  auto out = RunKernel(&dev, "MatMul", {a, b},
                       {{"transpose_a", MakeAttr(ta)}, {"transpose_b", MakeAttr(tb)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear<T>((*out)[0], Reference<T>(a, b, ta, tb), tol);
}

TEST(MatMulKernelTest, FloatAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Check<float>(1, 1, 1, ta, tb, 1, 1e-5);
      Check<float>(3, 5, 2, ta, tb, 1, 1e-5);
      Check<float>(17, 33, 9, ta, tb, 2, 1e-4);
      Check<float>(130, 70, 90, ta, tb, 2, 1e-4);  // above the parallel threshold
    }
  }
  Check<float>(257, 129, 65, false, false, 1, 1e-4);
}

TEST(MatMulKernelTest, OtherTypes) {
  Check<double>(40, 50, 60, false, true, 2, 1e-12);
  Check<double>(100, 100, 100, true, false, 2, 1e-12);
  Check<int32_t>(20, 30, 10, false, false, 1, 0);
  Check<int64_t>(70, 80, 90, true, true, 2, 0);
}

TEST(MatMulKernelTest, EmptyProducts) {
  Check<float>(0, 3, 4, false, false, 1, 0);
  Check<float>(3, 4, 0, false, false, 1, 0);
  Check<float>(2, 0, 3, false, false, 1, 0);  // k = 0: all zeros
  Check<float>(2, 0, 3, true, true, 1, 0);
}

TEST(MatMulKernelTest, ShapeErrors) {
  StandaloneCpuDevice dev;
  auto bad_inner = RunKernel(&dev, "MatMul", {Tensor(DT_FLOAT, TensorShape{2, 3}),
                                              Tensor(DT_FLOAT, TensorShape{4, 5})});
  ASSERT_FALSE(bad_inner.ok());
  EXPECT_EQ(bad_inner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_inner.status().message().find("[2,3]"), std::string::npos) << bad_inner.status();
  EXPECT_NE(bad_inner.status().message().find("[4,5]"), std::string::npos) << bad_inner.status();
  auto transposed_ok = RunKernel(&dev, "MatMul",
                                 {Tensor(DT_FLOAT, TensorShape{2, 3}), Tensor(DT_FLOAT, TensorShape{5, 3})},
                                 {{"transpose_b", MakeAttr(true)}});
  EXPECT_TRUE(transposed_ok.ok()) << transposed_ok.status();
  auto not_matrix = RunKernel(&dev, "MatMul", {Tensor(DT_FLOAT, TensorShape{2, 3, 4}),
                                               Tensor(DT_FLOAT, TensorShape{4, 5})});
  EXPECT_EQ(not_matrix.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MatMulKernelTest, AcceptsTensorFlowGradAttrs) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "MatMul", {Tensor::FromVector<float>({1, 2}, TensorShape{1, 2}),
                                        Tensor::FromVector<float>({3, 4}, TensorShape{2, 1})},
                       {{"grad_a", MakeAttr(true)}, {"grad_b", MakeAttr(false)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 11.f);
}

}  // namespace
}  // namespace strata
