// Test helpers shared by the nn kernel tests: random tensors, running one
// kernel, comparing against a reference, and central finite differences.
//
//   std::mt19937 rng(1);
//   Tensor x = RandomTensor<double>({2, 3}, rng);
//   Tensor y = RunOp("Relu", {x});
//   ExpectClose<double>(y, want, 1e-12);
//
// Test-only; not thread-safe (the helpers use gtest assertions).
#ifndef STRATA_KERNELS_CPU_NN_TEST_UTIL_H_
#define STRATA_KERNELS_CPU_NN_TEST_UTIL_H_

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace nn_test {

// A device with a 4-thread intra-op pool, so large inputs take the parallel
// paths.
inline StandaloneCpuDevice* Device() {
  static StandaloneCpuDevice* const d = new StandaloneCpuDevice(4);
  return d;
}

template <typename T>
Tensor RandomTensor(const TensorShape& shape, std::mt19937& rng, double lo = -1.0,
                    double hi = 1.0) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

// Runs the op; fails the test (and returns an empty vector) on error.
inline std::vector<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                               const std::map<std::string, AttrValue>& attrs = {}) {
  auto out = RunKernel(Device(), op, inputs, attrs);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? *std::move(out) : std::vector<Tensor>();
}

inline absl::Status RunStatus(const std::string& op, const std::vector<Tensor>& inputs,
                              const std::map<std::string, AttrValue>& attrs = {}) {
  return RunKernel(Device(), op, inputs, attrs).status();
}

// |got - want| <= tol * max(1, |want|) everywhere, with matching dtype and shape.
template <typename T>
void ExpectClose(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape()) << got.shape().DebugString() << " vs "
                                       << want.shape().DebugString();
  int failures = 0;
  for (int64_t i = 0; i < got.NumElements() && failures < 5; ++i) {
    const double g = static_cast<double>(got.data<T>()[i]);
    const double w = static_cast<double>(want.data<T>()[i]);
    if (!(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)))) {
      ADD_FAILURE() << "element " << i << " of " << got.shape().DebugString() << ": got " << g
                    << ", want " << w;
      ++failures;
    }
  }
}

// d/dx_i of sum(dy * f(x)) by central differences, for every i. `f` returns
// f's output for a perturbed copy of x.
inline Tensor NumericGradient(const Tensor& x, const Tensor& dy,
                              const std::function<Tensor(const Tensor&)>& f, double h = 1e-6) {
  Tensor grad(DT_DOUBLE, x.shape());
  auto loss = [&](const Tensor& xx) {
    Tensor y = f(xx);
    double s = 0;
    for (int64_t j = 0; j < y.NumElements(); ++j) s += y.data<double>()[j] * dy.data<double>()[j];
    return s;
  };
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    Tensor xp = x.DeepCopy(), xm = x.DeepCopy();
    xp.data<double>()[i] += h;
    xm.data<double>()[i] -= h;
    grad.data<double>()[i] = (loss(xp) - loss(xm)) / (2 * h);
  }
  return grad;
}

}  // namespace nn_test
}  // namespace strata

#endif  // STRATA_KERNELS_CPU_NN_TEST_UTIL_H_
