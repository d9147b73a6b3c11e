// Conv2D, its two gradients, MaxPool and MaxPoolGrad against direct nested-loop
// references written here (their own window arithmetic, not nn_ops.h's), and
// the gradients against central differences of the forward kernels in double.

#include <cmath>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "gtest/gtest.h"
#include "kernels/cpu/nn_test_util.h"
#include "kernels/kernel_registry.h"

namespace strata {
namespace {

using nn_test::ExpectClose;
using nn_test::NumericGradient;
using nn_test::RandomTensor;
using nn_test::RunOp;
using nn_test::RunStatus;

// Output size and leading pad of one dim, straight from TensorFlow's docs.
void Window(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same, int64_t* out,
            int64_t* pad) {
  const int64_t eff = (k - 1) * dilation + 1;
  if (same) {
    *out = (in + stride - 1) / stride;
    *pad = std::max<int64_t>(0, (*out - 1) * stride + eff - in) / 2;
  } else {
    *out = (in - eff) / stride + 1;
    *pad = 0;
  }
}

struct ConvCase {
  int64_t n, h, w, ic, kh, kw, oc, sr, sc, dr, dc;
  bool same;
  std::string Name() const {
    return absl::StrCat("in [", n, ",", h, ",", w, ",", ic, "] filter [", kh, ",", kw, ",", ic,
                        ",", oc, "] strides ", sr, ",", sc, " dilations ", dr, ",", dc,
                        same ? " SAME" : " VALID");
  }
  std::map<std::string, AttrValue> Attrs() const {
    return {{"strides", MakeAttr(std::vector<int64_t>{1, sr, sc, 1})},
            {"dilations", MakeAttr(std::vector<int64_t>{1, dr, dc, 1})},
            {"padding", MakeAttr(same ? "SAME" : "VALID")}};
  }
};

struct ConvDims {
  int64_t oh, ow, pt, pl;
};
ConvDims Dims(const ConvCase& c) {
  ConvDims d;
  Window(c.h, c.kh, c.sr, c.dr, c.same, &d.oh, &d.pt);
  Window(c.w, c.kw, c.sc, c.dc, c.same, &d.ow, &d.pl);
  return d;
}

// Calls fn(n, oh, ow, kh, kw, ih, iw) for every in-range tap.
template <typename Fn>
void ForEachTap(const ConvCase& c, Fn fn) {
  const ConvDims d = Dims(c);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t oh = 0; oh < d.oh; ++oh)
      for (int64_t ow = 0; ow < d.ow; ++ow)
        for (int64_t kh = 0; kh < c.kh; ++kh)
          for (int64_t kw = 0; kw < c.kw; ++kw) {
            const int64_t ih = oh * c.sr - d.pt + kh * c.dr, iw = ow * c.sc - d.pl + kw * c.dc;
            if (ih >= 0 && ih < c.h && iw >= 0 && iw < c.w) fn(n, oh, ow, kh, kw, ih, iw);
          }
}

// References accumulate in double whatever T is.
template <typename T>
Tensor ConvRef(const ConvCase& c, const Tensor& x, const Tensor& f) {
  const ConvDims d = Dims(c);
  std::vector<double> acc(c.n * d.oh * d.ow * c.oc, 0.0);
  const T* xp = x.data<T>();
  const T* fp = f.data<T>();
  ForEachTap(c, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                    int64_t iw) {
    double* o = &acc[((n * d.oh + oh) * d.ow + ow) * c.oc];
    for (int64_t i = 0; i < c.ic; ++i) {
      const double xv = xp[((n * c.h + ih) * c.w + iw) * c.ic + i];
      for (int64_t j = 0; j < c.oc; ++j) o[j] += xv * fp[((kh * c.kw + kw) * c.ic + i) * c.oc + j];
    }
  });
  Tensor out(DataTypeToEnum<T>::value, TensorShape{c.n, d.oh, d.ow, c.oc});
  for (size_t i = 0; i < acc.size(); ++i) out.data<T>()[i] = static_cast<T>(acc[i]);
  return out;
}

template <typename T>
Tensor ConvBackpropInputRef(const ConvCase& c, const Tensor& f, const Tensor& dy) {
  const ConvDims d = Dims(c);
  std::vector<double> acc(c.n * c.h * c.w * c.ic, 0.0);
  ForEachTap(c, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                    int64_t iw) {
    const T* g = dy.data<T>() + ((n * d.oh + oh) * d.ow + ow) * c.oc;
    for (int64_t i = 0; i < c.ic; ++i) {
      const T* fr = f.data<T>() + ((kh * c.kw + kw) * c.ic + i) * c.oc;
      double s = 0;
      for (int64_t j = 0; j < c.oc; ++j) s += static_cast<double>(g[j]) * fr[j];
      acc[((n * c.h + ih) * c.w + iw) * c.ic + i] += s;
    }
  });
  Tensor out(DataTypeToEnum<T>::value, TensorShape{c.n, c.h, c.w, c.ic});
  for (size_t i = 0; i < acc.size(); ++i) out.data<T>()[i] = static_cast<T>(acc[i]);
  return out;
}

template <typename T>
Tensor ConvBackpropFilterRef(const ConvCase& c, const Tensor& x, const Tensor& dy) {
  const ConvDims d = Dims(c);
  std::vector<double> acc(c.kh * c.kw * c.ic * c.oc, 0.0);
  ForEachTap(c, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                    int64_t iw) {
    const T* g = dy.data<T>() + ((n * d.oh + oh) * d.ow + ow) * c.oc;
    for (int64_t i = 0; i < c.ic; ++i) {
      const double xv = x.data<T>()[((n * c.h + ih) * c.w + iw) * c.ic + i];
      double* a = &acc[((kh * c.kw + kw) * c.ic + i) * c.oc];
      for (int64_t j = 0; j < c.oc; ++j) a[j] += xv * g[j];
    }
  });
  Tensor out(DataTypeToEnum<T>::value, TensorShape{c.kh, c.kw, c.ic, c.oc});
  for (size_t i = 0; i < acc.size(); ++i) out.data<T>()[i] = static_cast<T>(acc[i]);
  return out;
}

Tensor Sizes(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }

template <typename T>
void CheckConv(const ConvCase& c, std::mt19937& rng, double tol) {
  SCOPED_TRACE(c.Name() + " " + DataTypeString(DataTypeToEnum<T>::value));
  const ConvDims d = Dims(c);
  Tensor x = RandomTensor<T>({c.n, c.h, c.w, c.ic}, rng);
  Tensor f = RandomTensor<T>({c.kh, c.kw, c.ic, c.oc}, rng);
  Tensor dy = RandomTensor<T>({c.n, d.oh, d.ow, c.oc}, rng);
  auto out = RunOp("Conv2D", {x, f}, c.Attrs());
  ASSERT_EQ(out.size(), 1u);
  ExpectClose<T>(out[0], ConvRef<T>(c, x, f), tol);
  const Tensor input_sizes = Sizes({static_cast<int32_t>(c.n), static_cast<int32_t>(c.h),
                                    static_cast<int32_t>(c.w), static_cast<int32_t>(c.ic)});
  const Tensor filter_sizes = Sizes({static_cast<int32_t>(c.kh), static_cast<int32_t>(c.kw),
                                     static_cast<int32_t>(c.ic), static_cast<int32_t>(c.oc)});
  out = RunOp("Conv2DBackpropInput", {input_sizes, f, dy}, c.Attrs());
  ASSERT_EQ(out.size(), 1u);
  ExpectClose<T>(out[0], ConvBackpropInputRef<T>(c, f, dy), tol);
  out = RunOp("Conv2DBackpropFilter", {x, filter_sizes, dy}, c.Attrs());
  ASSERT_EQ(out.size(), 1u);
  ExpectClose<T>(out[0], ConvBackpropFilterRef<T>(c, x, dy), tol);
}

const ConvCase kCases[] = {
    // n, h, w, ic, kh, kw, oc, sr, sc, dr, dc, same
    {1, 5, 5, 3, 3, 3, 4, 1, 1, 1, 1, false},
    {2, 6, 7, 2, 3, 3, 5, 1, 1, 1, 1, true},
    {3, 8, 8, 4, 3, 3, 2, 2, 2, 1, 1, true},
    {2, 9, 7, 3, 2, 2, 3, 2, 2, 1, 1, false},
    {2, 6, 6, 3, 4, 4, 2, 1, 1, 1, 1, true},   // even window: padding after > before
    {2, 5, 5, 8, 1, 1, 6, 1, 1, 1, 1, false},  // pointwise: no im2col
    {2, 5, 5, 8, 1, 1, 6, 2, 2, 1, 1, true},   // 1x1 but strided
    {1, 9, 9, 2, 3, 3, 3, 1, 1, 2, 2, true},   // dilated
    {1, 10, 8, 2, 3, 2, 3, 2, 1, 2, 1, false},
    {2, 7, 5, 3, 7, 5, 4, 1, 1, 1, 1, false},  // window == input: 1x1 output
    {1, 3, 3, 2, 3, 3, 2, 3, 3, 1, 1, true},   // stride == window
    {1, 4, 4, 2, 1, 1, 3, 3, 3, 1, 1, false},  // stride skips input pixels
    {0, 5, 5, 3, 3, 3, 4, 1, 1, 1, 1, true},   // empty batch
    {4, 17, 19, 16, 3, 3, 32, 1, 1, 1, 1, true},  // large enough for the thread pool
};

TEST(Conv2DTest, ForwardAndGradientsMatchReference) {
  std::mt19937 rng(23);
  for (const ConvCase& c : kCases) {
    CheckConv<float>(c, rng, 1e-4);  // float sums of up to ~1300 terms
    CheckConv<double>(c, rng, 1e-12);
  }
}

// A batch whose col matrix exceeds the kernels' 64 MiB budget is processed
// in several chunks; the filter gradient accumulates across them.
TEST(Conv2DTest, ChunkedBatchMatchesReference) {
  std::mt19937 rng(29);
  CheckConv<float>({10, 64, 64, 64, 3, 3, 8, 1, 1, 1, 1, true}, rng, 1e-4);
}

TEST(Conv2DTest, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(31);
  for (const ConvCase& c : {ConvCase{2, 5, 6, 3, 3, 3, 2, 2, 1, 1, 1, true},
                            ConvCase{1, 6, 6, 2, 2, 3, 3, 1, 2, 2, 1, false}}) {
    SCOPED_TRACE(c.Name());
    const ConvDims d = Dims(c);
    Tensor x = RandomTensor<double>({c.n, c.h, c.w, c.ic}, rng);
    Tensor f = RandomTensor<double>({c.kh, c.kw, c.ic, c.oc}, rng);
    Tensor dy = RandomTensor<double>({c.n, d.oh, d.ow, c.oc}, rng);
    Tensor dx = RunOp("Conv2DBackpropInput",
                    {Sizes({int32_t(c.n), int32_t(c.h), int32_t(c.w), int32_t(c.ic)}), f, dy},
                    c.Attrs())[0];
    Tensor df = RunOp("Conv2DBackpropFilter",
                    {x, Sizes({int32_t(c.kh), int32_t(c.kw), int32_t(c.ic), int32_t(c.oc)}), dy},
                    c.Attrs())[0];
    ExpectClose<double>(dx, NumericGradient(x, dy, [&](const Tensor& xx) {
                          return RunOp("Conv2D", {xx, f}, c.Attrs())[0];
                        }),
                        1e-7);
    ExpectClose<double>(df, NumericGradient(f, dy, [&](const Tensor& ff) {
                          return RunOp("Conv2D", {x, ff}, c.Attrs())[0];
                        }),
                        1e-7);
  }
}

TEST(Conv2DTest, BackpropInputAcceptsSpatialSizesOnly) {
  std::mt19937 rng(37);
  const ConvCase c{2, 6, 5, 3, 3, 3, 4, 2, 2, 1, 1, true};
  const ConvDims d = Dims(c);
  Tensor f = RandomTensor<float>({3, 3, 3, 4}, rng);
  Tensor dy = RandomTensor<float>({2, d.oh, d.ow, 4}, rng);
  ExpectClose<float>(RunOp("Conv2DBackpropInput", {Sizes({6, 5}), f, dy}, c.Attrs())[0],
                     ConvBackpropInputRef<float>(c, f, dy), 1e-5);
}

void ExpectInvalid(const absl::Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), needle)) << "'" << needle << "' not in: " << s;
}

TEST(Conv2DTest, BadInputsAreInvalidArgument) {
  const ConvCase c{1, 5, 5, 3, 3, 3, 2, 1, 1, 1, 1, false};
  auto attrs = c.Attrs();
  ExpectInvalid(RunStatus("Conv2D", {Tensor(DT_FLOAT, TensorShape{1, 5, 5, 3}),
                                     Tensor(DT_FLOAT, TensorShape{3, 3, 4, 2})},
                          attrs),
                "in_channels 4");
  ExpectInvalid(RunStatus("Conv2D", {Tensor(DT_FLOAT, TensorShape{1, 2, 2, 3}),
                                     Tensor(DT_FLOAT, TensorShape{3, 3, 3, 2})},
                          attrs),
                "larger than the input");
  ExpectInvalid(RunStatus("Conv2D", {Tensor(DT_FLOAT, TensorShape{5, 5, 3}),
                                     Tensor(DT_FLOAT, TensorShape{3, 3, 3, 2})},
                          attrs),
                "rank 4");
  const Tensor x(DT_FLOAT, TensorShape{1, 5, 5, 3}), f(DT_FLOAT, TensorShape{3, 3, 3, 2});
  auto nchw = attrs;
  nchw["data_format"] = MakeAttr("NCHW");
  ExpectInvalid(RunStatus("Conv2D", {x, f}, nchw), "NHWC");
  auto expl = attrs;
  expl["padding"] = MakeAttr("EXPLICIT");
  expl["explicit_paddings"] = MakeAttr(std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0});
  ExpectInvalid(RunStatus("Conv2D", {x, f}, expl), "EXPLICIT");
  auto bad_stride = attrs;
  bad_stride["strides"] = MakeAttr(std::vector<int64_t>{2, 1, 1, 1});
  ExpectInvalid(RunStatus("Conv2D", {x, f}, bad_stride), "strides");
  bad_stride["strides"] = MakeAttr(std::vector<int64_t>{1, 1, 1});
  ExpectInvalid(RunStatus("Conv2D", {x, f}, bad_stride), "4 entries");
  // out_backprop must be the forward output's shape ([1,3,3,2] here).
  ExpectInvalid(RunStatus("Conv2DBackpropInput",
                          {Sizes({1, 5, 5, 3}), f, Tensor(DT_FLOAT, TensorShape{1, 4, 4, 2})},
                          attrs),
                "out_backprop");
  ExpectInvalid(RunStatus("Conv2DBackpropFilter",
                          {x, Sizes({3, 3, 3}), Tensor(DT_FLOAT, TensorShape{1, 3, 3, 2})}, attrs),
                "filter_sizes");
}

// ---- MaxPool ---------------------------------------------------------------

struct PoolCase {
  int64_t n, h, w, c, kr, kc, sr, sc;
  bool same;
  std::string Name() const {
    return absl::StrCat("in [", n, ",", h, ",", w, ",", c, "] ksize ", kr, ",", kc, " strides ",
                        sr, ",", sc, same ? " SAME" : " VALID");
  }
  std::map<std::string, AttrValue> Attrs() const {
    return {{"ksize", MakeAttr(std::vector<int64_t>{1, kr, kc, 1})},
            {"strides", MakeAttr(std::vector<int64_t>{1, sr, sc, 1})},
            {"padding", MakeAttr(same ? "SAME" : "VALID")}};
  }
};

// The pooled output and, for each output entry, the flat input index of the
// first maximum of its window.
template <typename T>
void MaxPoolRef(const PoolCase& p, const Tensor& x, Tensor* out, std::vector<int64_t>* arg) {
  int64_t oh, ow, pt, pl;
  Window(p.h, p.kr, p.sr, 1, p.same, &oh, &pt);
  Window(p.w, p.kc, p.sc, 1, p.same, &ow, &pl);
  *out = Tensor(x.dtype(), TensorShape{p.n, oh, ow, p.c});
  arg->assign(out->NumElements(), -1);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t ch = 0; ch < p.c; ++ch) {
          const int64_t o = ((n * oh + i) * ow + j) * p.c + ch;
          for (int64_t a = 0; a < p.kr; ++a)
            for (int64_t b = 0; b < p.kc; ++b) {
              const int64_t r = i * p.sr - pt + a, s = j * p.sc - pl + b;
              if (r < 0 || r >= p.h || s < 0 || s >= p.w) continue;
              const int64_t idx = ((n * p.h + r) * p.w + s) * p.c + ch;
              if ((*arg)[o] < 0 || x.data<T>()[idx] > x.data<T>()[(*arg)[o]]) (*arg)[o] = idx;
            }
          out->data<T>()[o] = x.data<T>()[(*arg)[o]];
        }
}

const PoolCase kPoolCases[] = {
    {1, 4, 4, 1, 2, 2, 2, 2, false}, {2, 5, 7, 3, 3, 3, 2, 2, true},
    {2, 6, 6, 4, 3, 2, 1, 1, true},  {0, 4, 4, 2, 2, 2, 2, 2, false},
    {3, 9, 8, 5, 3, 3, 3, 2, false}, {1, 5, 5, 2, 1, 1, 2, 2, true},
    {2, 64, 64, 32, 3, 3, 2, 2, true},  // parallel path
};

TEST(MaxPoolTest, ForwardAndGradientMatchReference) {
  std::mt19937 rng(41);
  for (const PoolCase& p : kPoolCases) {
    SCOPED_TRACE(p.Name());
    Tensor x = RandomTensor<double>({p.n, p.h, p.w, p.c}, rng);
    Tensor want;
    std::vector<int64_t> arg;
    MaxPoolRef<double>(p, x, &want, &arg);
    Tensor y = RunOp("MaxPool", {x}, p.Attrs())[0];
    ExpectClose<double>(y, want, 0);
    Tensor dy = RandomTensor<double>(want.shape(), rng);
    Tensor want_dx(DT_DOUBLE, x.shape());
    for (double& v : want_dx.span<double>()) v = 0;
    for (size_t o = 0; o < arg.size(); ++o) want_dx.data<double>()[arg[o]] += dy.data<double>()[o];
    ExpectClose<double>(RunOp("MaxPoolGrad", {x, y, dy}, p.Attrs())[0], want_dx, 1e-12);
    // float and int32 forward too.
    Tensor xf = RandomTensor<float>({p.n, p.h, p.w, p.c}, rng);
    MaxPoolRef<float>(p, xf, &want, &arg);
    ExpectClose<float>(RunOp("MaxPool", {xf}, p.Attrs())[0], want, 0);
  }
  PoolCase p{1, 3, 3, 1, 2, 2, 1, 1, false};
  Tensor xi = Tensor::FromVector<int32_t>({1, 5, 2, 7, 3, 9, 4, 8, 6}, TensorShape{1, 3, 3, 1});
  ExpectClose<int32_t>(RunOp("MaxPool", {xi}, p.Attrs())[0],
                       Tensor::FromVector<int32_t>({7, 9, 8, 9}, TensorShape{1, 2, 2, 1}), 0);
}

TEST(MaxPoolTest, TiesRouteTheGradientToTheFirstMaximum) {
  PoolCase p{1, 2, 2, 1, 2, 2, 2, 2, false};
  Tensor x = Tensor::FromVector<float>({1, 3, 3, 3}, TensorShape{1, 2, 2, 1});
  Tensor y = RunOp("MaxPool", {x}, p.Attrs())[0];
  Tensor dx = RunOp("MaxPoolGrad", {x, y, Tensor::FromVector<float>({2}, TensorShape{1, 1, 1, 1})},
                  p.Attrs())[0];
  ExpectClose<float>(dx, Tensor::FromVector<float>({0, 2, 0, 0}, TensorShape{1, 2, 2, 1}), 0);
}

TEST(MaxPoolTest, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(43);
  const PoolCase p{2, 5, 6, 3, 3, 2, 2, 2, true};
  Tensor x = RandomTensor<double>({p.n, p.h, p.w, p.c}, rng);
  Tensor y = RunOp("MaxPool", {x}, p.Attrs())[0];
  Tensor dy = RandomTensor<double>(y.shape(), rng);
  Tensor dx = RunOp("MaxPoolGrad", {x, y, dy}, p.Attrs())[0];
  ExpectClose<double>(dx, NumericGradient(x, dy, [&](const Tensor& xx) {
                        return RunOp("MaxPool", {xx}, p.Attrs())[0];
                      }),
                      1e-7);
}

TEST(MaxPoolTest, BadInputsAreInvalidArgument) {
  PoolCase p{1, 2, 2, 1, 3, 3, 1, 1, false};
  const Tensor x(DT_FLOAT, TensorShape{1, 2, 2, 1});
  ExpectInvalid(RunStatus("MaxPool", {x}, p.Attrs()), "larger than the input");
  auto attrs = PoolCase{1, 2, 2, 1, 2, 2, 1, 1, false}.Attrs();
  attrs["ksize"] = MakeAttr(std::vector<int64_t>{1, 2, 2, 2});
  ExpectInvalid(RunStatus("MaxPool", {x}, attrs), "ksize");
  attrs = PoolCase{1, 2, 2, 1, 2, 2, 1, 1, false}.Attrs();
  attrs["data_format"] = MakeAttr("NCHW");
  attrs["ksize"] = MakeAttr(std::vector<int64_t>{1, 1, 2, 2});
  attrs["strides"] = MakeAttr(std::vector<int64_t>{1, 1, 1, 1});
  ExpectInvalid(RunStatus("MaxPool", {Tensor(DT_FLOAT, TensorShape{1, 1, 2, 2})}, attrs), "NHWC");
  attrs = PoolCase{1, 2, 2, 1, 2, 2, 1, 1, false}.Attrs();
  ExpectInvalid(RunStatus("MaxPoolGrad", {x, Tensor(DT_FLOAT, TensorShape{1, 1, 1, 1}),
                                          Tensor(DT_FLOAT, TensorShape{1, 2, 1, 1})},
                          attrs),
                "pooled shape");
}

// The mean over each window's in-range taps (a reference written from the
// definition), and its gradient: dy / taps added to each tap.
Tensor AvgPoolRef(const PoolCase& p, const Tensor& x, const Tensor* dy, Tensor* dx) {
  int64_t oh, ow, pt, pl;
  Window(p.h, p.kr, p.sr, 1, p.same, &oh, &pt);
  Window(p.w, p.kc, p.sc, 1, p.same, &ow, &pl);
  Tensor out(DT_DOUBLE, TensorShape{p.n, oh, ow, p.c});
  if (dx != nullptr) {
    *dx = Tensor(DT_DOUBLE, x.shape());
    for (double& v : dx->span<double>()) v = 0;
  }
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t ch = 0; ch < p.c; ++ch) {
          double sum = 0;
          std::vector<int64_t> taps;
          for (int64_t a = 0; a < p.kr; ++a)
            for (int64_t b = 0; b < p.kc; ++b) {
              const int64_t r = i * p.sr - pt + a, s = j * p.sc - pl + b;
              if (r < 0 || r >= p.h || s < 0 || s >= p.w) continue;
              taps.push_back(((n * p.h + r) * p.w + s) * p.c + ch);
              sum += x.data<double>()[taps.back()];
            }
          const int64_t o = ((n * oh + i) * ow + j) * p.c + ch;
          out.data<double>()[o] = sum / static_cast<double>(taps.size());
          if (dx != nullptr) {
            for (int64_t t : taps) dx->data<double>()[t] += dy->data<double>()[o] / static_cast<double>(taps.size());
          }
        }
  return out;
}

TEST(AvgPoolTest, ForwardAndGradientMatchReference) {
  std::mt19937 rng(47);
  for (const PoolCase& p : kPoolCases) {
    SCOPED_TRACE(p.Name());
    Tensor x = RandomTensor<double>({p.n, p.h, p.w, p.c}, rng);
    Tensor y = RunOp("AvgPool", {x}, p.Attrs())[0];
    Tensor dy = RandomTensor<double>(y.shape(), rng);
    Tensor want_dx;
    ExpectClose<double>(y, AvgPoolRef(p, x, &dy, &want_dx), 1e-12);
    const Tensor sizes = Tensor::FromVector<int32_t>(
        {static_cast<int32_t>(p.n), static_cast<int32_t>(p.h), static_cast<int32_t>(p.w), static_cast<int32_t>(p.c)});
    ExpectClose<double>(RunOp("AvgPoolGrad", {sizes, dy}, p.Attrs())[0], want_dx, 1e-12);
  }
}

TEST(AvgPoolTest, BadInputsAreInvalidArgument) {
  const auto attrs = PoolCase{1, 4, 4, 1, 2, 2, 2, 2, false}.Attrs();
  ExpectInvalid(RunStatus("AvgPoolGrad", {Tensor::FromVector<int32_t>({1, 4, 4, 1}), Tensor(DT_FLOAT, TensorShape{1, 3, 2, 1})},
                          attrs),
                "pooled shape");
  ExpectInvalid(RunStatus("AvgPoolGrad", {Tensor::FromVector<int32_t>({1, 4, 4}), Tensor(DT_FLOAT, TensorShape{1, 2, 2, 1})},
                          attrs),
                "orig_input_shape");
  ExpectInvalid(RunStatus("AvgPool", {Tensor(DT_FLOAT, TensorShape{1, 1, 4, 1})}, attrs), "larger than the input");
}

// Convolutions and pooling go to the inter-op pool; activations run inline.
TEST(NnKernelsTest, ExpensiveKernelsSaySo) {
  auto make = [](const std::string& op, std::map<std::string, AttrValue> attrs) {
    ::tensorflow::NodeDef def;
    def.set_name("n");
    def.set_op(op);
    for (auto& kv : attrs) (*def.mutable_attr())[kv.first] = kv.second;
    (*def.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
    const OpDef* op_def = *OpRegistry::Global()->LookUp(op);
    EXPECT_TRUE(ValidateAndCompleteAttrs(*op_def, &def).ok());
    std::vector<DataType> in, out;
    EXPECT_TRUE(InOutTypesForNode(def, *op_def, &in, &out).ok());
    auto k = CreateOpKernel(nn_test::Device(), def, *op_def, in, out);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() && (*k)->IsExpensive();
  };
  const auto conv = ConvCase{1, 5, 5, 3, 3, 3, 2, 1, 1, 1, 1, true}.Attrs();
  EXPECT_TRUE(make("Conv2D", conv));
  EXPECT_TRUE(make("Conv2DBackpropInput", conv));
  EXPECT_TRUE(make("Conv2DBackpropFilter", conv));
  const auto pool = PoolCase{1, 4, 4, 1, 2, 2, 2, 2, true}.Attrs();
  EXPECT_TRUE(make("MaxPool", pool));
  EXPECT_TRUE(make("MaxPoolGrad", pool));
  EXPECT_TRUE(make("AvgPool", pool));
  EXPECT_FALSE(make("Relu", {}));
  EXPECT_FALSE(make("Softmax", {}));
}

}  // namespace
}  // namespace strata
