// Launchers for the elementwise GPU kernels (cwise_gpu.cu): unary and
// broadcasting binary functions, casts, fills and broadcast copies. Plain
// signatures (device pointers, sizes, a stream) so the OpKernel glue
// (cwise_kernels.cc, array_kernels.cc) is ordinary host C++.
//
//   StridedShape s = ...;  // collapsed broadcast (cwise::BCast), strides per operand
//   cudaError_t e = LaunchBinary(BinaryFn::kAdd, ElemType::kFloat, x, y, z, s, n, stream);
//
// Every launcher enqueues on `stream`, returns the launch error (or
// cudaSuccess) and never synchronizes; n == 0 launches nothing.
// Half and bfloat16 compute in float and round once.
//
// Thread-safety: launchers are reentrant. Ownership: pointers are borrowed
// and must stay valid until the stream reaches the kernel.
#ifndef STRATA_KERNELS_GPU_CWISE_GPU_H_
#define STRATA_KERNELS_GPU_CWISE_GPU_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpu/elem_type.h"

namespace strata {
namespace gpu {

enum class UnaryFn : int { kNeg, kSquare, kSqrt, kRsqrt, kExp, kLog, kRelu, kSigmoid, kTanh, kFloor, kErf, kErfc };

// kReluGrad: z = x * (y > 0) (x: gradients, y: features).
// kSquaredDifference: z = (x - y)^2. The comparisons (kEqual, kNotEqual,
// kLess, kLessEqual, kGreater, kGreaterEqual) write bool.
enum class BinaryFn : int {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kReluGrad, kEqual, kSquaredDifference,
  kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual
};
inline constexpr bool IsComparison(BinaryFn fn) {
  return fn == BinaryFn::kEqual || fn == BinaryFn::kNotEqual || fn == BinaryFn::kLess ||
         fn == BinaryFn::kLessEqual || fn == BinaryFn::kGreater || fn == BinaryFn::kGreaterEqual;
}

// float, double, half, bfloat16 (and int64 for kNeg, kSquare, kRelu).
// kFloor, kErf, kErfc: the floating types.
cudaError_t LaunchUnary(UnaryFn fn, ElemType t, const void* x, void* y, int64_t n, cudaStream_t s);

// z[i] = fn(x[xo(i)], y[yo(i)]) over the n elements of shape.dims. kAdd..kMin:
// float, double, half, bfloat16, int64; kDiv, kPow, kReluGrad: the floating
// types; the comparisons: those types, and bool for kEqual and kNotEqual
// (int32 lives in host memory: its kernels compute on the host).
cudaError_t LaunchBinary(BinaryFn fn, ElemType t, const void* x, const void* y, void* z,
                         const StridedShape& shape, int64_t n, cudaStream_t s);

// y = static_cast<dst>(x) among float, double, half, bfloat16, int32, int64,
// bool (both in device memory); float -> int truncates toward zero, -> bool
// is x != 0.
cudaError_t LaunchCast(ElemType src, ElemType dst, const void* x, void* y, int64_t n,
                       cudaStream_t s);

// out[i] = *value for i < n; `value` is one element in device memory.
// elem_bytes is 1, 2, 4 or 8.
cudaError_t LaunchFill(int elem_bytes, const void* value, void* out, int64_t n, cudaStream_t s);

// out[i] = x[xo(i)] (shape.x_strides; y_strides unused). elem_bytes 1/2/4/8.
cudaError_t LaunchBroadcastCopy(int elem_bytes, const void* x, void* out, const StridedShape& shape,
                                int64_t n, cudaStream_t s);

// Cumsum (prod false) or Cumprod of x viewed as [outer, n, inner] along n,
// as tf.math.cumsum's exclusive and reverse. float, double, half, bfloat16
// (accumulating in float), int64.
cudaError_t LaunchCumulative(ElemType t, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                             bool exclusive, bool reverse, bool prod, cudaStream_t s);

// The band of each innermost [m, n] matrix of x (n_total elements): element
// (row, col) kept where row - col <= lower and col - row <= upper (a negative
// bound keeps that whole triangle), zero bytes elsewhere. elem_bytes 1/2/4/8.
cudaError_t LaunchMatrixBandPart(int elem_bytes, const void* x, void* out, int64_t n_total, int64_t m, int64_t n,
                                 int64_t lower, int64_t upper, cudaStream_t s);

// out[yo(i)] = x[xo(i)] (both strides): a strided scatter, e.g. a slice's
// gradient into zeros. The yo(i) must be distinct. elem_bytes 1/2/4/8.
cudaError_t LaunchStridedScatter(int elem_bytes, const void* x, void* out, const StridedShape& shape, int64_t n,
                                 cudaStream_t s);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_CWISE_GPU_H_
