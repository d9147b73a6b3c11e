// Elementwise and NumPy-broadcasting helpers for CPU kernels, shared by the
// math, nn and array kernel families.
//
// What is here:
//   - BCast: the broadcast of two shapes, with runs of dims that broadcast the
//     same way collapsed into one (so [N,H,W,C] + [C] is a rank-2 problem).
//   - Assign(ctx, n, out, expr): evaluates an Eigen tensor expression into
//     `out`, inline on the calling thread when the tensor is small (n <
//     kParallelMinElements, where a thread-pool hand-off costs more than the
//     work) and on the device's intra-op pool otherwise.
//   - UnaryOp<T, F>(ctx) and BinaryOp<T, F>(ctx): whole kernel bodies for
//     elementwise ops, with fast paths for same-shape and scalar operands and
//     input-buffer reuse. F is an Eigen-style functor (operator(), and
//     packetOp when functor_traits<F>::PacketAccess); Eigen's own functors
//     (Eigen::internal::scalar_sum_op<T>, scalar_exp_op<T>, ...) work as is.
//   - Functors Eigen lacks: Pow (integer-safe), EqualTo (bool result).
//
//   class ReluOp : public OpKernel {
//    public:
//     using OpKernel::OpKernel;
//     absl::Status Compute(OpKernelContext& ctx) override {
//       return cwise::UnaryOp<float, ReluFunctor>(ctx);  // y = relu(x), reusing x's buffer
//     }
//   };
//   // A broadcasting binary kernel in one line:
//   return cwise::BinaryOp<T, Eigen::internal::scalar_sum_op<T>>(ctx);
//
// Thread-safety: everything here is stateless; call from any thread.
// Ownership: helpers write only the kernel's outputs (via the context).
#ifndef STRATA_KERNELS_CPU_CWISE_H_
#define STRATA_KERNELS_CPU_CWISE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/tensor.h"
#include "kernels/eigen_views.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace cwise {

// Below this many output elements an elementwise kernel runs on the calling
// thread: splitting ~32K floats across threads saves less than the hand-off
// costs (a few microseconds).
inline constexpr int64_t kParallelMinElements = 32768;

// Evaluates `out = expr` (out: an Eigen TensorMap; n: its element count),
// inline when small, on the intra-op pool when large.
template <typename OutMap, typename Expr>
inline void Assign(const OpKernelContext& ctx, int64_t n, OutMap out, const Expr& expr) {
  if (n < kParallelMinElements) {
    out = expr;
  } else {
    out.device(ctx.eigen_cpu_device()) = expr;
  }
}

// The broadcast of shapes x and y (NumPy rules) in collapsed form: each of
// x and y is reshaped to x_reshape / y_reshape (same rank r >= 1, same
// element order as the original buffer) and then broadcast by x_bcast /
// y_bcast, giving result dims (x_reshape[i] * x_bcast[i]). Adjacent dims that
// broadcast the same way are merged and dims of size 1 in both are dropped.
//
//   BCast b(x.shape(), y.shape());
//   if (!b.ok()) return b.status();  // "Incompatible shapes: [2,3] vs. [4]"
//   b.output_shape();  // the un-collapsed result shape, e.g. [2,3]
class BCast {
 public:
  BCast(const TensorShape& x, const TensorShape& y);

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  const TensorShape& output_shape() const { return output_shape_; }
  int rank() const { return static_cast<int>(x_reshape_.size()); }
  const DimVector& x_reshape() const { return x_reshape_; }
  const DimVector& x_bcast() const { return x_bcast_; }
  const DimVector& y_reshape() const { return y_reshape_; }
  const DimVector& y_bcast() const { return y_bcast_; }
  // The collapsed result dims (x_reshape * x_bcast).
  const DimVector& result() const { return result_; }

 private:
  absl::Status status_;
  TensorShape output_shape_;
  DimVector x_reshape_, x_bcast_, y_reshape_, y_bcast_, result_;
};

inline BCast::BCast(const TensorShape& x, const TensorShape& y) {
  const int rank = std::max(x.dims(), y.dims());
  DimVector out(rank);
  // How each output dim is produced: 0 = x and y both full, 1 = x broadcast,
  // 2 = y broadcast; -1 = size 1 in both (dropped).
  absl::InlinedVector<int, 8> kind(rank);
  for (int i = 0; i < rank; ++i) {
    const int ix = x.dims() - rank + i, iy = y.dims() - rank + i;
    const int64_t dx = ix >= 0 ? x.dim_size(ix) : 1;
    const int64_t dy = iy >= 0 ? y.dim_size(iy) : 1;
    if (dx == dy) {
      out[i] = dx;
      kind[i] = dx == 1 ? -1 : 0;
    } else if (dx == 1) {
      out[i] = dy;
      kind[i] = 1;
    } else if (dy == 1) {
      out[i] = dx;
      kind[i] = 2;
    } else {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("Incompatible shapes: ", x.DebugString(), " vs. ", y.DebugString()));
      return;
    }
  }
  auto s = TensorShape::FromDims(out);
  if (!s.ok()) {
    status_ = s.status();
    return;
  }
  output_shape_ = *std::move(s);
  int prev = -2;
  for (int i = 0; i < rank; ++i) {
    if (kind[i] == -1) continue;
    const int64_t d = out[i];
    if (kind[i] != prev) {
      x_reshape_.push_back(1);
      x_bcast_.push_back(1);
      y_reshape_.push_back(1);
      y_bcast_.push_back(1);
      result_.push_back(1);
      prev = kind[i];
    }
    result_.back() *= d;
    (kind[i] == 1 ? x_bcast_ : x_reshape_).back() *= d;
    (kind[i] == 2 ? y_bcast_ : y_reshape_).back() *= d;
  }
  if (result_.empty()) {
    x_reshape_ = x_bcast_ = y_reshape_ = y_bcast_ = result_ = DimVector{1};
  }
}

namespace internal {

// f bound to a constant right (or left) operand, keeping packet access.
template <typename F, typename T>
struct BindRight {
  F f;
  T v;
  EIGEN_STRONG_INLINE auto operator()(const T& a) const { return f(a, v); }
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& a) const {
    return f.packetOp(a, Eigen::internal::pset1<Packet>(v));
  }
};
template <typename F, typename T>
struct BindLeft {
  F f;
  T v;
  EIGEN_STRONG_INLINE auto operator()(const T& b) const { return f(v, b); }
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& b) const {
    return f.packetOp(Eigen::internal::pset1<Packet>(v), b);
  }
};

template <int N>
Eigen::DSizes<Eigen::DenseIndex, N> ToDSizes(const DimVector& d) {
  Eigen::DSizes<Eigen::DenseIndex, N> r;
  for (int i = 0; i < N; ++i) r[i] = d[i];
  return r;
}

template <typename T, typename Out, typename F, int N>
void BroadcastN(const OpKernelContext& ctx, const BCast& b, const T* x, const T* y, Out* z,
                int64_t n) {
  ConstTensorMapT<T, N> xm(x, ToDSizes<N>(b.x_reshape()));
  ConstTensorMapT<T, N> ym(y, ToDSizes<N>(b.y_reshape()));
  TensorMapT<Out, N> zm(z, ToDSizes<N>(b.result()));
  Assign(ctx, n, zm,
         xm.broadcast(ToDSizes<N>(b.x_bcast())).binaryExpr(ym.broadcast(ToDSizes<N>(b.y_bcast())), F()));
}

// Collapsed rank 2 ([R, C]; every operand full, a row vector repeated over
// R, or a column repeated over C): row by row, each row one contiguous 1-D
// expression. Faster than Eigen's rank-2 broadcast evaluator, whose index
// arithmetic per element dominates when C is not a multiple of the packet
// size (e.g. a bias of 10 classes); large problems split rows over the pool.
template <typename T, typename Out, typename F>
void Broadcast2D(const OpKernelContext& ctx, const BCast& b, const T* x, const T* y, Out* z,
                 int64_t n) {
  using In1 = Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, Eigen::DenseIndex>>;
  using Out1 = Eigen::TensorMap<Eigen::Tensor<Out, 1, Eigen::RowMajor, Eigen::DenseIndex>>;
  const int64_t cols = b.result()[1];
  // Offset of element (r, c) = r * row_stride + c * col_stride (0 or 1).
  const int64_t x_col = b.x_reshape()[1] == 1 ? 0 : 1, y_col = b.y_reshape()[1] == 1 ? 0 : 1;
  const int64_t x_row = b.x_reshape()[0] == 1 ? 0 : b.x_reshape()[1];
  const int64_t y_row = b.y_reshape()[0] == 1 ? 0 : b.y_reshape()[1];
  auto rows = [=](Eigen::Index r0, Eigen::Index r1) {
    for (Eigen::Index r = r0; r < r1; ++r) {
      const T* xr = x + r * x_row;
      const T* yr = y + r * y_row;
      Out* zp = z + r * cols;
      if (cols < 64) {  // short rows: a plain loop beats setting up an expression
        const F f;
        if (x_col && y_col) {
          for (int64_t c = 0; c < cols; ++c) zp[c] = f(xr[c], yr[c]);
        } else if (x_col) {
          const T v = *yr;
          for (int64_t c = 0; c < cols; ++c) zp[c] = f(xr[c], v);
        } else {
          const T v = *xr;
          for (int64_t c = 0; c < cols; ++c) zp[c] = f(v, yr[c]);
        }
        continue;
      }
      Out1 zr(zp, cols);
      if (x_col && y_col) {
        zr = In1(xr, cols).binaryExpr(In1(yr, cols), F());
      } else if (x_col) {
        zr = In1(xr, cols).unaryExpr(BindRight<F, T>{F(), *yr});
      } else {
        zr = In1(yr, cols).unaryExpr(BindLeft<F, T>{F(), *xr});
      }
    }
  };
  const int64_t num_rows = b.result()[0];
  if (n < kParallelMinElements) {
    rows(0, num_rows);
  } else {
    ctx.eigen_cpu_device().parallelFor(
        num_rows,
        Eigen::TensorOpCost(2 * cols * sizeof(T), cols * sizeof(Out),
                            cols * Eigen::internal::functor_traits<F>::Cost),
        rows);
  }
}

// Any rank, one element at a time: for collapsed ranks above what the Eigen
// paths are instantiated for (shapes alternating broadcast sides 6+ times).
template <typename T, typename Out, typename F>
void BroadcastGeneric(const BCast& b, const T* x, const T* y, Out* z) {
  const int r = b.rank();
  DimVector xs(r), ys(r), idx(r, 0);
  int64_t sx = 1, sy = 1;
  for (int i = r - 1; i >= 0; --i) {
    xs[i] = b.x_bcast()[i] == 1 ? sx : 0;
    ys[i] = b.y_bcast()[i] == 1 ? sy : 0;
    sx *= b.x_reshape()[i];
    sy *= b.y_reshape()[i];
  }
  int64_t n = 1;
  for (int64_t d : b.result()) n *= d;
  F f;
  int64_t ox = 0, oy = 0;
  for (int64_t k = 0; k < n; ++k) {
    z[k] = f(x[ox], y[oy]);
    for (int i = r - 1; i >= 0; --i) {  // odometer increment
      ox += xs[i];
      oy += ys[i];
      if (++idx[i] < b.result()[i]) break;
      ox -= xs[i] * idx[i];
      oy -= ys[i] * idx[i];
      idx[i] = 0;
    }
  }
}

}  // namespace internal

// Output 0 = F(input 0), elementwise; reuses input 0's buffer when nobody
// else holds it.
template <typename T, typename F>
absl::Status UnaryOp(OpKernelContext& ctx, F f = F()) {
  const Tensor& x = ctx.input(0);
  Tensor* y;
  STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, x.shape(), &y));
  const int64_t n = x.NumElements();
  if (n == 1) {
    *y->data<T>() = f(*x.data<T>());
    return absl::OkStatus();
  }
  Assign(ctx, n, Flat<T>(*y), Flat<T>(x).unaryExpr(f));
  return absl::OkStatus();
}

// Output 0 = F(input 0, input 1) with NumPy broadcasting. The output type is
// F's result_type (T for arithmetic, bool for comparisons). Mismatched shapes
// give InvalidArgument "Incompatible shapes: [..] vs. [..]".
template <typename T, typename F>
absl::Status BinaryOp(OpKernelContext& ctx) {
  using Out = std::remove_cv_t<std::remove_reference_t<decltype(F()(T(), T()))>>;
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const int64_t nx = x.NumElements(), ny = y.NumElements();
  Tensor* z;
  // Same shape: one flat pass.
  if (x.shape() == y.shape()) {
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, x.shape(), &z));
    if (nx == 1) {
      *z->data<Out>() = F()(*x.data<T>(), *y.data<T>());
    } else {
      Assign(ctx, nx, Flat<Out>(*z), Flat<T>(x).binaryExpr(Flat<T>(y), F()));
    }
    return absl::OkStatus();
  }
  // One operand a single element that does not raise the rank: bind it.
  if (ny == 1 && y.dims() <= x.dims()) {
    const T v = *y.data<T>();  // read before the output may take y's buffer
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, x.shape(), &z));
    Assign(ctx, nx, Flat<Out>(*z), Flat<T>(x).unaryExpr(internal::BindRight<F, T>{F(), v}));
    return absl::OkStatus();
  }
  if (nx == 1 && x.dims() <= y.dims()) {
    const T v = *x.data<T>();
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({1}, 0, y.shape(), &z));
    Assign(ctx, ny, Flat<Out>(*z), Flat<T>(y).unaryExpr(internal::BindLeft<F, T>{F(), v}));
    return absl::OkStatus();
  }
  // General broadcasting, on the collapsed shapes.
  BCast b(x.shape(), y.shape());
  if (!b.ok()) return b.status();
  // An input with the output's element count is laid out exactly like the
  // output (it is not broadcast), so writing into it in place is safe.
  STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, b.output_shape(), &z));
  const int64_t n = b.output_shape().num_elements();
  if (n == 0) return absl::OkStatus();
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  Out* zp = z->data<Out>();
  switch (b.rank()) {
    case 1: internal::BroadcastN<T, Out, F, 1>(ctx, b, xp, yp, zp, n); break;
    case 2: internal::Broadcast2D<T, Out, F>(ctx, b, xp, yp, zp, n); break;
    case 3: internal::BroadcastN<T, Out, F, 3>(ctx, b, xp, yp, zp, n); break;
    case 4: internal::BroadcastN<T, Out, F, 4>(ctx, b, xp, yp, zp, n); break;
    case 5: internal::BroadcastN<T, Out, F, 5>(ctx, b, xp, yp, zp, n); break;
    default: internal::BroadcastGeneric<T, Out, F>(b, xp, yp, zp); break;
  }
  return absl::OkStatus();
}

// x ** y. Floating types use std::pow; integer types use exact repeated
// squaring (callers reject negative integer exponents first, as TensorFlow
// does, since the result is not an integer).
template <typename T>
struct Pow {
  EIGEN_STRONG_INLINE T operator()(const T& a, const T& b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {
      T result = 1, base = a;
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return result;
    }
  }
};

// (a - b)^2, vectorized where the type's packets subtract and multiply.
template <typename T>
struct SquaredDifference {
  EIGEN_STRONG_INLINE T operator()(const T& a, const T& b) const {
    const T d = a - b;
    return d * d;
  }
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& a, const Packet& b) const {
    const Packet d = Eigen::internal::psub(a, b);
    return Eigen::internal::pmul(d, d);
  }
};

// a == b, as bool.
template <typename T>
struct EqualTo {
  EIGEN_STRONG_INLINE bool operator()(const T& a, const T& b) const { return a == b; }
};

// Cmp(a, b), as bool: comparisons (std::less<T>, ...) and logical ops
// (std::logical_and<bool>, ...).
template <typename T, typename Cmp>
struct Compare {
  EIGEN_STRONG_INLINE bool operator()(const T& a, const T& b) const { return Cmp()(a, b); }
};

// dst[j] = sum over i < rows of src[i * cols + j]: the column sums of a
// row-major [rows, cols] matrix (a bias gradient, a reduction over leading
// axes). Rows are added in order into the output, vectorised along the
// columns; with enough work the columns are split over the device's
// threads. Deterministic: the same order whatever the threads.
template <typename T>
void ColumnSum(const OpKernelContext& ctx, const T* src, int64_t rows, int64_t cols, T* dst) {
  auto run = [src, rows, cols, dst](int64_t c0, int64_t c1) {
    T* d = dst + c0;
    const int64_t w = c1 - c0;
    if (rows == 0) {
      std::fill(d, d + w, T(0));
      return;
    }
    std::copy(src + c0, src + c1, d);
    for (int64_t i = 1; i < rows; ++i) {
      const T* s = src + i * cols + c0;
      for (int64_t j = 0; j < w; ++j) d[j] += s[j];
    }
  };
  const Eigen::ThreadPoolDevice& dev = ctx.eigen_cpu_device();
  if (rows * cols < (int64_t{1} << 15) || dev.numThreads() <= 1 || cols < 32) {
    run(0, cols);
    return;
  }
  const double bytes = static_cast<double>(rows) * sizeof(T);
  dev.parallelFor(cols, Eigen::TensorOpCost(bytes, sizeof(T), static_cast<double>(rows)),
                  [&run](Eigen::Index b, Eigen::Index e) { run(b, e); });
}

}  // namespace cwise
}  // namespace strata

namespace Eigen {
namespace internal {
template <typename F, typename T>
struct functor_traits<::strata::cwise::internal::BindRight<F, T>> : functor_traits<F> {};
template <typename F, typename T>
struct functor_traits<::strata::cwise::internal::BindLeft<F, T>> : functor_traits<F> {};
template <typename T>
struct functor_traits<::strata::cwise::Pow<T>> {
  enum { Cost = 5 * NumTraits<T>::MulCost, PacketAccess = false };
};
template <typename T>
struct functor_traits<::strata::cwise::SquaredDifference<T>> {
  enum {
    Cost = NumTraits<T>::AddCost + NumTraits<T>::MulCost,
    PacketAccess = packet_traits<T>::HasSub && packet_traits<T>::HasMul
  };
};
template <typename T>
struct functor_traits<::strata::cwise::EqualTo<T>> {
  enum { Cost = NumTraits<T>::AddCost, PacketAccess = false };
};
template <typename T, typename Cmp>
struct functor_traits<::strata::cwise::Compare<T, Cmp>> {
  enum { Cost = NumTraits<T>::AddCost, PacketAccess = false };
};
}  // namespace internal
}  // namespace Eigen

#endif  // STRATA_KERNELS_CPU_CWISE_H_
