// Qr on the CPU: for tall, wide, square and batched inputs, thin and full,
// float and double: q r reproduces the input, q's columns are orthonormal,
// r is upper triangular; a non-matrix is refused.
#include <algorithm>
#include <cmath>
#include <random>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using testing::RandomTensor;

template <typename T>
void CheckQr(const TensorShape& shape, bool full, double tol) {
  SCOPED_TRACE(shape.DebugString() + (full ? " full" : " thin"));
  StandaloneCpuDevice dev;
  std::mt19937 rng(static_cast<unsigned>(shape.num_elements()));
  Tensor a = RandomTensor<T>(shape, rng, -2, 2);
  auto out = RunKernel(&dev, "Qr", {a}, {{"full_matrices", MakeAttr(full)}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& q = (*out)[0];
  const Tensor& r = (*out)[1];
  const int rank = shape.dims();
  const int64_t m = shape.dim_size(rank - 2), n = shape.dim_size(rank - 1);
  const int64_t k = full ? m : std::min(m, n);
  ASSERT_EQ(q.dim_size(rank - 2), m);
  ASSERT_EQ(q.dim_size(rank - 1), k);
  ASSERT_EQ(r.dim_size(rank - 2), k);
  ASSERT_EQ(r.dim_size(rank - 1), n);
  const int64_t batch = shape.num_elements() / (m * n);
  for (int64_t b = 0; b < batch; ++b) {
    const T* A = a.data<T>() + b * m * n;
    const T* Q = q.data<T>() + b * m * k;
    const T* R = r.data<T>() + b * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double qr = 0;
        for (int64_t l = 0; l < k; ++l) qr += double(Q[i * k + l]) * double(R[l * n + j]);
        EXPECT_NEAR(qr, double(A[i * n + j]), tol) << "batch " << b << " (" << i << "," << j << ")";
      }
    }
    for (int64_t c1 = 0; c1 < k; ++c1) {
      for (int64_t c2 = 0; c2 < k; ++c2) {
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += double(Q[i * k + c1]) * double(Q[i * k + c2]);
        EXPECT_NEAR(dot, c1 == c2 ? 1.0 : 0.0, tol) << "columns " << c1 << ", " << c2;
      }
    }
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < std::min(i, n); ++j) EXPECT_EQ(R[i * n + j], T(0));
    }
  }
}

TEST(QrTest, ReproducesTheInputWithOrthonormalColumns) {
  for (bool full : {false, true}) {
    CheckQr<float>(TensorShape{7, 3}, full, 1e-5);
    CheckQr<float>(TensorShape{3, 5}, full, 1e-5);
    CheckQr<float>(TensorShape{4, 4}, full, 1e-5);
    CheckQr<float>(TensorShape{2, 3, 6, 2}, full, 1e-5);
    CheckQr<double>(TensorShape{64, 4}, full, 1e-12);
  }
}

TEST(QrTest, RankDeficientInputStillGivesOrthonormalColumns) {
  StandaloneCpuDevice dev;
  Tensor a(DT_FLOAT, TensorShape{5, 2});  // zero matrix: a PowerSGD P with no gradient
  std::fill(a.data<float>(), a.data<float>() + 10, 0.0f);
  auto out = RunKernel(&dev, "Qr", {a});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* q = (*out)[0].data<float>();
  for (int c = 0; c < 2; ++c) {
    double norm = 0;
    for (int i = 0; i < 5; ++i) norm += q[i * 2 + c] * q[i * 2 + c];
    EXPECT_NEAR(norm, 1.0, 1e-6);
    EXPECT_FALSE(std::isnan(norm));
  }
}

TEST(QrTest, AVectorIsRefused) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "Qr", {Tensor::FromVector<float>({1, 2, 3})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
