// Sum, Mean, Max, Min, Prod and ArgMax against reference loops: every subset of
// axes of a rank-4 input (with negative spellings and keep_dims), scalar
// axes, large inputs on the thread pool, empty inputs, and the errors.

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using testing::ExpectTensorNear;
using testing::RandomTensor;

// Reduces `x` over `axes` with a loop over every element.
template <typename T>
Tensor Reference(const std::string& op, const Tensor& x, const std::vector<int>& axes,
                 bool keep_dims) {
  const int r = x.dims();
  std::vector<bool> red(r, false);
  for (int a : axes) red[a < 0 ? a + r : a] = true;
  DimVector out_dims;
  for (int d = 0; d < r; ++d) {
    if (!red[d]) out_dims.push_back(x.dim_size(d));
    else if (keep_dims) out_dims.push_back(1);
  }
  const TensorShape out_shape = *TensorShape::FromDims(out_dims);
  std::vector<double> acc(out_shape.num_elements(),
                          op == "Max"    ? -std::numeric_limits<double>::infinity()
                          : op == "Min"  ? std::numeric_limits<double>::infinity()
                          : op == "Prod" ? 1.0
                                         : 0.0);
  int64_t count = 1;
  for (int d = 0; d < r; ++d) count *= red[d] ? x.dim_size(d) : 1;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    int64_t rem = i, o = 0, stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t idx = rem % x.dim_size(d);
      rem /= x.dim_size(d);
      if (!red[d]) {
        o += idx * stride;
        stride *= x.dim_size(d);
      }
    }
    const double v = static_cast<double>(x.data<T>()[i]);
    if (op == "Max") acc[o] = std::max(acc[o], v);
    else if (op == "Min") acc[o] = std::min(acc[o], v);
    else if (op == "Prod") acc[o] *= v;
    else acc[o] += v;
  }
  Tensor out(DataTypeToEnum<T>::value, out_shape);
  for (int64_t o = 0; o < out_shape.num_elements(); ++o) {
    double v = acc[o];
    if (op == "Mean") v = std::is_integral_v<T> ? std::trunc(v / count) : v / count;
    out.data<T>()[o] = static_cast<T>(v);
  }
  return out;
}

template <typename T>
void CheckReduction(const std::string& op, const TensorShape& shape,
                    const std::vector<int>& axes, bool keep_dims, bool scalar_axis,
                    int threads) {
  SCOPED_TRACE(absl::StrCat(op, " ", shape.DebugString(), " axes=[", absl::StrJoin(axes, ","),
                            "] keep_dims=", keep_dims));
  StandaloneCpuDevice dev(threads);
  std::mt19937 rng(static_cast<unsigned>(shape.num_elements() + axes.size()));
  // Products of up to 60 values stay in range with small ones.
  const double lim = op != "Prod" ? 20 : std::is_integral_v<T> ? 1 : 1.5;
  Tensor x = RandomTensor<T>(shape, rng, -lim, lim);
  Tensor ax = scalar_axis ? Tensor::Scalar<int32_t>(axes[0])
                          : Tensor::FromVector<int64_t>(std::vector<int64_t>(axes.begin(), axes.end()));
  auto out = RunKernel(&dev, op, {x, ax}, {{"keep_dims", MakeAttr(keep_dims)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear<T>((*out)[0], Reference<T>(op, x, axes, keep_dims), 1e-4);
}

TEST(ReductionKernelTest, EveryAxisSubsetOfARank4Input) {
  const TensorShape shape{3, 4, 1, 5};
  for (const std::string op : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    for (int mask = 0; mask < 16; ++mask) {
      std::vector<int> axes;
      for (int d = 0; d < 4; ++d) {
        if (mask & (1 << d)) axes.push_back(mask % 3 == 0 ? d - 4 : d);  // some negative
      }
      for (bool keep : {false, true}) {
        CheckReduction<float>(op, shape, axes, keep, false, 1);
        CheckReduction<int32_t>(op, shape, axes, keep, false, 1);
      }
    }
  }
}

TEST(ReductionKernelTest, ScalarAxisDuplicatesAndDoubles) {
  CheckReduction<float>("Sum", TensorShape{6, 7}, {1}, false, true, 1);
  CheckReduction<float>("Mean", TensorShape{6, 7}, {-2}, true, true, 1);
  CheckReduction<double>("Sum", TensorShape{2, 3, 4, 5, 6}, {0, 2, 4}, false, false, 2);
  CheckReduction<int64_t>("Max", TensorShape{2, 3, 4, 5, 6}, {1, 3}, true, false, 2);
  CheckReduction<float>("Sum", TensorShape{4, 5}, {1, 1, -1}, false, false, 1);
}

TEST(ReductionKernelTest, LargeInputsOnTheThreadPool) {
  for (const std::string op : {"Sum", "Mean", "Max", "Min"}) {
    CheckReduction<float>(op, TensorShape{300, 400}, {0}, false, false, 2);
    CheckReduction<float>(op, TensorShape{300, 400}, {1}, false, false, 2);
    CheckReduction<float>(op, TensorShape{300, 400}, {0, 1}, false, false, 2);
    CheckReduction<float>(op, TensorShape{30, 40, 50}, {0, 2}, true, false, 2);
  }
}

TEST(ReductionKernelTest, ScalarsAndNoAxes) {
  CheckReduction<float>("Sum", TensorShape{}, {}, false, false, 1);
  CheckReduction<float>("Max", TensorShape{3, 4}, {}, false, false, 1);
  CheckReduction<float>("Mean", TensorShape{3, 1}, {1}, false, false, 1);
}

TEST(ReductionKernelTest, EmptyInputsGiveTheIdentity) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{0, 3});
  auto run = [&](const std::string& op, const Tensor& in, int axis) {
    auto out = RunKernel(&dev, op, {in, Tensor::Scalar<int32_t>(axis)});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  };
  ExpectTensorNear<float>(run("Sum", x, 0), Tensor::FromVector<float>({0, 0, 0}));
  ExpectTensorNear<float>(run("Prod", x, 0), Tensor::FromVector<float>({1, 1, 1}));
  const float lo = std::numeric_limits<float>::lowest();
  ExpectTensorNear<float>(run("Max", x, 0), Tensor::FromVector<float>({lo, lo, lo}), 0);
  EXPECT_TRUE(std::isnan(run("Mean", x, 0).data<float>()[0]));
  EXPECT_EQ(run("Sum", x, 1).shape(), TensorShape{0});
  Tensor xi(DT_INT32, TensorShape{0});
  EXPECT_EQ(run("Mean", xi, 0).data<int32_t>()[0], 0);  // TensorFlow's answer, no trap
  EXPECT_EQ(run("Max", xi, 0).data<int32_t>()[0], std::numeric_limits<int32_t>::min());
}

TEST(ReductionKernelTest, BadAxesAreErrors) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{2, 3});
  auto out = RunKernel(&dev, "Sum", {x, Tensor::Scalar<int32_t>(2)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Invalid reduction dimension 2"), std::string::npos);
  EXPECT_FALSE(RunKernel(&dev, "Max", {x, Tensor::Scalar<int32_t>(-3)}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Mean", {x, Tensor(DT_INT32, TensorShape{1, 1})}).ok());
}

template <typename T, typename Tout>
void CheckArgMax(const TensorShape& shape, int axis, int threads) {
  SCOPED_TRACE(absl::StrCat(shape.DebugString(), " axis=", axis));
  StandaloneCpuDevice dev(threads);
  std::mt19937 rng(static_cast<unsigned>(shape.num_elements() + axis + 100));
  Tensor x = RandomTensor<T>(shape, rng, 0, 5);  // small range: many ties
  auto out = RunKernel(&dev, "ArgMax", {x, Tensor::Scalar<int64_t>(axis)},
                       {{"output_type", MakeAttr(DataTypeToEnum<Tout>::value)}});
  ASSERT_TRUE(out.ok()) << out.status();
  const int r = shape.dims();
  const int a = axis < 0 ? axis + r : axis;
  int64_t outer = 1, inner = 1;
  DimVector dims;
  for (int d = 0; d < r; ++d) {
    if (d == a) continue;
    dims.push_back(shape.dim_size(d));
    (d < a ? outer : inner) *= shape.dim_size(d);
  }
  const int64_t len = shape.dim_size(a);
  Tensor want(DataTypeToEnum<Tout>::value, *TensorShape::FromDims(dims));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        if (x.data<T>()[(o * len + j) * inner + i] > x.data<T>()[(o * len + best) * inner + i]) best = j;
      }
      want.data<Tout>()[o * inner + i] = static_cast<Tout>(best);
    }
  }
  ExpectTensorNear<Tout>((*out)[0], want);
}

TEST(ArgMaxKernelTest, MatchesReferenceWithFirstIndexOnTies) {
  for (int axis : {0, 1, 2, -1, -3}) {
    CheckArgMax<float, int64_t>(TensorShape{4, 5, 6}, axis, 1);
    CheckArgMax<int32_t, int32_t>(TensorShape{4, 5, 6}, axis, 1);
  }
  CheckArgMax<float, int64_t>(TensorShape{7}, 0, 1);
  CheckArgMax<double, int64_t>(TensorShape{200, 300}, 1, 2);
  CheckArgMax<float, int32_t>(TensorShape{200, 300}, 0, 2);
  CheckArgMax<float, int64_t>(TensorShape{0, 3}, 1, 1);  // empty output
}

TEST(ArgMaxKernelTest, Errors) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{0, 3});
  auto empty_axis = RunKernel(&dev, "ArgMax", {x, Tensor::Scalar<int32_t>(0)});
  ASSERT_FALSE(empty_axis.ok());
  EXPECT_NE(empty_axis.status().message().find("Reduction axis 0 is empty in shape [0,3]"),
            std::string::npos);
  EXPECT_FALSE(RunKernel(&dev, "ArgMax", {x, Tensor::Scalar<int32_t>(2)}).ok());
  EXPECT_FALSE(RunKernel(&dev, "ArgMax", {Tensor::Scalar<float>(1), Tensor::Scalar<int32_t>(0)}).ok());
}

}  // namespace
}  // namespace strata
