// Elementwise math kernels against plain reference loops: binary ops over
// many broadcasting patterns (same shape, scalars, collapsed ranks 1-5, the
// any-rank fallback, the thread-pool path, empty tensors), unary ops, Equal,
// AddN, Select/SelectV2 and Cast, plus their error cases.

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using testing::BroadcastOffset;
using testing::ExpectTensorNear;
using testing::RandomTensor;

struct ShapePair {
  TensorShape x, y;
};

// Shapes covering every path of cwise::BinaryOp.
std::vector<ShapePair> BroadcastCases() {
  return {
      {TensorShape{3, 4}, TensorShape{3, 4}},                 // same shape
      {TensorShape{}, TensorShape{}},                         // scalars
      {TensorShape{3, 4}, TensorShape{}},                     // scalar right
      {TensorShape{}, TensorShape{2, 5}},                     // scalar left
      {TensorShape{1}, TensorShape{2, 5}},                    // one element, lower rank
      {TensorShape{2, 5}, TensorShape{1, 1, 1}},              // one element raising the rank
      {TensorShape{6, 7}, TensorShape{7}},                    // bias-like (rank 2)
      {TensorShape{7}, TensorShape{6, 7}},
      {TensorShape{3, 1}, TensorShape{1, 4}},                 // outer product
      {TensorShape{2, 3, 1}, TensorShape{1, 4}},              // rank 3
      {TensorShape{2, 1, 3, 1}, TensorShape{1, 4, 1, 5}},     // rank 4
      {TensorShape{4, 1, 3, 1, 5}, TensorShape{1, 2, 1, 6, 1}},  // rank 5
      {TensorShape{2, 1, 2, 1, 2, 1}, TensorShape{1, 3, 1, 3, 1, 3}},  // rank 6: fallback
      {TensorShape{300, 200}, TensorShape{200}},              // large: thread pool
      {TensorShape{300, 200}, TensorShape{300, 200}},
      {TensorShape{300, 1}, TensorShape{1, 200}},
      {TensorShape{0, 3}, TensorShape{3}},                    // empty
      {TensorShape{0}, TensorShape{}},
      {TensorShape{2, 0}, TensorShape{2, 1}},
  };
}

TensorShape BroadcastShape(const TensorShape& a, const TensorShape& b) {
  const int r = std::max(a.dims(), b.dims());
  DimVector d(r);
  for (int i = 0; i < r; ++i) {
    const int ia = a.dims() - r + i, ib = b.dims() - r + i;
    const int64_t da = ia >= 0 ? a.dim_size(ia) : 1, db = ib >= 0 ? b.dim_size(ib) : 1;
    d[i] = da == 1 ? db : da;
  }
  return *TensorShape::FromDims(d);
}

// Runs `op` on random inputs of each broadcast case and compares with `ref`.
template <typename T>
void CheckBinary(const std::string& op, std::function<T(T, T)> ref, double lo_x, double hi_x,
                 double lo_y, double hi_y, int threads = 2) {
  StandaloneCpuDevice dev(threads);
  std::mt19937 rng(42);
  for (const ShapePair& c : BroadcastCases()) {
    SCOPED_TRACE(op + " " + c.x.DebugString() + " " + c.y.DebugString());
    Tensor x = RandomTensor<T>(c.x, rng, lo_x, hi_x);
    Tensor y = RandomTensor<T>(c.y, rng, lo_y, hi_y);
    auto out = RunKernel(&dev, op, {x, y});
    ASSERT_TRUE(out.ok()) << out.status();
    const TensorShape shape = BroadcastShape(c.x, c.y);
    Tensor want(DataTypeToEnum<T>::value, shape);
    for (int64_t i = 0; i < shape.num_elements(); ++i) {
      want.data<T>()[i] = ref(x.data<T>()[BroadcastOffset(c.x, shape, i)],
                              y.data<T>()[BroadcastOffset(c.y, shape, i)]);
    }
    ExpectTensorNear<T>((*out)[0], want, 1e-5);
  }
}

TEST(BinaryKernelTest, FloatArithmeticMatchesReference) {
  CheckBinary<float>("Add", [](float a, float b) { return a + b; }, -3, 3, -3, 3);
  CheckBinary<float>("AddV2", [](float a, float b) { return a + b; }, -3, 3, -3, 3);
  CheckBinary<float>("Sub", [](float a, float b) { return a - b; }, -3, 3, -3, 3);
  CheckBinary<float>("SquaredDifference", [](float a, float b) { return (a - b) * (a - b); }, -3, 3, -3, 3);
  CheckBinary<float>("Mul", [](float a, float b) { return a * b; }, -3, 3, -3, 3);
  CheckBinary<float>("RealDiv", [](float a, float b) { return a / b; }, -3, 3, 0.5, 3);
  CheckBinary<float>("Maximum", [](float a, float b) { return std::max(a, b); }, -3, 3, -3, 3);
  CheckBinary<float>("Minimum", [](float a, float b) { return std::min(a, b); }, -3, 3, -3, 3);
  CheckBinary<float>("Pow", [](float a, float b) { return std::pow(a, b); }, 0.1, 3, -2, 2);
}

TEST(BinaryKernelTest, OneThreadDeviceGivesTheSameResults) {
  CheckBinary<float>("Mul", [](float a, float b) { return a * b; }, -3, 3, -3, 3, /*threads=*/1);
}

TEST(BinaryKernelTest, DoubleAndIntegerTypes) {
  CheckBinary<double>("Sub", [](double a, double b) { return a - b; }, -3, 3, -3, 3);
  CheckBinary<double>("SquaredDifference", [](double a, double b) { return (a - b) * (a - b); }, -3, 3, -3, 3);
  CheckBinary<int64_t>("SquaredDifference", [](int64_t a, int64_t b) { return (a - b) * (a - b); }, -9, 9, -9, 9);
  CheckBinary<double>("RealDiv", [](double a, double b) { return a / b; }, -3, 3, 1, 3);
  CheckBinary<int32_t>("AddV2", [](int32_t a, int32_t b) { return a + b; }, -100, 100, -100, 100);
  CheckBinary<int32_t>("Mul", [](int32_t a, int32_t b) { return a * b; }, -100, 100, -100, 100);
  CheckBinary<int64_t>("Maximum", [](int64_t a, int64_t b) { return std::max(a, b); }, -9, 9, -9,
                       9);
  CheckBinary<int32_t>("Pow",
                       [](int32_t a, int32_t b) {
                         int32_t r = 1;
                         for (int i = 0; i < b; ++i) r *= a;
                         return r;
                       },
                       -5, 5, 0, 6);
}

TEST(BinaryKernelTest, IncompatibleShapesAreAnError) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "AddV2", {Tensor(DT_FLOAT, TensorShape{2, 3}),
                                       Tensor(DT_FLOAT, TensorShape{4})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Incompatible shapes: [2,3] vs. [4]"), std::string::npos)
      << out.status();
}

TEST(BinaryKernelTest, IntegerPowWithNegativeExponentIsAnError) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "Pow", {Tensor::FromVector<int32_t>({2, 3}),
                                     Tensor::FromVector<int32_t>({1, -1})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BinaryKernelTest, MismatchedDtypesAreAnError) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "Mul", {Tensor::Scalar<float>(1), Tensor::Scalar<int32_t>(2)});
  EXPECT_FALSE(out.ok());
}

template <typename T>
void CheckUnary(const std::string& op, std::function<double(double)> ref, double lo, double hi) {
  StandaloneCpuDevice dev(2);
  std::mt19937 rng(3);
  for (const TensorShape& s : {TensorShape{}, TensorShape{1}, TensorShape{5, 7},
                               TensorShape{40000}, TensorShape{0}, TensorShape{2, 0, 3}}) {
    SCOPED_TRACE(op + " " + s.DebugString());
    Tensor x = RandomTensor<T>(s, rng, lo, hi);
    auto out = RunKernel(&dev, op, {x});
    ASSERT_TRUE(out.ok()) << out.status();
    Tensor want(DataTypeToEnum<T>::value, s);
    for (int64_t i = 0; i < s.num_elements(); ++i) {
      want.data<T>()[i] = static_cast<T>(ref(static_cast<double>(x.data<T>()[i])));
    }
    ExpectTensorNear<T>((*out)[0], want, 2e-6);
  }
}

TEST(UnaryKernelTest, MatchesReference) {
  CheckUnary<float>("Neg", [](double a) { return -a; }, -3, 3);
  CheckUnary<float>("Square", [](double a) { return a * a; }, -3, 3);
  CheckUnary<float>("Sqrt", [](double a) { return std::sqrt(a); }, 0, 9);
  CheckUnary<float>("Rsqrt", [](double a) { return 1 / std::sqrt(a); }, 0.1, 9);
  CheckUnary<float>("Exp", [](double a) { return std::exp(a); }, -5, 5);
  CheckUnary<float>("Log", [](double a) { return std::log(a); }, 0.01, 100);
  CheckUnary<double>("Exp", [](double a) { return std::exp(a); }, -5, 5);
  CheckUnary<int32_t>("Neg", [](double a) { return -a; }, -50, 50);
  CheckUnary<int64_t>("Square", [](double a) { return a * a; }, -50, 50);
  CheckUnary<float>("Floor", [](double a) { return std::floor(a); }, -5, 5);
  CheckUnary<double>("Floor", [](double a) { return std::floor(a); }, -5, 5);
}

TEST(ClipByValueKernelTest, ScalarAndElementwiseBoundsAndErrors) {
  StandaloneCpuDevice dev;
  Tensor t = Tensor::FromVector<float>({-3, -1, 0, 2, 5});
  auto out = RunKernel(&dev, "ClipByValue", {t, Tensor::Scalar<float>(-1.5f), Tensor::Scalar<float>(2.5f)});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear<float>((*out)[0], Tensor::FromVector<float>({-1.5f, -1, 0, 2, 2.5f}), 0);
  out = RunKernel(&dev, "ClipByValue", {Tensor::FromVector<int32_t>({-3, 4, 9}), Tensor::FromVector<int32_t>({0, 5, 0}),
                                        Tensor::FromVector<int32_t>({1, 6, 8})});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear<int32_t>((*out)[0], Tensor::FromVector<int32_t>({0, 5, 8}), 0);
  auto bad = RunKernel(&dev, "ClipByValue", {t, Tensor::FromVector<float>({0, 1}), Tensor::Scalar<float>(1.f)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("clip_value_min"), std::string::npos) << bad.status();
}

TEST(CumsumKernelTest, EveryAxisExclusiveAndReverse) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(5);
  Tensor x = RandomTensor<double>(TensorShape{3, 4, 2}, rng, -2, 2);
  for (const bool prod : {false, true})
  for (int axis = -3; axis < 3; ++axis) {
    const int a = axis < 0 ? axis + 3 : axis;
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(absl::StrCat(prod ? "Cumprod" : "Cumsum", " axis ", axis, exclusive ? " exclusive" : "",
                                  reverse ? " reverse" : ""));
        auto out = RunKernel(&dev, prod ? "Cumprod" : "Cumsum", {x, Tensor::Scalar<int32_t>(axis)},
                             {{"exclusive", MakeAttr(exclusive)}, {"reverse", MakeAttr(reverse)}});
        ASSERT_TRUE(out.ok()) << out.status();
        Tensor want(DT_DOUBLE, x.shape());
        const int64_t dims[3] = {3, 4, 2};
        for (int64_t i = 0; i < x.NumElements(); ++i) {
          int64_t idx[3] = {i / 8, (i / 2) % 4, i % 2};
          double sum = prod ? 1 : 0;
          for (int64_t j = 0; j < dims[a]; ++j) {
            const bool in = reverse ? (exclusive ? j > idx[a] : j >= idx[a]) : (exclusive ? j < idx[a] : j <= idx[a]);
            if (!in) continue;
            int64_t k[3] = {idx[0], idx[1], idx[2]};
            k[a] = j;
            const double v = x.data<double>()[k[0] * 8 + k[1] * 2 + k[2]];
            sum = prod ? sum * v : sum + v;
          }
          want.data<double>()[i] = sum;
        }
        ExpectTensorNear<double>((*out)[0], want, 1e-12);
      }
    }
  }
  EXPECT_FALSE(RunKernel(&dev, "Cumsum", {x, Tensor::Scalar<int32_t>(3)}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Cumsum", {Tensor::Scalar<float>(1.f), Tensor::Scalar<int32_t>(0)}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Cumsum", {x, Tensor::FromVector<int32_t>({0})}).ok());
}

TEST(UnaryKernelTest, NoIntegerKernelForExp) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "Exp", {Tensor::Scalar<int32_t>(1)});
  EXPECT_FALSE(out.ok());  // int32 is not an allowed type for Exp
}

TEST(EqualKernelTest, BroadcastsAndReturnsBool) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(5);
  Tensor x = RandomTensor<int32_t>(TensorShape{4, 3}, rng, 0, 2);
  Tensor y = RandomTensor<int32_t>(TensorShape{3}, rng, 0, 2);
  auto out = RunKernel(&dev, "Equal", {x, y});
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor want(DT_BOOL, TensorShape{4, 3});
  for (int64_t i = 0; i < 12; ++i) want.data<bool>()[i] = x.data<int32_t>()[i] == y.data<int32_t>()[i % 3];
  ExpectTensorNear<bool>((*out)[0], want);

  Tensor a = RandomTensor<float>(TensorShape{50000}, rng, 0, 1);
  Tensor b = a.DeepCopy();
  b.data<float>()[7] += 1;
  out = RunKernel(&dev, "Equal", {a, b});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 50000; ++i) ASSERT_EQ((*out)[0].data<bool>()[i], i != 7) << i;
}

TEST(CompareKernelTest, ComparisonsAndLogicalOpsBroadcastToBool) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(9);
  const Tensor x = RandomTensor<float>(TensorShape{4, 3}, rng, -1, 1);
  const Tensor y = RandomTensor<float>(TensorShape{3}, rng, -1, 1);
  const std::vector<std::pair<std::string, std::function<bool(float, float)>>> cases = {
      {"Less", [](float a, float b) { return a < b; }},      {"LessEqual", [](float a, float b) { return a <= b; }},
      {"Greater", [](float a, float b) { return a > b; }},   {"GreaterEqual", [](float a, float b) { return a >= b; }},
      {"NotEqual", [](float a, float b) { return a != b; }},
  };
  for (const auto& [op, fn] : cases) {
    auto out = RunKernel(&dev, op, {x, x.dtype() == DT_FLOAT ? y : y});
    ASSERT_TRUE(out.ok()) << op << ": " << out.status();
    ASSERT_EQ((*out)[0].dtype(), DT_BOOL) << op;
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_EQ((*out)[0].data<bool>()[i], fn(x.data<float>()[i], y.data<float>()[i % 3])) << op << " " << i;
    }
  }
  // a <= a and !(a < a): ties count.
  auto ties = RunKernel(&dev, "LessEqual", {x, x});
  ASSERT_TRUE(ties.ok());
  for (int64_t i = 0; i < 12; ++i) EXPECT_TRUE((*ties)[0].data<bool>()[i]);
  const Tensor p = Tensor::FromVector<bool>({true, true, false, false});
  const Tensor q = Tensor::FromVector<bool>({true, false, true, false});
  auto a = RunKernel(&dev, "LogicalAnd", {p, q});
  auto o = RunKernel(&dev, "LogicalOr", {p, q});
  auto n = RunKernel(&dev, "LogicalNot", {p});
  ASSERT_TRUE(a.ok() && o.ok() && n.ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*a)[0].data<bool>()[i], p.data<bool>()[i] && q.data<bool>()[i]);
    EXPECT_EQ((*o)[0].data<bool>()[i], p.data<bool>()[i] || q.data<bool>()[i]);
    EXPECT_EQ((*n)[0].data<bool>()[i], !p.data<bool>()[i]);
  }
  // NotEqual of shapes that do not broadcast, when told not to fail: true.
  auto lax = RunKernel(&dev, "NotEqual", {Tensor(DT_FLOAT, TensorShape{2}), Tensor(DT_FLOAT, TensorShape{3})},
                       {{"incompatible_shape_error", MakeAttr(false)}});
  ASSERT_TRUE(lax.ok()) << lax.status();
  EXPECT_TRUE(*(*lax)[0].data<bool>());
}

TEST(EqualKernelTest, IncompatibleShapes) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{2}), y(DT_FLOAT, TensorShape{3});
  auto strict = RunKernel(&dev, "Equal", {x, y});
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  auto lax = RunKernel(&dev, "Equal", {x, y}, {{"incompatible_shape_error", MakeAttr(false)}});
  ASSERT_TRUE(lax.ok()) << lax.status();
  EXPECT_EQ((*lax)[0].shape(), TensorShape{});
  EXPECT_FALSE(*(*lax)[0].data<bool>());
}

TEST(AddNKernelTest, SumsAnyNumberOfInputs) {
  StandaloneCpuDevice dev(2);
  std::mt19937 rng(9);
  for (int n : {1, 2, 3, 4, 5, 7, 8}) {
    for (const TensorShape& s : {TensorShape{}, TensorShape{3, 5}, TensorShape{70000}, TensorShape{0, 2}}) {
      SCOPED_TRACE(absl::StrCat("N=", n, " ", s.DebugString()));
      std::vector<Tensor> in;
      Tensor want(DT_FLOAT, s);
      for (int64_t i = 0; i < s.num_elements(); ++i) want.data<float>()[i] = 0;
      for (int k = 0; k < n; ++k) {
        in.push_back(RandomTensor<float>(s, rng, -1, 1));
        for (int64_t i = 0; i < s.num_elements(); ++i) want.data<float>()[i] += in.back().data<float>()[i];
      }
      auto out = RunKernel(&dev, "AddN", in);
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectTensorNear<float>((*out)[0], want, 1e-5);
    }
  }
}

TEST(AddNKernelTest, MismatchedShapesAreAnError) {
  StandaloneCpuDevice dev;
  auto out = RunKernel(&dev, "AddN", {Tensor(DT_FLOAT, TensorShape{2}), Tensor(DT_FLOAT, TensorShape{3})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectKernelTest, ElementwiseScalarAndRowConditions) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(11);
  Tensor t = RandomTensor<float>(TensorShape{4, 3}, rng, -1, 1);
  Tensor e = RandomTensor<float>(TensorShape{4, 3}, rng, -1, 1);
  // Same shape.
  Tensor c = RandomTensor<bool>(TensorShape{4, 3}, rng, 0, 1);
  auto out = RunKernel(&dev, "Select", {c, t, e});
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor want(DT_FLOAT, TensorShape{4, 3});
  for (int i = 0; i < 12; ++i) want.data<float>()[i] = c.data<bool>()[i] ? t.data<float>()[i] : e.data<float>()[i];
  ExpectTensorNear<float>((*out)[0], want);
  // Scalar.
  out = RunKernel(&dev, "Select", {Tensor::Scalar<bool>(false), t, e});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear<float>((*out)[0], e);
  // A vector over rows.
  Tensor rows = Tensor::FromVector<bool>({true, false, false, true});
  out = RunKernel(&dev, "Select", {rows, t, e});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 12; ++i) {
    want.data<float>()[i] = rows.data<bool>()[i / 3] ? t.data<float>()[i] : e.data<float>()[i];
  }
  ExpectTensorNear<float>((*out)[0], want);
}

TEST(SelectKernelTest, BadShapesAreErrors) {
  StandaloneCpuDevice dev;
  Tensor t(DT_FLOAT, TensorShape{4, 3}), e(DT_FLOAT, TensorShape{4, 3});
  EXPECT_FALSE(RunKernel(&dev, "Select", {Tensor(DT_BOOL, TensorShape{3}), t, e}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Select", {Tensor(DT_BOOL, TensorShape{4, 3}), t,
                                          Tensor(DT_FLOAT, TensorShape{3})}).ok());
  EXPECT_FALSE(RunKernel(&dev, "SelectV2", {Tensor(DT_BOOL, TensorShape{2}), t, e}).ok());
}

TEST(SelectV2KernelTest, BroadcastsAllThree) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(13);
  struct Case {
    TensorShape c, t, e;
  };
  for (const Case& k : std::vector<Case>{{TensorShape{3, 1}, TensorShape{1, 4}, TensorShape{4}},
                                         {TensorShape{}, TensorShape{2, 3}, TensorShape{2, 3}},
                                         {TensorShape{}, TensorShape{2, 3}, TensorShape{3}},
                                         {TensorShape{2, 3}, TensorShape{2, 3}, TensorShape{2, 3}},
                                         {TensorShape{2, 1, 3}, TensorShape{}, TensorShape{4, 1}},
                                         {TensorShape{0, 3}, TensorShape{3}, TensorShape{1}}}) {
    SCOPED_TRACE(k.c.DebugString() + k.t.DebugString() + k.e.DebugString());
    Tensor c = RandomTensor<bool>(k.c, rng, 0, 1);
    Tensor t = RandomTensor<int32_t>(k.t, rng, 0, 100);
    Tensor e = RandomTensor<int32_t>(k.e, rng, -100, -1);
    auto out = RunKernel(&dev, "SelectV2", {c, t, e});
    ASSERT_TRUE(out.ok()) << out.status();
    const TensorShape shape = BroadcastShape(k.c, BroadcastShape(k.t, k.e));
    Tensor want(DT_INT32, shape);
    for (int64_t i = 0; i < shape.num_elements(); ++i) {
      want.data<int32_t>()[i] = c.data<bool>()[BroadcastOffset(k.c, shape, i)]
                                    ? t.data<int32_t>()[BroadcastOffset(k.t, shape, i)]
                                    : e.data<int32_t>()[BroadcastOffset(k.e, shape, i)];
    }
    ExpectTensorNear<int32_t>((*out)[0], want);
  }
}

TEST(CastKernelTest, ConvertsBetweenTypes) {
  StandaloneCpuDevice dev;
  auto cast = [&](const Tensor& x, DataType dst) {
    auto out = RunKernel(&dev, "Cast", {x}, {{"DstT", MakeAttr(dst)}});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  };
  Tensor f = Tensor::FromVector<float>({-2.7f, -0.5f, 0.f, 0.5f, 3.9f});
  ExpectTensorNear<int32_t>(cast(f, DT_INT32), Tensor::FromVector<int32_t>({-2, 0, 0, 0, 3}));
  ExpectTensorNear<bool>(cast(f, DT_BOOL), Tensor::FromVector<bool>({true, true, false, true, true}));
  ExpectTensorNear<double>(cast(f, DT_DOUBLE),
                           Tensor::FromVector<double>({-2.7f, -0.5f, 0.f, 0.5f, 3.9f}), 0);
  ExpectTensorNear<float>(cast(Tensor::FromVector<bool>({true, false}), DT_FLOAT),
                          Tensor::FromVector<float>({1, 0}));
  ExpectTensorNear<float>(cast(Tensor::FromVector<int64_t>({1LL << 40, -3}), DT_FLOAT),
                          Tensor::FromVector<float>({1099511627776.f, -3}));
  ExpectTensorNear<float>(cast(f, DT_FLOAT), f);
  std::mt19937 rng(1);
  Tensor big = RandomTensor<int32_t>(TensorShape{50000}, rng, -1000, 1000);
  Tensor got = cast(big, DT_DOUBLE);
  for (int64_t i = 0; i < 50000; ++i) ASSERT_EQ(got.data<double>()[i], big.data<int32_t>()[i]);
  Tensor empty = cast(Tensor(DT_FLOAT, TensorShape{0, 4}), DT_INT64);
  EXPECT_EQ(empty.shape(), (TensorShape{0, 4}));
}

}  // namespace
}  // namespace strata
