// Activations, BiasAdd, Softmax, LogSoftmax and the sparse cross-entropy:
// each against a reference written here with plain loops, on random inputs;
// gradient kernels also against central differences of the forward kernels
// in double.

#include <cmath>
#include <random>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/nn_test_util.h"

namespace strata {
namespace {

using nn_test::ExpectClose;
using nn_test::NumericGradient;
using nn_test::RandomTensor;
using nn_test::RunOp;
using nn_test::RunStatus;

// Small, odd and large (parallel path: >= 32K elements) shapes.
std::vector<TensorShape> Shapes() {
  return {TensorShape{}, TensorShape{0, 3}, TensorShape{7}, TensorShape{3, 5, 2},
          TensorShape{257, 301}};
}

template <typename T>
Tensor MapRef(const Tensor& x, const std::function<double(double)>& f) {
  Tensor y(x.dtype(), x.shape());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    y.data<T>()[i] = static_cast<T>(f(static_cast<double>(x.data<T>()[i])));
  }
  return y;
}

template <typename T>
void CheckUnary(const std::string& op, const std::function<double(double)>& ref, double tol) {
  std::mt19937 rng(7);
  for (const TensorShape& s : Shapes()) {
    SCOPED_TRACE(op + " " + s.DebugString());
    Tensor x = RandomTensor<T>(s, rng, -6, 6);
    auto out = RunOp(op, {x});
    ASSERT_EQ(out.size(), 1u);
    ExpectClose<T>(out[0], MapRef<T>(x, ref), tol);
  }
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(ActivationTest, ReluMatchesReference) {
  auto relu = [](double x) { return x > 0 ? x : 0; };
  CheckUnary<float>("Relu", relu, 0);
  CheckUnary<double>("Relu", relu, 0);
  Tensor xi = Tensor::FromVector<int32_t>({-3, 0, 5, -1});
  ExpectClose<int32_t>(RunOp("Relu", {xi})[0], Tensor::FromVector<int32_t>({0, 0, 5, 0}), 0);
}

TEST(ActivationTest, SigmoidAndTanhMatchReference) {
  CheckUnary<float>("Sigmoid", Sigmoid, 1e-6);
  CheckUnary<double>("Sigmoid", Sigmoid, 1e-13);
  CheckUnary<float>("Tanh", [](double x) { return std::tanh(x); }, 1e-6);
  CheckUnary<double>("Tanh", [](double x) { return std::tanh(x); }, 1e-13);
}

TEST(ActivationTest, SaturatesWithoutNaN) {
  Tensor x = Tensor::FromVector<float>({-1000.f, -90.f, 90.f, 1000.f});
  Tensor s = RunOp("Sigmoid", {x})[0];
  Tensor t = RunOp("Tanh", {x})[0];
  const float want_s[] = {0, 0, 1, 1}, want_t[] = {-1, -1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(s.data<float>()[i], want_s[i], 1e-6) << i;
    EXPECT_NEAR(t.data<float>()[i], want_t[i], 1e-6) << i;
  }
}

// The gradient ops against central differences of their forward op in
// double: `grad_inputs` builds the grad op's inputs from x, y = f(x) and dy.
void CheckActivationGrad(const std::string& fwd, const std::string& grad,
                         const std::function<std::vector<Tensor>(const Tensor&, const Tensor&,
                                                                 const Tensor&)>& grad_inputs) {
  std::mt19937 rng(11);
  for (const TensorShape& s : {TensorShape{9}, TensorShape{4, 6}}) {
    SCOPED_TRACE(grad + " " + s.DebugString());
    Tensor x = RandomTensor<double>(s, rng, -3, 3);
    // Keep Relu's kink out of the difference stencil.
    for (double& v : x.span<double>()) {
      if (std::abs(v) < 1e-3) v = 0.5;
    }
    Tensor dy = RandomTensor<double>(s, rng);
    Tensor y = RunOp(fwd, {x})[0];
    Tensor got = RunOp(grad, grad_inputs(x, y, dy))[0];
    Tensor want = NumericGradient(x, dy, [&](const Tensor& xx) { return RunOp(fwd, {xx})[0]; });
    ExpectClose<double>(got, want, 1e-7);
  }
}

TEST(ActivationGradTest, MatchFiniteDifferences) {
  CheckActivationGrad("Relu", "ReluGrad", [](const Tensor& x, const Tensor&, const Tensor& dy) {
    return std::vector<Tensor>{dy, x};  // (gradients, features)
  });
  CheckActivationGrad("Sigmoid", "SigmoidGrad",
                      [](const Tensor&, const Tensor& y, const Tensor& dy) {
                        return std::vector<Tensor>{y, dy};
                      });
  CheckActivationGrad("Tanh", "TanhGrad", [](const Tensor&, const Tensor& y, const Tensor& dy) {
    return std::vector<Tensor>{y, dy};
  });
}

TEST(ActivationGradTest, FloatMatchesFormulaOnLargeInput) {
  std::mt19937 rng(3);
  const TensorShape s{300, 200};
  Tensor y = RandomTensor<float>(s, rng, 0, 1), dy = RandomTensor<float>(s, rng);
  Tensor want_sig(DT_FLOAT, s), want_tanh(DT_FLOAT, s), want_relu(DT_FLOAT, s);
  Tensor f = RandomTensor<float>(s, rng);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    const float a = y.data<float>()[i], g = dy.data<float>()[i];
    want_sig.data<float>()[i] = g * a * (1 - a);
    want_tanh.data<float>()[i] = g * (1 - a * a);
    want_relu.data<float>()[i] = f.data<float>()[i] > 0 ? g : 0;
  }
  ExpectClose<float>(RunOp("SigmoidGrad", {y, dy})[0], want_sig, 1e-6);
  ExpectClose<float>(RunOp("TanhGrad", {y, dy})[0], want_tanh, 1e-6);
  ExpectClose<float>(RunOp("ReluGrad", {dy, f})[0], want_relu, 0);
}

TEST(ActivationGradTest, ShapeMismatchIsInvalidArgument) {
  absl::Status s = RunStatus("ReluGrad", {Tensor(DT_FLOAT, TensorShape{2, 3}),
                                          Tensor(DT_FLOAT, TensorShape{3, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "[2,3]")) << s;
}

// ---- BiasAdd ---------------------------------------------------------------

template <typename T>
Tensor BiasAddRef(const Tensor& v, const Tensor& b, bool nchw) {
  Tensor out(v.dtype(), v.shape());
  const int cdim = nchw ? 1 : v.dims() - 1;
  int64_t inner = 1;
  for (int d = cdim + 1; d < v.dims(); ++d) inner *= v.dim_size(d);
  const int64_t c = v.dim_size(cdim);
  for (int64_t i = 0; i < v.NumElements(); ++i) {
    out.data<T>()[i] = v.data<T>()[i] + b.data<T>()[(i / inner) % c];
  }
  return out;
}

template <typename T>
Tensor BiasAddGradRef(const Tensor& g, bool nchw) {
  const int cdim = nchw ? 1 : g.dims() - 1;
  int64_t inner = 1;
  for (int d = cdim + 1; d < g.dims(); ++d) inner *= g.dim_size(d);
  const int64_t c = g.dim_size(cdim);
  Tensor out(g.dtype(), TensorShape{c});
  for (int64_t j = 0; j < c; ++j) out.data<T>()[j] = 0;
  for (int64_t i = 0; i < g.NumElements(); ++i) out.data<T>()[(i / inner) % c] += g.data<T>()[i];
  return out;
}

TEST(BiasAddTest, MatchesReferenceInBothLayouts) {
  std::mt19937 rng(5);
  struct Case {
    TensorShape shape;
    bool nchw;
  };
  const Case cases[] = {{TensorShape{4, 3}, false},      {TensorShape{2, 5, 4, 3}, false},
                        {TensorShape{2, 3, 5, 4}, true}, {TensorShape{0, 7}, false},
                        {TensorShape{3, 4, 2}, true},    {TensorShape{64, 33, 33, 16}, false},
                        {TensorShape{8, 16, 40, 40}, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape.DebugString() + (c.nchw ? " NCHW" : " NHWC"));
    const int64_t channels = c.shape.dim_size(c.nchw ? 1 : c.shape.dims() - 1);
    std::map<std::string, AttrValue> attrs = {{"data_format", MakeAttr(c.nchw ? "NCHW" : "NHWC")}};
    Tensor v = RandomTensor<float>(c.shape, rng), b = RandomTensor<float>({channels}, rng);
    ExpectClose<float>(RunOp("BiasAdd", {v, b}, attrs)[0], BiasAddRef<float>(v, b, c.nchw), 1e-6);
    Tensor vd = RandomTensor<double>(c.shape, rng);
    ExpectClose<double>(RunOp("BiasAddGrad", {vd}, attrs)[0], BiasAddGradRef<double>(vd, c.nchw),
                        1e-12);
  }
  Tensor vi = Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape{2, 2});
  ExpectClose<int32_t>(RunOp("BiasAdd", {vi, Tensor::FromVector<int32_t>({10, 20})})[0],
                       Tensor::FromVector<int32_t>({11, 22, 13, 24}, TensorShape{2, 2}), 0);
}

TEST(BiasAddTest, BadShapesAreInvalidArgument) {
  absl::Status s = RunStatus("BiasAdd", {Tensor(DT_FLOAT, TensorShape{2, 3}),
                                         Tensor(DT_FLOAT, TensorShape{4})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "bias length 4")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "3")) << s;
  s = RunStatus("BiasAdd", {Tensor(DT_FLOAT, TensorShape{3}), Tensor(DT_FLOAT, TensorShape{3})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "at least 2-D")) << s;
  s = RunStatus("BiasAdd", {Tensor(DT_FLOAT, TensorShape{2, 3}), Tensor(DT_FLOAT, TensorShape{3})},
                {{"data_format", MakeAttr("NCWH")}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "NCWH")) << s;
}

// ---- Softmax / LogSoftmax --------------------------------------------------

// Computed in long double from the definition, with the row max subtracted.
template <typename T>
Tensor SoftmaxRef(const Tensor& x, bool log) {
  Tensor y(x.dtype(), x.shape());
  const int64_t cols = x.dim_size(x.dims() - 1);
  for (int64_t r = 0; cols > 0 && r < x.NumElements() / cols; ++r) {
    const T* xr = x.data<T>() + r * cols;
    long double m = xr[0], sum = 0;
    for (int64_t j = 0; j < cols; ++j) m = std::max<long double>(m, xr[j]);
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<long double>(xr[j]) - m);
    for (int64_t j = 0; j < cols; ++j) {
      const long double z = static_cast<long double>(xr[j]) - m;
      y.data<T>()[r * cols + j] = static_cast<T>(log ? z - std::log(sum) : std::exp(z) / sum);
    }
  }
  return y;
}

TEST(SoftmaxTest, MatchesReference) {
  std::mt19937 rng(13);
  for (const TensorShape& s : {TensorShape{1, 1}, TensorShape{5}, TensorShape{4, 10},
                               TensorShape{2, 3, 7}, TensorShape{0, 4}, TensorShape{3, 0},
                               TensorShape{512, 100}}) {
    SCOPED_TRACE(s.DebugString());
    Tensor x = RandomTensor<float>(s, rng, -10, 10);
    ExpectClose<float>(RunOp("Softmax", {x})[0], SoftmaxRef<float>(x, false), 1e-6);
    ExpectClose<float>(RunOp("LogSoftmax", {x})[0], SoftmaxRef<float>(x, true), 1e-5);
    Tensor xd = RandomTensor<double>(s, rng, -10, 10);
    ExpectClose<double>(RunOp("Softmax", {xd})[0], SoftmaxRef<double>(xd, false), 1e-13);
    ExpectClose<double>(RunOp("LogSoftmax", {xd})[0], SoftmaxRef<double>(xd, true), 1e-13);
  }
}

TEST(SoftmaxTest, RowsSumToOneAndLargeLogitsDoNotOverflow) {
  // exp(1000) overflows float and double; subtracting the row max must keep
  // everything finite.
  Tensor x = Tensor::FromVector<float>({1000, 1001, 1002, -1e4f, -1e4f + 1, -1e4f + 2, 88, 89, 90},
                                       TensorShape{3, 3});
  Tensor y = RunOp("Softmax", {x})[0];
  Tensor ly = RunOp("LogSoftmax", {x})[0];
  // Every row is (a, a+1, a+2): the same distribution.
  const double e0 = 1, e1 = std::exp(1.0), e2 = std::exp(2.0), z = e0 + e1 + e2;
  const double want[] = {e0 / z, e1 / z, e2 / z};
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) {
      const float p = y.data<float>()[r * 3 + j];
      ASSERT_TRUE(std::isfinite(p)) << r << "," << j;
      EXPECT_NEAR(p, want[j], 1e-6);
      EXPECT_NEAR(ly.data<float>()[r * 3 + j], std::log(want[j]), 1e-5);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << r;
  }
  std::mt19937 rng(2);
  Tensor big = RandomTensor<double>({300, 128}, rng, -500, 500);
  Tensor p = RunOp("Softmax", {big})[0];
  for (int64_t r = 0; r < 300; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < 128; ++j) sum += p.data<double>()[r * 128 + j];
    EXPECT_NEAR(sum, 1.0, 1e-12) << "row " << r;
  }
}

TEST(SoftmaxTest, ScalarIsInvalidArgument) {
  EXPECT_EQ(RunStatus("Softmax", {Tensor::Scalar<float>(1)}).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- SparseSoftmaxCrossEntropyWithLogits -----------------------------------

template <typename T, typename L>
void XentRef(const Tensor& x, const Tensor& labels, Tensor* loss, Tensor* backprop) {
  const int64_t b = x.dim_size(0), c = x.dim_size(1);
  *loss = Tensor(x.dtype(), TensorShape{b});
  Tensor sm = SoftmaxRef<T>(x, false), lsm = SoftmaxRef<T>(x, true);
  *backprop = sm;
  for (int64_t r = 0; r < b; ++r) {
    const L l = labels.data<L>()[r];
    loss->data<T>()[r] = -lsm.data<T>()[r * c + l];
    backprop->data<T>()[r * c + l] -= 1;
  }
}

template <typename T, typename L>
void CheckXent(std::mt19937& rng, int64_t batch, int64_t classes) {
  SCOPED_TRACE(absl::StrCat(DataTypeString(DataTypeToEnum<T>::value), "/",
                            DataTypeString(DataTypeToEnum<L>::value), " [", batch, ",", classes,
                            "]"));
  Tensor x = RandomTensor<T>({batch, classes}, rng, -20, 20);
  Tensor labels(DataTypeToEnum<L>::value, TensorShape{batch});
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  for (int64_t r = 0; r < batch; ++r) labels.data<L>()[r] = static_cast<L>(pick(rng));
  auto out = RunOp("SparseSoftmaxCrossEntropyWithLogits", {x, labels});
  ASSERT_EQ(out.size(), 2u);
  Tensor loss, backprop;
  XentRef<T, L>(x, labels, &loss, &backprop);
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  ExpectClose<T>(out[0], loss, tol);
  ExpectClose<T>(out[1], backprop, tol);
}

TEST(SparseXentTest, MatchesReference) {
  std::mt19937 rng(17);
  CheckXent<float, int32_t>(rng, 1, 1);
  CheckXent<float, int64_t>(rng, 8, 10);
  CheckXent<double, int32_t>(rng, 5, 3);
  CheckXent<double, int64_t>(rng, 400, 100);  // parallel path
  CheckXent<float, int32_t>(rng, 0, 10);      // empty batch
}

TEST(SparseXentTest, BackpropIsTheGradientOfTheLoss) {
  std::mt19937 rng(19);
  Tensor x = RandomTensor<double>({4, 6}, rng, -3, 3);
  Tensor labels = Tensor::FromVector<int64_t>({0, 5, 2, 2});
  Tensor backprop = RunOp("SparseSoftmaxCrossEntropyWithLogits", {x, labels})[1];
  Tensor ones(DT_DOUBLE, TensorShape{4});
  for (double& v : ones.span<double>()) v = 1;
  Tensor want = NumericGradient(x, ones, [&](const Tensor& xx) {
    return RunOp("SparseSoftmaxCrossEntropyWithLogits", {xx, labels})[0];
  });
  ExpectClose<double>(backprop, want, 1e-7);
}

TEST(SparseXentTest, LargeLogitsGiveFiniteLoss) {
  Tensor x = Tensor::FromVector<float>({1e4f, 0, -1e4f}, TensorShape{1, 3});
  auto out = RunOp("SparseSoftmaxCrossEntropyWithLogits", {x, Tensor::FromVector<int32_t>({1})});
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 1e4f);
  EXPECT_FLOAT_EQ(out[1].data<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(out[1].data<float>()[1], -1.f);
}

TEST(SparseXentTest, OutOfRangeLabelNamesTheLabelAndRow) {
  Tensor x(DT_FLOAT, TensorShape{3, 5});
  for (float& v : x.span<float>()) v = 0;
  absl::Status s = RunStatus("SparseSoftmaxCrossEntropyWithLogits",
                             {x, Tensor::FromVector<int32_t>({0, 7, 1})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "label value 7 in row 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[0, 5)")) << s;
  s = RunStatus("SparseSoftmaxCrossEntropyWithLogits",
                {x, Tensor::FromVector<int64_t>({0, 1, -1})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "label value -1 in row 2")) << s;
  s = RunStatus("SparseSoftmaxCrossEntropyWithLogits",
                {x, Tensor::FromVector<int64_t>({0, 1})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// ---- SoftmaxCrossEntropyWithLogits (dense labels) ----------------------------

TEST(DenseXentTest, OneHotLabelsMatchTheSparseOpAndSoftLabelsTheFormula) {
  std::mt19937 rng(23);
  for (int64_t batch : {1, 7, 300}) {  // 300: the parallel path
    Tensor x = RandomTensor<double>({batch, 9}, rng, -10, 10);
    Tensor ids(DT_INT64, TensorShape{batch});
    Tensor onehot(DT_DOUBLE, TensorShape{batch, 9});
    for (double& v : onehot.span<double>()) v = 0;
    for (int64_t r = 0; r < batch; ++r) {
      ids.data<int64_t>()[r] = static_cast<int64_t>(rng() % 9);
      onehot.data<double>()[r * 9 + ids.data<int64_t>()[r]] = 1;
    }
    auto dense = RunOp("SoftmaxCrossEntropyWithLogits", {x, onehot});
    auto sparse = RunOp("SparseSoftmaxCrossEntropyWithLogits", {x, ids});
    ExpectClose<double>(dense[0], sparse[0], 1e-12);
    ExpectClose<double>(dense[1], sparse[1], 1e-12);
  }
  // Soft labels: loss = sum labels * -log_softmax, backprop = softmax - labels.
  Tensor x = RandomTensor<float>({4, 5}, rng, -3, 3);
  Tensor y = RandomTensor<float>({4, 5}, rng, 0, 1);
  auto out = RunOp("SoftmaxCrossEntropyWithLogits", {x, y});
  Tensor sm = SoftmaxRef<float>(x, false), lsm = SoftmaxRef<float>(x, true);
  Tensor loss(DT_FLOAT, TensorShape{4}), backprop(DT_FLOAT, TensorShape{4, 5});
  for (int64_t r = 0; r < 4; ++r) {
    double l = 0;
    for (int64_t c = 0; c < 5; ++c) {
      l -= y.data<float>()[r * 5 + c] * lsm.data<float>()[r * 5 + c];
      backprop.data<float>()[r * 5 + c] = sm.data<float>()[r * 5 + c] - y.data<float>()[r * 5 + c];
    }
    loss.data<float>()[r] = static_cast<float>(l);
  }
  ExpectClose<float>(out[0], loss, 2e-5);
  ExpectClose<float>(out[1], backprop, 2e-5);
  absl::Status s = RunStatus("SoftmaxCrossEntropyWithLogits", {x, RandomTensor<float>({4, 4}, rng, 0, 1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "[4,4]")) << s;
}

}  // namespace
}  // namespace strata
