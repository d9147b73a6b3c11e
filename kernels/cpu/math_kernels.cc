// CPU kernels for the elementwise part of the math family: binary ops with
// broadcasting, unary ops, Equal, AddN, Select/SelectV2 and Cast. MatMul and
// the reductions live in matmul_kernels.cc and reduction_kernels.cc.
//
// These kernels are cheap and run inline on the executor's thread, so the
// per-call cost on tiny tensors is what a long chain of small ops pays; the
// cwise helpers keep that to an allocation (often avoided by forwarding an
// input buffer) and a short loop.

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/math_ops.h"
#include "kernels/cpu/cwise.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "unsupported/Eigen/SpecialFunctions"

namespace strata {
namespace {

namespace ei = Eigen::internal;

template <typename T, typename F>
class BinaryKernel : public OpKernel {
 public:
  explicit BinaryKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override { return cwise::BinaryOp<T, F>(ctx); }
};

template <typename T, typename F>
class UnaryKernel : public OpKernel {
 public:
  explicit UnaryKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override { return cwise::UnaryOp<T, F>(ctx); }
};

// Pow: integer bases to negative integer powers have no integer result, so
// they are an error (as in TensorFlow), checked before computing.
template <typename T>
class PowKernel : public OpKernel {
 public:
  explicit PowKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    if constexpr (std::is_integral_v<T>) {
      const Tensor& y = ctx.input(1);
      const T* p = y.data<T>();
      for (int64_t i = 0; i < y.NumElements(); ++i) {
        if (p[i] < 0) {
          return absl::InvalidArgumentError(
              "Integers to negative integer powers are not allowed");
        }
      }
    }
    return cwise::BinaryOp<T, cwise::Pow<T>>(ctx);
  }
};

// Less, LessEqual, Greater, GreaterEqual, LogicalAnd, LogicalOr: bool
// results of broadcasting operands.
template <typename T, typename Cmp>
class CompareKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override { return cwise::BinaryOp<T, cwise::Compare<T, Cmp>>(ctx); }
};

struct LogicalNotFn {
  bool operator()(bool x) const { return !x; }
};

class LogicalNotKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override { return cwise::UnaryOp<bool, LogicalNotFn>(ctx); }
};

// Equal (and NotEqual): with incompatible_shape_error=false, shapes that do
// not broadcast answer a scalar false (true for NotEqual), TensorFlow's
// behaviour, instead of failing.
template <typename T, typename Cmp = std::equal_to<T>>
class EqualKernel : public OpKernel {
 public:
  explicit EqualKernel(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("incompatible_shape_error", &strict_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    if (!strict_ && ctx.input(0).shape() != ctx.input(1).shape() &&
        !cwise::BCast(ctx.input(0).shape(), ctx.input(1).shape()).ok()) {
      Tensor* z;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape(), &z));
      *z->data<bool>() = !std::is_same_v<Cmp, std::equal_to<T>>;
      return absl::OkStatus();
    }
    return cwise::BinaryOp<T, cwise::Compare<T, Cmp>>(ctx);
  }

 private:
  bool strict_ = true;
};

// AddN: all inputs have one shape; the sum is accumulated a few inputs per
// pass so each pass streams memory once.
template <typename T>
class AddNKernel : public OpKernel {
 public:
  explicit AddNKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = ctx.num_inputs();
    const Tensor& x0 = ctx.input(0);
    for (int i = 1; i < n; ++i) {
      if (ctx.input(i).shape() != x0.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Inputs to AddN must all have the same shape: input 0 has shape ",
            x0.shape().DebugString(), " but input ", i, " has shape ",
            ctx.input(i).shape().DebugString()));
      }
    }
    if (n == 1) {
      ctx.set_output(0, x0);
      return absl::OkStatus();
    }
    const int64_t size = x0.NumElements();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, x0.shape(), &out));
    auto o = Flat<T>(*out);
    auto in = [&](int i) { return Flat<T>(ctx.input(i)); };
    // The forwarded input (if any) is 0 or 1, read in the first pass only,
    // at the index being written: in-place is safe.
    int i = 2;
    if (n >= 4) {
      cwise::Assign(ctx, size, o, in(0) + in(1) + in(2) + in(3));
      i = 4;
    } else if (n == 3) {
      cwise::Assign(ctx, size, o, in(0) + in(1) + in(2));
      i = 3;
    } else {
      cwise::Assign(ctx, size, o, in(0) + in(1));
    }
    for (; i + 3 <= n; i += 3) cwise::Assign(ctx, size, o, o + in(i) + in(i + 1) + in(i + 2));
    for (; i < n; ++i) cwise::Assign(ctx, size, o, o + in(i));
    return absl::OkStatus();
  }
};

// Select (TF1): condition matches t's shape, or is a scalar, or is a vector
// choosing whole rows (first dimension) of t/e.
template <typename T>
class SelectKernel : public OpKernel {
 public:
  explicit SelectKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& cond = ctx.input(0);
    const Tensor& t = ctx.input(1);
    const Tensor& e = ctx.input(2);
    if (t.shape() != e.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("'t' and 'e' must have the same shape: ",
                                                     t.shape().DebugString(), " vs. ",
                                                     e.shape().DebugString()));
    }
    if (cond.dims() == 0) {
      ctx.set_output(0, *cond.data<bool>() ? t : e);
      return absl::OkStatus();
    }
    Tensor* out;
    if (cond.shape() == t.shape()) {
      STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({1, 2}, 0, t.shape(), &out));
      cwise::Assign(ctx, t.NumElements(), Flat<T>(*out),
                    Flat<bool>(cond).select(Flat<T>(t), Flat<T>(e)));
      return absl::OkStatus();
    }
    if (cond.dims() == 1 && t.dims() > 1 && cond.dim_size(0) == t.dim_size(0)) {
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, t.shape(), &out));
      const int64_t rows = t.dim_size(0);
      const int64_t row = rows == 0 ? 0 : t.NumElements() / rows;
      const bool* c = cond.data<bool>();
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = (c[r] ? t : e).template data<T>() + r * row;
        std::memcpy(out->data<T>() + r * row, src, row * sizeof(T));
      }
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "condition must be a scalar, have the shape of 't' and 'e', or be a vector of their "
        "first dimension: condition ",
        cond.shape().DebugString(), ", t ", t.shape().DebugString()));
  }
};

// SelectV2: condition, t and e broadcast together (NumPy rules).
template <typename T>
class SelectV2Kernel : public OpKernel {
 public:
  explicit SelectV2Kernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& cond = ctx.input(0);
    const Tensor& t = ctx.input(1);
    const Tensor& e = ctx.input(2);
    Tensor* out;
    if (cond.shape() == t.shape() && t.shape() == e.shape()) {
      STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({1, 2}, 0, t.shape(), &out));
      cwise::Assign(ctx, t.NumElements(), Flat<T>(*out),
                    Flat<bool>(cond).select(Flat<T>(t), Flat<T>(e)));
      return absl::OkStatus();
    }
    if (cond.NumElements() == 1 && t.shape() == e.shape() && cond.dims() <= t.dims()) {
      ctx.set_output(0, *cond.data<bool>() ? t : e);
      return absl::OkStatus();
    }
    cwise::BCast te(t.shape(), e.shape());
    if (!te.ok()) return te.status();
    cwise::BCast all(cond.shape(), te.output_shape());
    if (!all.ok()) return all.status();
    const TensorShape& shape = all.output_shape();
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    const int64_t n = shape.num_elements();
    if (n == 0) return absl::OkStatus();
    // Strided walk over the output with the innermost dim as the inner loop;
    // a broadcast operand has stride 0 along the dims it is repeated over.
    const int r = shape.dims();
    auto strides = [&](const TensorShape& s) {
      DimVector st(r, 0);
      int64_t acc = 1;
      for (int i = r - 1, j = s.dims() - 1; j >= 0; --i, --j) {
        st[i] = s.dim_size(j) == 1 ? 0 : acc;
        acc *= s.dim_size(j);
      }
      return st;
    };
    const DimVector sc = strides(cond.shape()), st = strides(t.shape()), se = strides(e.shape());
    const bool* cp = cond.data<bool>();
    const T* tp = t.data<T>();
    const T* ep = e.data<T>();
    T* op = out->data<T>();
    if (r == 0) {
      *op = *cp ? *tp : *ep;
      return absl::OkStatus();
    }
    const int64_t inner = shape.dim_size(r - 1);
    const int64_t ic = sc[r - 1], it = st[r - 1], ie = se[r - 1];
    DimVector idx(r, 0);
    int64_t oc = 0, ot = 0, oe = 0;
    for (int64_t k = 0; k < n; k += inner) {
      for (int64_t j = 0; j < inner; ++j) {
        op[k + j] = cp[oc + j * ic] ? tp[ot + j * it] : ep[oe + j * ie];
      }
      for (int i = r - 2; i >= 0; --i) {  // odometer over the outer dims
        oc += sc[i];
        ot += st[i];
        oe += se[i];
        if (++idx[i] < shape.dim_size(i)) break;
        oc -= sc[i] * idx[i];
        ot -= st[i] * idx[i];
        oe -= se[i] * idx[i];
        idx[i] = 0;
      }
    }
    return absl::OkStatus();
  }
};

template <typename Src, typename Dst>
class CastKernel : public OpKernel {
 public:
  explicit CastKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if constexpr (std::is_same_v<Src, Dst>) {
      ctx.set_output(0, x);
    } else {
      Tensor* y;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
      cwise::Assign(ctx, x.NumElements(), Flat<Dst>(*y), Flat<Src>(x).template cast<Dst>());
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Registration.

#define REGISTER_CPU(op, T, ...) \
  STRATA_REGISTER_KERNEL(KernelBuilder(op).Device(kDeviceCpu).TypeConstraint<T>("T"), __VA_ARGS__)

#define REGISTER_BINARY(op, T, F) REGISTER_CPU(op, T, BinaryKernel<T, F>)
#define REGISTER_UNARY(op, T, F) REGISTER_CPU(op, T, UnaryKernel<T, F>)

// ClipByValue: min(max(t, lo), hi), each bound a scalar or of t's shape.
template <typename T>
class ClipByValueKernel : public OpKernel {
 public:
  explicit ClipByValueKernel(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& t = ctx.input(0);
    const Tensor& lo = ctx.input(1);
    const Tensor& hi = ctx.input(2);
    STRATA_RETURN_IF_ERROR(CheckClipByValueBounds(t.shape(), lo.shape(), hi.shape()));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, t.shape(), &out));
    const int64_t n = t.NumElements();
    const T* x = t.data<T>();
    const T* l = lo.data<T>();
    const T* h = hi.data<T>();
    const bool ls = lo.dims() == 0, hs = hi.dims() == 0;
    T* o = out->data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const T a = l[ls ? 0 : i], b = h[hs ? 0 : i];
      const T v = x[i] < a ? a : x[i];
      o[i] = v > b ? b : v;
    }
    return absl::OkStatus();
  }
};

// Cumsum and Cumprod: running sums (products) along an axis, each run (outer
// index, inner index) accumulated in order (or from the end), optionally
// leaving the element itself out.
template <typename T, bool kProd>
class CumsumKernel : public OpKernel {
 public:
  explicit CumsumKernel(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("exclusive", &exclusive_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("reverse", &reverse_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (ctx.input(1).dims() != 0) return absl::InvalidArgumentError("Cumsum axis must be a scalar");
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, IntTensorValues(ctx.input(1), "Cumsum axis"));
    if (x.dims() == 0) return absl::InvalidArgumentError("Cumsum of a scalar (x needs rank >= 1)");
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v[0], x.dims(), "Cumsum axis"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &out));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= x.dim_size(i);
    for (int i = axis + 1; i < x.dims(); ++i) inner *= x.dim_size(i);
    const int64_t n = x.dim_size(axis);
    const T* in = x.data<T>();
    T* o = out->data<T>();
    std::vector<T> acc(static_cast<size_t>(inner));
    for (int64_t p = 0; p < outer; ++p) {
      std::fill(acc.begin(), acc.end(), T(kProd ? 1 : 0));
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = reverse_ ? n - 1 - k : k;
        const T* src = in + (p * n + j) * inner;
        T* dst = o + (p * n + j) * inner;
        for (int64_t q = 0; q < inner; ++q) {
          if (exclusive_) dst[q] = acc[q];
          if constexpr (kProd) {
            acc[q] *= src[q];
          } else {
            acc[q] += src[q];
          }
          if (!exclusive_) dst[q] = acc[q];
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  bool exclusive_ = false;
  bool reverse_ = false;
};

#define REGISTER_ARITHMETIC(T)                                      \
  REGISTER_BINARY("Add", T, ei::scalar_sum_op<T>);                   \
  REGISTER_BINARY("AddV2", T, ei::scalar_sum_op<T>);                 \
  REGISTER_BINARY("Sub", T, ei::scalar_difference_op<T>);            \
  REGISTER_BINARY("SquaredDifference", T, cwise::SquaredDifference<T>); \
  REGISTER_BINARY("Mul", T, ei::scalar_product_op<T>);               \
  REGISTER_BINARY("Maximum", T, ei::scalar_max_op<T>);               \
  REGISTER_BINARY("Minimum", T, ei::scalar_min_op<T>);               \
  REGISTER_UNARY("Neg", T, ei::scalar_opposite_op<T>);               \
  REGISTER_UNARY("Square", T, ei::scalar_square_op<T>);              \
  REGISTER_CPU("Pow", T, PowKernel<T>);                              \
  REGISTER_CPU("Equal", T, EqualKernel<T>);                          \
  REGISTER_CPU("NotEqual", T, EqualKernel<T, std::not_equal_to<T>>); \
  REGISTER_CPU("Less", T, CompareKernel<T, std::less<T>>);         \
  REGISTER_CPU("LessEqual", T, CompareKernel<T, std::less_equal<T>>); \
  REGISTER_CPU("Greater", T, CompareKernel<T, std::greater<T>>);   \
  REGISTER_CPU("GreaterEqual", T, CompareKernel<T, std::greater_equal<T>>); \
  REGISTER_CPU("AddN", T, AddNKernel<T>);                            \
  REGISTER_CPU("Select", T, SelectKernel<T>);                        \
  REGISTER_CPU("SelectV2", T, SelectV2Kernel<T>);                    \
  REGISTER_CPU("ClipByValue", T, ClipByValueKernel<T>);              \
  REGISTER_CPU("Cumsum", T, CumsumKernel<T, false>);             \
  REGISTER_CPU("Cumprod", T, CumsumKernel<T, true>)

REGISTER_ARITHMETIC(float);
REGISTER_ARITHMETIC(double);
REGISTER_ARITHMETIC(int32_t);
REGISTER_ARITHMETIC(int64_t);

REGISTER_CPU("Equal", bool, EqualKernel<bool>);
REGISTER_CPU("NotEqual", bool, EqualKernel<bool, std::not_equal_to<bool>>);
STRATA_REGISTER_KERNEL(KernelBuilder("LogicalAnd").Device(kDeviceCpu),
                       CompareKernel<bool, std::logical_and<bool>>);
STRATA_REGISTER_KERNEL(KernelBuilder("LogicalOr").Device(kDeviceCpu), CompareKernel<bool, std::logical_or<bool>>);
STRATA_REGISTER_KERNEL(KernelBuilder("LogicalNot").Device(kDeviceCpu), LogicalNotKernel);
REGISTER_CPU("Select", bool, SelectKernel<bool>);
REGISTER_CPU("SelectV2", bool, SelectV2Kernel<bool>);

// Division and transcendental functions: floating types only (integer
// division by zero would trap).
#define REGISTER_FLOATING(T)                                  \
  REGISTER_BINARY("RealDiv", T, ei::scalar_quotient_op<T>);  \
  REGISTER_UNARY("Sqrt", T, ei::scalar_sqrt_op<T>);          \
  REGISTER_UNARY("Rsqrt", T, ei::scalar_rsqrt_op<T>);        \
  REGISTER_UNARY("Exp", T, ei::scalar_exp_op<T>);            \
  REGISTER_UNARY("Erf", T, ei::scalar_erf_op<T>);            \
  REGISTER_UNARY("Erfc", T, ei::scalar_erfc_op<T>);          \
  REGISTER_UNARY("Log", T, ei::scalar_log_op<T>);            \
  REGISTER_UNARY("Floor", T, ei::scalar_floor_op<T>)

REGISTER_FLOATING(float);
REGISTER_FLOATING(double);

#define REGISTER_CAST(S, D)                                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("Cast").Device(kDeviceCpu).TypeConstraint<S>("SrcT") \
                             .TypeConstraint<D>("DstT"),                               \
                         CastKernel<S, D>)
#define REGISTER_CAST_FROM(S)   \
  REGISTER_CAST(S, float);      \
  REGISTER_CAST(S, double);     \
  REGISTER_CAST(S, int32_t);    \
  REGISTER_CAST(S, int64_t);    \
  REGISTER_CAST(S, bool);       \
  REGISTER_CAST(S, uint8_t);    \
  REGISTER_CAST(S, int8_t);     \
  REGISTER_CAST(S, int16_t)

REGISTER_CAST_FROM(float);
REGISTER_CAST_FROM(double);
REGISTER_CAST_FROM(int32_t);
REGISTER_CAST_FROM(int64_t);
REGISTER_CAST_FROM(bool);
REGISTER_CAST_FROM(uint8_t);
REGISTER_CAST_FROM(int8_t);
REGISTER_CAST_FROM(int16_t);

// bfloat16 and half (mixed precision, train/policy.h) to and from the
// float and integer types; Eigen converts through float.
#define REGISTER_CAST_DT(S, SDT, D, DDT)                                                  \
  STRATA_REGISTER_KERNEL(KernelBuilder("Cast").Device(kDeviceCpu).TypeConstraint("SrcT", SDT) \
                             .TypeConstraint("DstT", DDT),                                \
                         CastKernel<S, D>)
#define REGISTER_CAST_LOW(L, LDT)                                \
  REGISTER_CAST_DT(L, LDT, float, DT_FLOAT);                     \
  REGISTER_CAST_DT(float, DT_FLOAT, L, LDT);                     \
  REGISTER_CAST_DT(L, LDT, double, DT_DOUBLE);                   \
  REGISTER_CAST_DT(double, DT_DOUBLE, L, LDT);                   \
  REGISTER_CAST_DT(L, LDT, int32_t, DT_INT32);                   \
  REGISTER_CAST_DT(int32_t, DT_INT32, L, LDT);                   \
  REGISTER_CAST_DT(L, LDT, int64_t, DT_INT64);                   \
  REGISTER_CAST_DT(int64_t, DT_INT64, L, LDT);                   \
  REGISTER_CAST_DT(L, LDT, L, LDT)
REGISTER_CAST_LOW(Eigen::bfloat16, DT_BFLOAT16);
REGISTER_CAST_LOW(Eigen::half, DT_HALF);
REGISTER_CAST_DT(Eigen::bfloat16, DT_BFLOAT16, Eigen::half, DT_HALF);
REGISTER_CAST_DT(Eigen::half, DT_HALF, Eigen::bfloat16, DT_BFLOAT16);
#undef REGISTER_CAST_LOW
#undef REGISTER_CAST_DT

}  // namespace
}  // namespace strata
