// Helpers for the math kernel tests: random tensors, NumPy-broadcast index
// mapping for reference loops, and tensor comparison.
//
//   std::mt19937 rng(7);
//   Tensor x = testing::RandomTensor<float>(TensorShape{3, 4}, rng, -2, 2);
//   int64_t off = testing::BroadcastOffset(x.shape(), out_shape, i);  // x's element for out[i]
//   testing::ExpectTensorNear<float>(got, want, 1e-5);
//
// Test-only; not thread-safe (the caller owns the generator).
#ifndef STRATA_KERNELS_CPU_MATH_TEST_UTIL_H_
#define STRATA_KERNELS_CPU_MATH_TEST_UTIL_H_

#include <cmath>
#include <random>
#include <type_traits>

#include "graph/tensor.h"
#include "gtest/gtest.h"

namespace strata {
namespace testing {

// Uniform values in [lo, hi] (integers: whole numbers in that range).
template <typename T>
Tensor RandomTensor(const TensorShape& shape, std::mt19937& rng, double lo, double hi) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (int64_t i = 0; i < t.NumElements(); ++i) t.data<bool>()[i] = d(rng);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  }
  return t;
}

// The flat index into a tensor of shape `in` that NumPy broadcasting reads
// for flat element `i` of a result of shape `out`.
inline int64_t BroadcastOffset(const TensorShape& in, const TensorShape& out, int64_t i) {
  int64_t off = 0, in_stride = 1;
  for (int d = out.dims() - 1, e = in.dims() - 1; d >= 0; --d, --e) {
    const int64_t idx = i % out.dim_size(d);
    i /= out.dim_size(d);
    if (e < 0) continue;
    if (in.dim_size(e) != 1) off += idx * in_stride;
    in_stride *= in.dim_size(e);
  }
  return off;
}

// Same dtype and shape, and each element within tol * max(1, |want|)
// (exact for integers and bool). NaNs must match NaNs.
template <typename T>
void ExpectTensorNear(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape()) << got.shape().DebugString() << " vs "
                                       << want.shape().DebugString();
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    const T g = got.data<T>()[i], w = want.data<T>()[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << "at " << i;
      } else {
        EXPECT_NEAR(g, w, tol * std::max<double>(1.0, std::fabs(w))) << "at " << i;
      }
    } else {
      EXPECT_EQ(g, w) << "at " << i;
    }
    if (::testing::Test::HasFailure()) return;  // one bad element is enough to see
  }
}

}  // namespace testing
}  // namespace strata

#endif  // STRATA_KERNELS_CPU_MATH_TEST_UTIL_H_
