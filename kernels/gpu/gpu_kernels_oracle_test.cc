// Every GPU kernel against the CPU kernel of the same op on random inputs:
// several shapes per op (broadcasting, 0 and 1 elements, sizes that span
// many blocks), each output compared with a per-op tolerance. half and
// bfloat16 kernels (which have no CPU kernel) are compared with the CPU's
// float kernel run on the same rounded inputs (the harness:
// kernels/gpu/testing/gpu_oracle.h). Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/eigen_views.h"
#include "kernels/gpu/testing/gpu_oracle.h"
#include "kernels/gpu/testing/test_gpu_device.h"
#include "kernels/kernel_runner.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

using gpu_oracle::Attrs;
using gpu_oracle::Convert;
using gpu_oracle::ExpectClose;
using gpu_oracle::GpuOracleTest;
using gpu_oracle::MakeVar;
using gpu_oracle::Random;
using gpu_oracle::Tol;

const std::vector<std::pair<TensorShape, TensorShape>>& BinaryShapes() {
  static const auto* const s = new std::vector<std::pair<TensorShape, TensorShape>>{
      {TensorShape{}, TensorShape{}},
      {TensorShape{0}, TensorShape{0}},
      {TensorShape{1}, TensorShape{1}},
      {TensorShape{7}, TensorShape{}},
      {TensorShape{}, TensorShape{5, 3}},
      {TensorShape{256, 10}, TensorShape{10}},
      {TensorShape{300, 257}, TensorShape{300, 1}},
      {TensorShape{4, 1, 5}, TensorShape{3, 1}},
      {TensorShape{2, 3, 4, 5}, TensorShape{1, 3, 1, 5}},
      {TensorShape{0, 3}, TensorShape{3}},
      {TensorShape{1 << 20}, TensorShape{1 << 20}},
  };
  return *s;
}

TEST_F(GpuOracleTest, BinaryFloatingOpsBroadcast) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const auto& [xs, ys] : BinaryShapes()) {
      const std::string what = absl::StrCat(DataTypeString(dt), " ", xs.DebugString(), " ", ys.DebugString());
      const Tensor x = Random(dt, xs, rng_), y = Random(dt, ys, rng_);
      for (const char* op : {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"}) {
        Check(op, {x, y}, {}, {}, what);
      }
      Check("RealDiv", {x, Random(dt, ys, rng_, 0.5, 2)}, {}, {1e-6, 0}, what);
      Check("Pow", {Random(dt, xs, rng_, 0.5, 2), y}, {}, {1e-5, 1e-6}, what);
      Check("Equal", {x, x}, {}, {}, what);
      // y's values reused where they broadcast, so that ties occur.
      for (const char* op : {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"}) {
        Check(op, {x, y}, {}, {}, what);
        Check(op, {y, y}, {}, {}, what);
      }
    }
  }
}

TEST_F(GpuOracleTest, BinaryIntegerOps) {
  for (DataType dt : {DT_INT64, DT_INT32}) {  // int32 runs on the host side
    for (const auto& [xs, ys] : BinaryShapes()) {
      const Tensor x = Random(dt, xs, rng_, -50, 50), y = Random(dt, ys, rng_, -50, 50);
      const std::string what = absl::StrCat(DataTypeString(dt), " ", xs.DebugString(), " ", ys.DebugString());
      for (const char* op : {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference", "Equal", "NotEqual",
                             "Less", "LessEqual", "Greater", "GreaterEqual"}) {
        Check(op, {x, y}, {}, {}, what);
      }
    }
  }
  Check("Equal", {Random(DT_BOOL, {100}, rng_), Random(DT_BOOL, {100}, rng_)}, {}, {});
  Check("NotEqual", {Random(DT_BOOL, {100}, rng_), Random(DT_BOOL, {100}, rng_)}, {}, {});
  auto bad = RunOnGpu(gpu_.get(), "AddV2", {Random(DT_FLOAT, {2, 3}, rng_), Random(DT_FLOAT, {4}, rng_)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, UnaryOps) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (int64_t n : {0, 1, 1000, 1 << 20}) {
      const Tensor x = Random(dt, {n}, rng_, -4, 4), pos = Random(dt, {n}, rng_, 0.01, 4);
      for (const char* op : {"Neg", "Square", "Relu"}) Check(op, {x}, {}, {});
      for (const char* op : {"Exp", "Sigmoid", "Tanh", "Erf", "Erfc"}) Check(op, {x}, {}, {1e-5, 1e-6});
      Check("Floor", {x}, {}, {});
      for (const char* op : {"Sqrt", "Rsqrt", "Log"}) Check(op, {pos}, {}, {1e-5, 1e-6});
      Check("ReluGrad", {x, Random(dt, {n}, rng_)}, {}, {});
    }
    // Cumsum and Cumprod along each axis, exclusive and reverse.
    const Tensor m = Random(dt, {6, 50, 7}, rng_, 0.9, 1.1);
    for (int32_t axis : {0, 1, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          const Attrs a = {{"exclusive", MakeAttr(exclusive)}, {"reverse", MakeAttr(reverse)}};
          Check("Cumsum", {m, Tensor::Scalar<int32_t>(axis)}, a, {1e-6, 1e-6});
          Check("Cumprod", {m, Tensor::Scalar<int32_t>(axis)}, a, {1e-6, 1e-6});
        }
      }
    }
  }
}

TEST_F(GpuOracleTest, HalfAndBfloat16Elementwise) {
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    const Tol tol{dt == DT_HALF ? 2e-3 : 1.6e-2, 1e-3};
    const Tensor x = Random(DT_FLOAT, {1000, 33}, rng_), b = Random(DT_FLOAT, {33}, rng_);
    for (const char* op : {"AddV2", "Sub", "Mul", "Maximum"}) CheckLowPrecision(op, dt, {x, b}, {}, tol);
    CheckLowPrecision("RealDiv", dt, {x, Random(DT_FLOAT, {33}, rng_, 0.5, 2)}, {}, tol);
    for (const char* op : {"Neg", "Square", "Relu", "Exp", "Tanh", "Sigmoid", "Erf"}) CheckLowPrecision(op, dt, {x}, {}, tol);
    CheckLowPrecision("ReluGrad", dt, {x, Random(DT_FLOAT, {1000, 33}, rng_)}, {}, tol);
    CheckLowPrecision("BiasAdd", dt, {x, b}, {}, tol);
  }
}

TEST_F(GpuOracleTest, BiasAddAndGrad) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const TensorShape& s : {TensorShape{256, 10}, TensorShape{8, 4, 4, 16}, TensorShape{0, 5}, TensorShape{1, 1},
                                 TensorShape{4096, 512}}) {
      const Tensor v = Random(dt, s, rng_), b = Random(dt, {s.dim_size(s.dims() - 1)}, rng_);
      Check("BiasAdd", {v, b}, {}, {}, s.DebugString());
      // A sum of many terms differs by summation order (the GPU's column
      // kernel combines 32 strided partial sums): atol scales with size, as
      // in Reductions.
      const double atol = 1e-6 * std::sqrt(static_cast<double>(s.num_elements()) + 1);
      Check("BiasAddGrad", {v}, {}, {1e-5, std::max(1e-5, atol)}, s.DebugString());
    }
    const Tensor nchw = Random(dt, {2, 3, 4, 5}, rng_);
    Check("BiasAdd", {nchw, Random(dt, {3}, rng_)}, {{"data_format", MakeAttr("NCHW")}}, {});
    Check("BiasAddGrad", {nchw}, {{"data_format", MakeAttr("NCHW")}}, {1e-5, 1e-5});
  }
  auto bad = RunOnGpu(gpu_.get(), "BiasAdd", {Random(DT_FLOAT, {4, 3}, rng_), Random(DT_FLOAT, {4}, rng_)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, Cast) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};
  for (DataType src : types) {
    for (DataType dst : types) {
      for (int64_t n : {0, 1, 5000}) {
        Check("Cast", {Random(src, {n}, rng_, -100, 100)}, {{"DstT", MakeAttr(dst)}}, {},
              absl::StrCat(DataTypeString(src), "->", DataTypeString(dst)));
      }
    }
  }
  for (DataType low : {DT_HALF, DT_BFLOAT16}) {
    // float -> low on the GPU must round exactly as Eigen does on the host.
    const Tensor x = Random(DT_FLOAT, {5000}, rng_, -100, 100);
    auto g = RunOnGpu(gpu_.get(), "Cast", {x}, {{"DstT", MakeAttr(low)}});
    ASSERT_TRUE(g.ok()) << g.status();
    ExpectClose(Convert(x, low), (*g)[0], 0, 0, "Cast float->" + DataTypeString(low));
    auto back = RunOnGpu(gpu_.get(), "Cast", {(*g)[0]}, {{"DstT", MakeAttr(DT_FLOAT)}});
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectClose(Convert((*g)[0], DT_FLOAT), (*back)[0], 0, 0, "Cast " + DataTypeString(low) + "->float");
  }
}

TEST_F(GpuOracleTest, Reductions) {
  struct Case {
    TensorShape shape;
    std::vector<int32_t> axes;
  };
  const std::vector<Case> cases = {
      {{256, 10}, {0}},      {{256, 10}, {1}},       {{256, 10}, {0, 1}},    {{4, 5, 6}, {0, 2}},
      {{4, 5, 6}, {1}},      {{4, 5, 6}, {-1}},      {{0, 5}, {0}},          {{3, 0}, {1}},
      {{1, 1}, {0}},         {{1024, 1000}, {1}},    {{1024, 1000}, {0}},    {{7}, {}},
      {{2, 3, 4, 5}, {0, 2}}, {{1 << 20}, {0}},
      // Column reductions (a matrix over its rows) with ragged tiles.
      {{37, 70}, {0}},       {{100, 33}, {0}},       {{64, 3, 5}, {0}},      {{4096, 1}, {0}},
  };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      const Tensor x = Random(dt, c.shape, rng_);
      const Tensor axes = Tensor::FromVector<int32_t>(c.axes, TensorShape{static_cast<int64_t>(c.axes.size())});
      for (bool keep : {false, true}) {
        const std::string what = absl::StrCat(DataTypeString(dt), " ", c.shape.DebugString(), " keep=", keep);
        // Sums of many terms differ by summation order: scale atol with size.
        const double atol = 1e-6 * std::sqrt(static_cast<double>(c.shape.num_elements()) + 1);
        for (const char* op : {"Sum", "Mean"}) Check(op, {x, axes}, {{"keep_dims", MakeAttr(keep)}}, {1e-5, atol}, what);
        for (const char* op : {"Max", "Min"}) Check(op, {x, axes}, {{"keep_dims", MakeAttr(keep)}}, {}, what);
        if (c.shape.num_elements() <= 4096) {
          // Products of values near 1 (no overflow), in another order than the CPU's.
          Check("Prod", {Random(dt, c.shape, rng_, 0.95, 1.05), axes}, {{"keep_dims", MakeAttr(keep)}}, {1e-5, 1e-6},
                what);
        }
      }
    }
  }
  auto bad = RunOnGpu(gpu_.get(), "Sum", {Random(DT_FLOAT, {2, 3}, rng_), Tensor::FromVector<int32_t>({2})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, ArgMax) {
  for (DataType out : {DT_INT64, DT_INT32}) {
    for (const TensorShape& s : {TensorShape{256, 10}, TensorShape{1, 1}, TensorShape{3, 4, 5}, TensorShape{0, 4}}) {
      for (int32_t axis : {0, -1}) {
        // Few distinct values: ties must resolve to the first index.
        Tensor x = Random(DT_INT32, s, rng_, 0, 3);
        Tensor xf = Convert(x, DT_FLOAT);
        const std::string what = absl::StrCat(s.DebugString(), " axis ", axis);
        const Attrs attrs = {{"output_type", MakeAttr(out)}};
        if (s.dim_size(axis < 0 ? s.dims() + axis : axis) == 0) {
          CheckSameError("ArgMax", {xf, Tensor::Scalar<int32_t>(axis)}, attrs, what);
        } else {
          Check("ArgMax", {xf, Tensor::Scalar<int32_t>(axis)}, attrs, {}, what);
        }
      }
    }
  }
}

TEST_F(GpuOracleTest, SoftmaxAndCrossEntropy) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const TensorShape& s : {TensorShape{256, 10}, TensorShape{3, 1000}, TensorShape{1, 1}, TensorShape{0, 5},
                                 TensorShape{2, 3, 4}, TensorShape{5, 0}}) {
      const Tensor x = Random(dt, s, rng_, -10, 10);
      Check("Softmax", {x}, {}, {1e-5, 1e-7}, s.DebugString());
      Check("LogSoftmax", {x}, {}, {1e-5, 1e-6}, s.DebugString());
    }
    for (DataType label : {DT_INT32, DT_INT64}) {
      for (const TensorShape& s : {TensorShape{256, 10}, TensorShape{1, 1}, TensorShape{0, 10}, TensorShape{7, 1000}}) {
        const Tensor x = Random(dt, s, rng_, -10, 10);
        const Tensor y = Random(label, {s.dim_size(0)}, rng_, 0, static_cast<double>(s.dim_size(1)) - 1e-9);
        Check("SparseSoftmaxCrossEntropyWithLogits", {x, y}, {}, {1e-5, 1e-6}, s.DebugString());
      }
    }
  }
  // A bad int32 label (host memory) is an error naming it, as on the CPU.
  auto bad = RunOnGpu(gpu_.get(), "SparseSoftmaxCrossEntropyWithLogits",
                      {Random(DT_FLOAT, {2, 3}, rng_), Tensor::FromVector<int32_t>({1, 3})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("label value 3"), std::string::npos) << bad.status();
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    CheckLowPrecision("Softmax", dt, {Random(DT_FLOAT, {64, 10}, rng_, -5, 5)}, {}, {2e-2, 2e-3});
  }
}

TEST_F(GpuOracleTest, MatMul) {
  struct Case {
    int64_t m, k, n;
  };
  const std::vector<Case> cases = {{256, 784, 512}, {256, 512, 10}, {1, 1, 1}, {3, 5, 7}, {0, 4, 3}, {4, 0, 3},
                                   {4, 3, 0},       {33, 65, 17}};
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const Tensor a = Random(dt, ta ? TensorShape{c.k, c.m} : TensorShape{c.m, c.k}, rng_);
          const Tensor b = Random(dt, tb ? TensorShape{c.n, c.k} : TensorShape{c.k, c.n}, rng_);
          Check("MatMul", {a, b}, {{"transpose_a", MakeAttr(ta)}, {"transpose_b", MakeAttr(tb)}},
                {1e-4, 1e-4 * std::sqrt(static_cast<double>(c.k) + 1)},
                absl::StrCat(c.m, "x", c.k, "x", c.n, " ta=", ta, " tb=", tb));
        }
      }
    }
  }
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    const double rtol = dt == DT_HALF ? 1e-2 : 3e-2;
    CheckLowPrecision("MatMul", dt, {Random(DT_FLOAT, {64, 256}, rng_), Random(DT_FLOAT, {256, 32}, rng_)},
                      {{"transpose_a", MakeAttr(false)}, {"transpose_b", MakeAttr(false)}}, {rtol, rtol * 4});
  }
  auto bad = RunOnGpu(gpu_.get(), "MatMul", {Random(DT_FLOAT, {2, 3}, rng_), Random(DT_FLOAT, {4, 5}, rng_)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, ConvolutionAndGradients) {
  struct Case {
    TensorShape input, filter;
    std::vector<int> strides, dilations;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{4, 8, 8, 1}, {3, 3, 1, 8}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},
      {{2, 9, 9, 3}, {3, 3, 3, 4}, {1, 2, 2, 1}, {1, 1, 1, 1}, "VALID"},
      {{2, 10, 7, 2}, {3, 2, 2, 5}, {1, 1, 1, 1}, {1, 2, 2, 1}, "SAME"},
      {{3, 5, 5, 6}, {1, 1, 6, 4}, {1, 1, 1, 1}, {1, 1, 1, 1}, "VALID"},
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},
      {{0, 4, 4, 2}, {3, 3, 2, 3}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},
      {{64, 8, 8, 8}, {3, 3, 8, 16}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},
  };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      const Attrs attrs = {{"strides", MakeAttr(c.strides)},
                           {"dilations", MakeAttr(c.dilations)},
                           {"padding", MakeAttr(c.padding)}};
      const std::string what = absl::StrCat(DataTypeString(dt), " ", c.input.DebugString(), " * ",
                                            c.filter.DebugString(), " ", c.padding);
      const Tensor x = Random(dt, c.input, rng_), f = Random(dt, c.filter, rng_);
      auto y = RunKernel(&cpu_, "Conv2D", {x, f}, attrs);
      ASSERT_TRUE(y.ok()) << what << ": " << y.status();
      const double k = static_cast<double>(c.filter.num_elements());
      const Tol tol{1e-4, 1e-5 * std::sqrt(k + 1) * 4};
      Check("Conv2D", {x, f}, attrs, tol, what);
      const Tensor dy = Random(dt, (*y)[0].shape(), rng_);
      const Tensor in_sizes = Tensor::FromVector<int32_t>(
          {static_cast<int32_t>(c.input.dim_size(0)), static_cast<int32_t>(c.input.dim_size(1)),
           static_cast<int32_t>(c.input.dim_size(2)), static_cast<int32_t>(c.input.dim_size(3))});
      const Tensor f_sizes = Tensor::FromVector<int32_t>(
          {static_cast<int32_t>(c.filter.dim_size(0)), static_cast<int32_t>(c.filter.dim_size(1)),
           static_cast<int32_t>(c.filter.dim_size(2)), static_cast<int32_t>(c.filter.dim_size(3))});
      Check("Conv2DBackpropInput", {in_sizes, f, dy}, attrs, tol, what);
      const double rows = static_cast<double>(dy.NumElements() / std::max<int64_t>(1, c.filter.dim_size(3)));
      Check("Conv2DBackpropFilter", {x, f_sizes, dy}, attrs, {1e-4, 1e-5 * std::sqrt(rows + 1) * 4}, what);
    }
  }
}

TEST_F(GpuOracleTest, MaxPoolAndGradient) {
  struct Case {
    TensorShape input;
    std::vector<int> ksize, strides;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{4, 8, 8, 8}, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"},
      {{2, 7, 9, 3}, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"},
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, "VALID"},
      {{3, 6, 6, 2}, {1, 3, 2, 1}, {1, 1, 1, 1}, "SAME"},
      {{0, 4, 4, 2}, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"},
  };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      const Attrs attrs = {{"ksize", MakeAttr(c.ksize)}, {"strides", MakeAttr(c.strides)},
                           {"padding", MakeAttr(c.padding)}};
      for (bool ties : {false, true}) {
        // With ties (few distinct values) the gradient must go to the first maximum.
        const Tensor x = ties ? Convert(Random(DT_INT32, c.input, rng_, 0, 3), DT_FLOAT) : Random(DT_FLOAT, c.input, rng_);
        const Tensor xt = dt == DT_FLOAT ? x : Random(dt, c.input, rng_);
        const std::string what = absl::StrCat(DataTypeString(dt), " ", c.input.DebugString(), " ties=", ties);
        Check("MaxPool", {xt}, attrs, {}, what);
        auto y = RunKernel(&cpu_, "MaxPool", {xt}, attrs);
        ASSERT_TRUE(y.ok()) << y.status();
        Check("MaxPoolGrad", {xt, (*y)[0], Random(dt, (*y)[0].shape(), rng_)}, attrs, {1e-6, 1e-6}, what);
      }
    }
  }
  CheckLowPrecision("MaxPool", DT_HALF, {Random(DT_FLOAT, {2, 6, 6, 4}, rng_)},
                    {{"ksize", MakeAttr(std::vector<int>{1, 2, 2, 1})},
                     {"strides", MakeAttr(std::vector<int>{1, 2, 2, 1})},
                     {"padding", MakeAttr("VALID")}},
                    {0, 0});
}

TEST_F(GpuOracleTest, AvgPoolAndGradient) {
  struct Case {
    TensorShape input;
    std::vector<int> ksize, strides;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{4, 8, 8, 8}, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"},
      {{2, 7, 9, 3}, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"},  // edge windows have fewer taps
      {{3, 6, 6, 2}, {1, 3, 2, 1}, {1, 1, 1, 1}, "SAME"},
      {{0, 4, 4, 2}, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"},
  };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      const Attrs attrs = {{"ksize", MakeAttr(c.ksize)}, {"strides", MakeAttr(c.strides)},
                           {"padding", MakeAttr(c.padding)}};
      const std::string what = absl::StrCat(DataTypeString(dt), " ", c.input.DebugString(), " ", c.padding);
      const Tensor x = Random(dt, c.input, rng_);
      Check("AvgPool", {x}, attrs, {1e-6, 1e-6}, what);
      auto y = RunKernel(&cpu_, "AvgPool", {x}, attrs);
      ASSERT_TRUE(y.ok()) << y.status();
      std::vector<int32_t> dims(c.input.dim_sizes().begin(), c.input.dim_sizes().end());
      Check("AvgPoolGrad", {Tensor::FromVector<int32_t>(dims), Random(dt, (*y)[0].shape(), rng_)}, attrs, {1e-6, 1e-6},
            what);
    }
  }
  const Attrs pool = {{"ksize", MakeAttr(std::vector<int>{1, 3, 3, 1})},
                      {"strides", MakeAttr(std::vector<int>{1, 2, 2, 1})},
                      {"padding", MakeAttr("SAME")}};
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    CheckLowPrecision("AvgPool", dt, {Random(DT_FLOAT, {2, 7, 7, 4}, rng_)}, pool, {1e-2, 1e-2});
  }
  CheckSameError("AvgPoolGrad", {Tensor::FromVector<int32_t>({2, 7, 7, 4}), Random(DT_FLOAT, {2, 3, 3, 4}, rng_)},
                 pool, "grad of the wrong shape");
}

TEST_F(GpuOracleTest, ArrayOps) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_INT32, DT_BOOL}) {
    for (const TensorShape& s : {TensorShape{}, TensorShape{0}, TensorShape{1}, TensorShape{300, 257}}) {
      const Tensor x = Random(dt, s, rng_);
      const std::string what = absl::StrCat(DataTypeString(dt), " ", s.DebugString());
      Check("Identity", {x}, {}, {}, what);
      Check("StopGradient", {x}, {}, {}, what);
      Check("ZerosLike", {x}, {}, {}, what);
      Check("OnesLike", {x}, {}, {}, what);
      Check("Shape", {x}, {{"out_type", MakeAttr(DT_INT32)}}, {}, what);
      Check("Shape", {x}, {{"out_type", MakeAttr(DT_INT64)}}, {}, what);
      Check("Size", {x}, {{"out_type", MakeAttr(DT_INT32)}}, {}, what);
      Check("Reshape", {x, Tensor::FromVector<int32_t>({-1})}, {}, {}, what);
      Check("ExpandDims", {x, Tensor::FromVector<int32_t>({0})}, {}, {}, what);
      Check("ExpandDims", {x, Tensor::FromVector<int64_t>({-1})}, {}, {}, what);
      Check("Fill", {Tensor::FromVector<int32_t>({3, 1000}), Random(dt, {}, rng_)}, {}, {}, what);
      Check("Const", {}, {{"value", MakeAttr(x)}, {"dtype", MakeAttr(dt)}}, {}, what);
    }
    Check("BroadcastTo", {Random(dt, {3, 1}, rng_), Tensor::FromVector<int32_t>({2, 3, 1000})}, {}, {});
    Check("BroadcastTo", {Random(dt, {5}, rng_), Tensor::FromVector<int32_t>({4, 1, 5})}, {}, {});
    Check("BroadcastTo", {Random(dt, {}, rng_), Tensor::FromVector<int32_t>({0, 3})}, {}, {});
  }
  Check("Reshape", {Random(DT_FLOAT, {6, 4}, rng_), Tensor::FromVector<int64_t>({3, -1})}, {}, {});
  Check("Squeeze", {Random(DT_FLOAT, {1, 6, 1, 4}, rng_)}, {}, {});
  Check("Squeeze", {Random(DT_FLOAT, {1, 6, 1, 4}, rng_)}, {{"squeeze_dims", MakeAttr(std::vector<int64_t>{2})}}, {});
  auto bad = RunOnGpu(gpu_.get(), "Reshape", {Random(DT_FLOAT, {6, 4}, rng_), Tensor::FromVector<int32_t>({5, -1})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, Range) {
  // Rising, falling, empty and fractional ranges of each dtype; int32 lives in
  // host memory, the others are written to the device.
  Check("Range",
        {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(11), Tensor::Scalar<int32_t>(3)}, {},
        {});
  Check("Range",
        {Tensor::Scalar<int32_t>(4), Tensor::Scalar<int32_t>(4), Tensor::Scalar<int32_t>(1)}, {},
        {});
  Check("Range",
        {Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(-100000), Tensor::Scalar<int64_t>(-7)},
        {}, {});
  Check("Range",
        {Tensor::Scalar<float>(0.f), Tensor::Scalar<float>(1.f), Tensor::Scalar<float>(0.001f)}, {},
        {});
  Check("Range",
        {Tensor::Scalar<double>(-1.5), Tensor::Scalar<double>(2.5), Tensor::Scalar<double>(0.25)},
        {}, {});
  CheckSameError(
      "Range", {Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(4), Tensor::Scalar<int32_t>(0)},
      {}, "delta 0");
  CheckSameError(
      "Range", {Tensor::Scalar<float>(4.f), Tensor::Scalar<float>(0.f), Tensor::Scalar<float>(1.f)},
      {}, "start above limit, delta positive");
}

TEST_F(GpuOracleTest, DynamicPartition) {
  const auto parts = [](int64_t n) { return Attrs{{"num_partitions", MakeAttr(n)}}; };
  for (DataType dt : {DT_FLOAT, DT_INT64, DT_INT32, DT_BOOL}) {
    const std::string what = DataTypeString(dt);
    // Partition 1 gets nothing; int32 data stays in host memory.
    Check("DynamicPartition",
          {Random(dt, {6, 3}, rng_), Tensor::FromVector<int32_t>({2, 0, 2, 2, 0, 3})}, parts(4), {},
          what);
    Check("DynamicPartition",
          {Random(dt, {2, 3, 5}, rng_), Tensor::FromVector<int32_t>({1, 0, 1, 1, 0, 0}, {2, 3})},
          parts(2), {}, what);
  }
  Tensor many(DT_INT32, TensorShape{5000});
  for (int64_t i = 0; i < many.NumElements(); ++i)
    many.data<int32_t>()[i] = static_cast<int32_t>(rng_() % 7);
  Check("DynamicPartition", {Random(DT_DOUBLE, {5000, 17}, rng_), many}, parts(7), {});
  CheckSameError("DynamicPartition",
                 {Random(DT_FLOAT, {3}, rng_), Tensor::FromVector<int32_t>({0, 3, 1})}, parts(3),
                 "a partition out of range");
}

TEST_F(GpuOracleTest, DynamicStitch) {
  // Two list inputs: run through RunKernelWithListInputs on both devices.
  const auto check = [&](const std::vector<Tensor>& indices, const std::vector<Tensor>& data,
                         const std::string& what) {
    auto want = RunKernelWithListInputs(&cpu_, "DynamicStitch", {indices, data});
    ASSERT_TRUE(want.ok()) << what << ": " << want.status();
    std::vector<Tensor> on_device;
    for (const Tensor& t : data) {
      auto d = ToDevice(gpu_.get(), t);
      ASSERT_TRUE(d.ok()) << d.status();
      on_device.push_back(*d);
    }
    auto got = RunKernelWithListInputs(gpu_.get(), "DynamicStitch", {indices, on_device});
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    auto host = ToHost(gpu_.get(), (*got)[0]);
    ASSERT_TRUE(host.ok()) << host.status();
    ExpectClose((*want)[0], *host, 0, 0, what);
  };
  for (DataType dt : {DT_FLOAT, DT_INT64, DT_INT32, DT_BOOL}) {
    const std::string what = DataTypeString(dt);
    // Rows 1 and 6 named by nobody (zeros); row 4 named twice (the later wins).
    check(
        {Tensor::FromVector<int32_t>({0, 4, 2}), Tensor::FromVector<int32_t>({5, 3, 4, 7}, {2, 2})},
        {Random(dt, {3, 4}, rng_), Random(dt, {2, 2, 4}, rng_)}, what);
    check({Tensor::FromVector<int32_t>({2, 0, 1})}, {Random(dt, {3}, rng_)}, what + " one input");
  }
  check({Tensor::FromVector<int32_t>({}), Tensor::FromVector<int32_t>({})},
        {Random(DT_FLOAT, {0, 3}, rng_), Random(DT_FLOAT, {0, 3}, rng_)}, "no rows");
  auto bad = RunKernelWithListInputs(
      gpu_.get(), "DynamicStitch",
      {{Tensor::FromVector<int32_t>({0, -1})}, {Random(DT_FLOAT, {2}, rng_)}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST_F(GpuOracleTest, TransposeSliceTileSplitAndAddN) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_BOOL}) {
    const std::string what = DataTypeString(dt);
    const Tensor x = Random(dt, {2, 3, 4, 5}, rng_);
    Check("Transpose", {x, Tensor::FromVector<int32_t>({0, 2, 1, 3})}, {}, {}, what);
    Check("Transpose", {x, Tensor::FromVector<int32_t>({3, 2, 1, 0})}, {}, {}, what);
    Check("Transpose", {Random(dt, {300, 257}, rng_), Tensor::FromVector<int32_t>({1, 0})}, {}, {}, what);
    Check("Slice", {x, Tensor::FromVector<int32_t>({1, 0, 2, 1}), Tensor::FromVector<int32_t>({1, 3, -1, 3})}, {}, {},
          what);
    Check("Slice", {x, Tensor::FromVector<int32_t>({0, 0, 0, 0}), Tensor::FromVector<int32_t>({-1, -1, -1, -1})}, {},
          {}, what);
    Check("Tile", {x, Tensor::FromVector<int32_t>({2, 1, 3, 1})}, {}, {}, what);
    Check("Tile", {Random(dt, {3, 1, 2}, rng_), Tensor::FromVector<int64_t>({2, 4, 0})}, {}, {}, what);
    Check("Tile", {Random(dt, {}, rng_), Tensor::FromVector<int32_t>({})}, {}, {}, what);
    for (int axis : {0, 2, -1}) {
      Check("Split", {Tensor::Scalar<int32_t>(axis), Random(dt, {4, 6, 8}, rng_)}, {{"num_split", MakeAttr(2)}}, {},
            what);
      Check("SplitV", {Random(dt, {4, 6, 8}, rng_), Tensor::FromVector<int64_t>({1, -1, 0}), Tensor::Scalar<int32_t>(axis)},
            {{"num_split", MakeAttr(3)}}, {}, what);
    }
    Check("SplitV", {x, Tensor::FromVector<int32_t>({2, 2}), Tensor::Scalar<int32_t>(2)}, {{"num_split", MakeAttr(2)}}, {},
          what);
    CheckSameError("Split", {Tensor::Scalar<int32_t>(1), x}, {{"num_split", MakeAttr(2)}}, what);
    CheckSameError("Tile", {x, Tensor::FromVector<int32_t>({2, 1})}, {}, what);
  }
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    Check("AddN", {Random(dt, {64, 33}, rng_), Random(dt, {64, 33}, rng_), Random(dt, {64, 33}, rng_)},
          {{"N", MakeAttr(3)}}, {}, DataTypeString(dt));
    Check("AddN", {Random(dt, {7}, rng_)}, {{"N", MakeAttr(1)}}, {}, DataTypeString(dt));
  }
}

TEST_F(GpuOracleTest, StridedSliceAndItsGradient) {
  auto masks = [](int64_t b, int64_t e, int64_t ell, int64_t na, int64_t sh) {
    return Attrs{{"begin_mask", MakeAttr(b)},     {"end_mask", MakeAttr(e)},
                 {"ellipsis_mask", MakeAttr(ell)}, {"new_axis_mask", MakeAttr(na)},
                 {"shrink_axis_mask", MakeAttr(sh)}};
  };
  auto v = [](std::vector<int32_t> x) { return Tensor::FromVector<int32_t>(x); };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_HALF, DT_INT64, DT_BOOL}) {
    const std::string what = DataTypeString(dt);
    const Tensor x = Random(dt, {4, 5, 6}, rng_);
    // x[1:, ::-2, 1:5:3], x[..., -1], x[tf.newaxis, 2, :, 1::2], x[:, :, :] (whole).
    Check("StridedSlice", {x, v({1, 0, 1}), v({0, 0, 5}), v({1, -2, 3})}, masks(2, 3, 0, 0, 0), {}, what);
    Check("StridedSlice", {x, v({0, -1}), v({0, 0}), v({1, 1})}, masks(0, 0, 1, 0, 2), {}, what);
    Check("StridedSlice", {x, v({0, 2, 0, 1}), v({0, 3, 0, 0}), v({1, 1, 1, 2})}, masks(4, 12, 0, 1, 2), {}, what);
    Check("StridedSlice", {x, v({0, 0, 0}), v({4, 5, 6}), v({1, 1, 1})}, masks(0, 0, 0, 0, 0), {}, what);
    Check("StridedSliceGrad", {v({4, 5, 6}), v({1, 0, 1}), v({0, 0, 5}), v({1, -2, 3}), Random(dt, {3, 3, 2}, rng_)},
          masks(2, 3, 0, 0, 0), {}, what);
    Check("StridedSliceGrad", {v({4, 5, 6}), v({0, -1}), v({0, 0}), v({1, 1}), Random(dt, {4, 5}, rng_)},
          masks(0, 0, 1, 0, 2), {}, what);
    CheckSameError("StridedSlice", {x, v({0, 9}), v({0, 0}), v({1, 1})}, masks(0, 0, 0, 0, 2), what);
    CheckSameError("StridedSlice", {x, v({0}), v({1}), v({0})}, masks(0, 0, 0, 0, 0), what);
    // MatrixBandPart: a causal mask's (0, -1), a band, everything (int64 bounds, as Keras's).
    for (const auto& [lo, up] : std::vector<std::pair<int64_t, int64_t>>{{0, -1}, {1, 2}, {-1, -1}, {0, 0}}) {
      Check("MatrixBandPart", {x, Tensor::Scalar<int64_t>(lo), Tensor::Scalar<int64_t>(up)}, {}, {}, what);
    }
    CheckSameError("MatrixBandPart", {x, Tensor::Scalar<int64_t>(6), Tensor::Scalar<int64_t>(0)}, {}, what);
  }
}

TEST_F(GpuOracleTest, BatchMatMul) {
  const Attrs none;
  auto adj = [](bool x, bool y) { return Attrs{{"adj_x", MakeAttr(x)}, {"adj_y", MakeAttr(y)}}; };
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    const std::string what = DataTypeString(dt);
    // Attention's shapes: one strided batched product.
    Check("BatchMatMulV2", {Random(dt, {8, 4, 32, 16}, rng_), Random(dt, {8, 4, 16, 32}, rng_)}, none, {1e-5, 1e-5}, what);
    Check("BatchMatMulV2", {Random(dt, {8, 4, 32, 16}, rng_), Random(dt, {8, 4, 32, 16}, rng_)}, adj(false, true),
          {1e-5, 1e-5}, what);
    Check("BatchMatMulV2", {Random(dt, {6, 16, 5}, rng_), Random(dt, {6, 16, 7}, rng_)}, adj(true, false), {1e-5, 1e-5}, what);
    // One y for every batch (stride 0), and a partial broadcast (per batch).
    Check("BatchMatMulV2", {Random(dt, {3, 5, 8}, rng_), Random(dt, {8, 4}, rng_)}, none, {1e-5, 1e-5}, what);
    Check("BatchMatMulV2", {Random(dt, {2, 1, 5, 8}, rng_), Random(dt, {1, 3, 8, 4}, rng_)}, adj(false, false),
          {1e-5, 1e-5}, what);
    Check("BatchMatMulV2", {Random(dt, {2, 0, 3}, rng_), Random(dt, {2, 3, 4}, rng_)}, none, {}, what);
  }
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    CheckLowPrecision("BatchMatMulV2", dt, {Random(DT_FLOAT, {4, 16, 32}, rng_), Random(DT_FLOAT, {4, 32, 8}, rng_)},
                      none, {2e-2, 2e-2});
  }
  CheckSameError("BatchMatMulV2", {Random(DT_FLOAT, {2, 3, 4}, rng_), Random(DT_FLOAT, {3, 4, 5}, rng_)}, none,
                 "batch dims that do not broadcast");
}

TEST_F(GpuOracleTest, GatherAndSegmentSum) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_BOOL}) {
    const Tensor p = Random(dt, {5, 3}, rng_);
    const std::string what = DataTypeString(dt);
    Check("GatherV2", {p, Tensor::FromVector<int32_t>({4, 0, 4, 2}), Tensor::FromVector<int32_t>({0})}, {}, {}, what);
    Check("GatherV2", {p, Tensor::FromVector<int64_t>({2, 1}), Tensor::FromVector<int32_t>({1})}, {}, {}, what);
  }
  // An embedding table: 1000 rows of 64, 300 ids with repeats, 2-D ids.
  const Tensor table = Random(DT_FLOAT, {1000, 64}, rng_);
  Tensor ids(DT_INT32, TensorShape{30, 10});
  for (int64_t i = 0; i < ids.NumElements(); ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(rng_() % 1000);
  Check("GatherV2", {table, ids, Tensor::FromVector<int32_t>({0})}, {}, {});
  Check("GatherV2", {Random(DT_FLOAT, {2, 7, 3, 5}, rng_), Tensor::FromVector<int32_t>({6, 0, 3}),
                     Tensor::FromVector<int64_t>({1})}, {}, {});
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    Tensor seg(DT_INT32, TensorShape{300});
    for (int64_t i = 0; i < seg.NumElements(); ++i) seg.data<int32_t>()[i] = static_cast<int32_t>(rng_() % 40);
    // Sums of up to ~20 values in another order than the CPU's.
    Check("UnsortedSegmentSum", {Random(dt, {300, 64}, rng_), seg, Tensor::FromVector<int32_t>({40})}, {},
          {1e-5, 1e-5}, DataTypeString(dt));
    Check("UnsortedSegmentSum", {Random(dt, {6, 4}, rng_), Tensor::FromVector<int64_t>({0, 2, 0, 1, 2, 2}),
                                 Tensor::FromVector<int32_t>({3})}, {}, {1e-6, 1e-6}, DataTypeString(dt));
  }
  Check("UnsortedSegmentSum", {Random(DT_FLOAT, {4, 2, 3}, rng_), Tensor::FromVector<int32_t>({1, 1, 0, 4}),
                               Tensor::FromVector<int32_t>({5})}, {}, {1e-6, 1e-6});
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    CheckLowPrecision("UnsortedSegmentSum", dt, {Random(DT_FLOAT, {6, 8}, rng_), Tensor::FromVector<int32_t>({0, 1, 0, 1, 2, 0}),
                                                 Tensor::FromVector<int32_t>({3})}, {}, {2e-2, 2e-2});
  }
  // int32 indices (host memory) out of range: named, as on the CPU.
  auto bad = RunOnGpu(gpu_.get(), "GatherV2", {Random(DT_FLOAT, {5, 3}, rng_), Tensor::FromVector<int32_t>({0, 5}),
                                               Tensor::FromVector<int32_t>({0})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("indices[1] = 5"), std::string::npos) << bad.status();
  // int64 indices (device memory) out of range: a zero row, no fault.
  auto zero = RunOnGpu(gpu_.get(), "GatherV2", {Tensor::FromVector<float>({1, 2, 3}), Tensor::FromVector<int64_t>({7, 1}),
                                                Tensor::FromVector<int32_t>({0})});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ((*zero)[0].data<float>()[0], 0.0f);
  EXPECT_EQ((*zero)[0].data<float>()[1], 2.0f);
}

TEST_F(GpuOracleTest, ClipByValue) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    for (const TensorShape& s :
         {TensorShape{}, TensorShape{0}, TensorShape{7}, TensorShape{300, 257}}) {
      const std::string what = absl::StrCat(DataTypeString(dt), " ", s.DebugString());
      const Tensor t = Random(dt, s, rng_, -10, 10);
      // Scalar bounds, and bounds of t's shape (some crossing: min > max).
      Check("ClipByValue", {t, Random(dt, {}, rng_, -5, -1), Random(dt, {}, rng_, 1, 5)}, {}, {},
            what);
      Check("ClipByValue", {t, Random(dt, s, rng_, -5, 0), Random(dt, s, rng_, -1, 5)}, {}, {},
            what);
      Check("ClipByValue", {t, Random(dt, {}, rng_, -5, 0), Random(dt, s, rng_, 0, 5)}, {}, {},
            what);
    }
  }
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    CheckLowPrecision("ClipByValue", dt,
                      {Random(DT_FLOAT, {1000}, rng_), Tensor::Scalar<float>(-0.5f),
                       Random(DT_FLOAT, {1000}, rng_, 0, 1)},
                      {}, {0, 0});
  }
  CheckSameError(
      "ClipByValue",
      {Random(DT_FLOAT, {4}, rng_), Random(DT_FLOAT, {2}, rng_), Tensor::Scalar<float>(1)}, {},
      "clip_value_min of another shape");
}

TEST_F(GpuOracleTest, ResourceGather) {
  // The same rows from a variable made on each device, int32 and int64 ids.
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT64}) {
    const Tensor table = Random(dt, {1000, 64}, rng_, -50, 50);
    Tensor ids(DT_INT32, TensorShape{30, 10});
    for (int64_t i = 0; i < ids.NumElements(); ++i)
      ids.data<int32_t>()[i] = static_cast<int32_t>(rng_() % 1000);
    const std::string name = "table" + DataTypeString(dt);
    auto h_cpu = MakeVar(&cpu_, nullptr, name, table);
    auto h_gpu = MakeVar(gpu_.get(), gpu_.get(), name, table);
    ASSERT_TRUE(h_cpu.ok() && h_gpu.ok()) << h_cpu.status() << " " << h_gpu.status();
    const Attrs attrs = {{"dtype", MakeAttr(dt)}};
    for (const Tensor& idx :
         {ids, Tensor::FromVector<int64_t>({999, 0, 5, 5}), Tensor::FromVector<int32_t>({})}) {
      auto c = RunKernel(&cpu_, "ResourceGather", {*h_cpu, idx}, attrs);
      auto g = RunOnGpu(gpu_.get(), "ResourceGather", {*h_gpu, idx}, attrs);
      ASSERT_TRUE(c.ok() && g.ok()) << c.status() << " " << g.status();
      ExpectClose((*c)[0], (*g)[0], 0, 0,
                  "ResourceGather " + name + " " + idx.shape().DebugString());
    }
    // int32 ids out of range: named, as on the CPU.
    auto bad = RunOnGpu(gpu_.get(), "ResourceGather",
                        {*h_gpu, Tensor::FromVector<int32_t>({1, 1000})}, attrs);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
    EXPECT_NE(bad.status().message().find("ResourceGather indices[1] = 1000"), std::string::npos)
        << bad.status();
  }
}

TEST_F(GpuOracleTest, OptimizersAndVariables) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    for (int64_t n : {0, 1, 784 * 512}) {
      for (const std::string opt : {"ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam"}) {
        for (bool nesterov : {false, true}) {
          if (opt == "ResourceApplyGradientDescent" && nesterov) continue;
          const std::string name = absl::StrCat(opt, DataTypeString(dt), n, nesterov);
          const int slots = opt == "ResourceApplyAdam" ? 3 : opt == "ResourceApplyMomentum" ? 2 : 1;
          std::vector<Tensor> init;
          for (int i = 0; i < slots; ++i) init.push_back(Random(dt, {n}, rng_, i == 2 ? 0 : -1, 1));
          const Tensor grad = Random(dt, {n}, rng_);
          auto as_dt = [&](double v) {
            Tensor t(dt, TensorShape());
            if (dt == DT_FLOAT) *t.data<float>() = static_cast<float>(v); else *t.data<double>() = v;
            return t;
          };
          std::vector<Tensor> results[2];
          for (int side = 0; side < 2; ++side) {
            TestGpuDevice* g = side == 1 ? gpu_.get() : nullptr;
            std::vector<Tensor> in;
            for (int i = 0; i < slots; ++i) {
              auto h = MakeVar(&cpu_, g, absl::StrCat(name, "_", i), init[i]);
              ASSERT_TRUE(h.ok()) << h.status();
              in.push_back(*h);
            }
            Attrs attrs;
            if (opt == "ResourceApplyGradientDescent") {
              in.push_back(as_dt(0.1));
              in.push_back(grad);
            } else if (opt == "ResourceApplyMomentum") {
              in.push_back(as_dt(0.01));
              in.push_back(grad);
              in.push_back(as_dt(0.9));
              attrs["use_nesterov"] = MakeAttr(nesterov);
            } else {
              for (double v : {0.9 * 0.9, 0.999 * 0.999, 0.001, 0.9, 0.999, 1e-7}) in.push_back(as_dt(v));
              in.push_back(grad);
              attrs["use_nesterov"] = MakeAttr(nesterov);
            }
            // Two steps: the second runs on buffers the first updated in place.
            for (int step = 0; step < 2; ++step) {
              auto r = g != nullptr ? RunOnGpu(g, opt, in, attrs) : RunKernel(&cpu_, opt, in, attrs);
              ASSERT_TRUE(r.ok()) << opt << ": " << r.status();
            }
            for (int i = 0; i < slots; ++i) {
              const Attrs read = {{"dtype", MakeAttr(dt)}};
              auto v = g != nullptr ? RunOnGpu(g, "ReadVariableOp", {in[i]}, read)
                                    : RunKernel(&cpu_, "ReadVariableOp", {in[i]}, read);
              ASSERT_TRUE(v.ok()) << v.status();
              results[side].push_back((*v)[0]);
            }
          }
          for (int i = 0; i < slots; ++i) ExpectClose(results[0][i], results[1][i], 1e-5, 1e-6, name);
        }
      }
    }
  }
  // AssignAdd on an int64 step counter and a float variable; copy-on-write
  // keeps an earlier read unchanged.
  for (DataType dt : {DT_INT64, DT_FLOAT}) {
    const Tensor init = Random(dt, {1000}, rng_), delta = Random(dt, {1000}, rng_);
    auto h = MakeVar(gpu_.get(), gpu_.get(), absl::StrCat("counter", DataTypeString(dt)), init);
    ASSERT_TRUE(h.ok()) << h.status();
    auto h_cpu = MakeVar(&cpu_, nullptr, absl::StrCat("counter", DataTypeString(dt)), init);
    ASSERT_TRUE(h_cpu.ok()) << h_cpu.status();
    const Attrs read = {{"dtype", MakeAttr(dt)}};
    // Read before the update on the device (the snapshot must survive it).
    auto snap = RunKernel(gpu_.get(), "ReadVariableOp", {*h}, read);
    ASSERT_TRUE(snap.ok()) << snap.status();
    auto up = RunOnGpu(gpu_.get(), "AssignAddVariableOp", {*h, delta}, {});
    ASSERT_TRUE(up.ok()) << up.status();
    ASSERT_TRUE(RunKernel(&cpu_, "AssignAddVariableOp", {*h_cpu, delta}).ok());
    auto snap_host = ToHost(gpu_.get(), (*snap)[0]);
    ASSERT_TRUE(snap_host.ok());
    ExpectClose(init, *snap_host, 0, 0, "snapshot before AssignAdd");
    auto after = RunOnGpu(gpu_.get(), "ReadVariableOp", {*h}, read);
    auto after_cpu = RunKernel(&cpu_, "ReadVariableOp", {*h_cpu}, read);
    ASSERT_TRUE(after.ok() && after_cpu.ok());
    ExpectClose((*after_cpu)[0], (*after)[0], 0, 0, "AssignAddVariableOp " + DataTypeString(dt));
    auto init_ok = RunOnGpu(gpu_.get(), "VarIsInitializedOp", {*h}, {});
    ASSERT_TRUE(init_ok.ok()) << init_ok.status();
    EXPECT_TRUE((*init_ok)[0].data<bool>()[0]);
  }
}

}  // namespace
}  // namespace strata
