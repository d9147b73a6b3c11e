// Elementwise kernels: one grid-stride loop per launch. Broadcast operands
// are read through per-dim strides (0 on a broadcast dim) over the collapsed
// output shape, so [N,H,W,C] + [C] costs one div/mod pair per collapsed dim.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gpu/cwise_gpu.h"

namespace strata {
namespace gpu {
namespace {

constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

// The arithmetic type of each storage type.
template <typename T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };

template <typename T> __device__ __forceinline__ typename Acc<T>::type Load(const T& v) {
  return static_cast<typename Acc<T>::type>(v);
}
template <> __device__ __forceinline__ float Load(const __half& v) { return __half2float(v); }
template <> __device__ __forceinline__ float Load(const __nv_bfloat16& v) { return __bfloat162float(v); }

template <typename T, typename A> __device__ __forceinline__ T Store(A v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half Store<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 Store<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename A> __device__ __forceinline__ A Unary(UnaryFn fn, A x) {
  switch (fn) {
    case UnaryFn::kNeg: return -x;
    case UnaryFn::kSquare: return x * x;
    case UnaryFn::kRelu: return x > A(0) ? x : A(0);
    default: break;
  }
  if constexpr (std::is_floating_point<A>::value) {
    switch (fn) {
      case UnaryFn::kSqrt: return sqrt(x);
      case UnaryFn::kRsqrt: return A(1) / sqrt(x);
      case UnaryFn::kExp: return exp(x);
      case UnaryFn::kLog: return log(x);
      case UnaryFn::kSigmoid: return A(1) / (A(1) + exp(-x));
      case UnaryFn::kTanh: return tanh(x);
      case UnaryFn::kFloor: return floor(x);
      case UnaryFn::kErf: return erf(x);
      case UnaryFn::kErfc: return erfc(x);
      default: break;
    }
  }
  return x;
}

template <typename A> __device__ __forceinline__ A Binary(BinaryFn fn, A x, A y) {
  switch (fn) {
    case BinaryFn::kAdd: return x + y;
    case BinaryFn::kSub: return x - y;
    case BinaryFn::kMul: return x * y;
    case BinaryFn::kSquaredDifference: return (x - y) * (x - y);
    case BinaryFn::kMax: return x > y ? x : y;
    case BinaryFn::kMin: return x < y ? x : y;
    default: break;
  }
  if constexpr (std::is_floating_point<A>::value) {
    switch (fn) {
      case BinaryFn::kDiv: return x / y;
      case BinaryFn::kPow: return pow(x, y);
      case BinaryFn::kReluGrad: return y > A(0) ? x : A(0);
      default: break;
    }
  }
  return x;
}

template <typename A> __device__ __forceinline__ bool Compare(BinaryFn fn, A x, A y) {
  switch (fn) {
    case BinaryFn::kNotEqual: return x != y;
    case BinaryFn::kLess: return x < y;
    case BinaryFn::kLessEqual: return x <= y;
    case BinaryFn::kGreater: return x > y;
    case BinaryFn::kGreaterEqual: return x >= y;
    default: return x == y;
  }
}

__device__ __forceinline__ void Offsets(const StridedShape& s, int64_t i, int64_t* xo, int64_t* yo) {
  int64_t x = 0, y = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const int64_t c = i % s.dims[d];
    i /= s.dims[d];
    x += c * s.x_strides[d];
    y += c * s.y_strides[d];
  }
  *xo = x;
  *yo = y;
}

template <typename T>
__global__ void UnaryKernel(UnaryFn fn, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = Store<T>(Unary(fn, Load(x[i])));
  }
}

// `contiguous`: both operands have the output's layout (no index decode).
template <typename T, typename Out>
__global__ void BinaryKernel(BinaryFn fn, const T* x, const T* y, Out* z, StridedShape s, bool contiguous,
                             int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t xo = i, yo = i;
    if (!contiguous) Offsets(s, i, &xo, &yo);
    if constexpr (std::is_same<Out, bool>::value) {
      z[i] = Compare(fn, Load(x[xo]), Load(y[yo]));
    } else {
      z[i] = Store<T>(Binary(fn, Load(x[xo]), Load(y[yo])));
    }
  }
}

template <typename S, typename D>
__global__ void CastKernel(const S* x, D* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const auto v = Load(x[i]);
    if constexpr (std::is_same<D, bool>::value) {
      y[i] = v != decltype(v)(0);
    } else if constexpr (std::is_same<D, __half>::value || std::is_same<D, __nv_bfloat16>::value) {
      y[i] = Store<D>(static_cast<float>(v));
    } else {
      y[i] = static_cast<D>(v);
    }
  }
}

template <typename T>
__global__ void FillKernel(const T* value, T* out, int64_t n) {
  const T v = *value;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    out[i] = v;
  }
}

template <typename T>
__global__ void BroadcastCopyKernel(const T* x, T* out, StridedShape s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t xo, yo;
    Offsets(s, i, &xo, &yo);
    out[i] = x[xo];
  }
}

template <typename T>
__global__ void StridedScatterKernel(const T* x, T* out, StridedShape s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t xo, yo;
    Offsets(s, i, &xo, &yo);
    out[yo] = x[xo];
  }
}

template <typename T>
__global__ void BandPartKernel(const T* x, T* out, int64_t n_total, int64_t m, int64_t n, int64_t lower,
                               int64_t upper) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_total; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t col = i % n, row = (i / n) % m;
    const bool in = (lower < 0 || row - col <= lower) && (upper < 0 || col - row <= upper);
    out[i] = in ? x[i] : T(0);
  }
}

// One thread per (outer, inner) run, accumulating along the axis.
template <typename T>
__global__ void CumulativeKernel(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                                 bool reverse, bool prod) {
  using A = typename Acc<T>::type;
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < outer * inner;
       r += int64_t{blockDim.x} * gridDim.x) {
    const int64_t o = r / inner, q = r % inner;
    A acc = prod ? A(1) : A(0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = reverse ? n - 1 - k : k;
      const int64_t at = (o * n + j) * inner + q;
      const A v = Load(x[at]);
      if (exclusive) out[at] = Store<T>(acc);
      acc = prod ? acc * v : acc + v;
      if (!exclusive) out[at] = Store<T>(acc);
    }
  }
}

template <typename T>
cudaError_t Cumulative(const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                       bool prod, cudaStream_t s) {
  CumulativeKernel<<<Blocks(outer * inner), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), outer, n,
                                                               inner, exclusive, reverse, prod);
  return cudaGetLastError();
}

bool Contiguous(const StridedShape& s) {
  int64_t stride = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    if (s.dims[d] != 1 && (s.x_strides[d] != stride || s.y_strides[d] != stride)) return false;
    stride *= s.dims[d];
  }
  return true;
}

template <typename T>
cudaError_t Unary(UnaryFn fn, const void* x, void* y, int64_t n, cudaStream_t s) {
  UnaryKernel<T><<<Blocks(n), kThreads, 0, s>>>(fn, static_cast<const T*>(x), static_cast<T*>(y), n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Binary(BinaryFn fn, const void* x, const void* y, void* z, const StridedShape& sh, int64_t n,
                   cudaStream_t s) {
  const bool c = Contiguous(sh);
  if (IsComparison(fn)) {
    BinaryKernel<T, bool><<<Blocks(n), kThreads, 0, s>>>(fn, static_cast<const T*>(x), static_cast<const T*>(y),
                                                         static_cast<bool*>(z), sh, c, n);
  } else {
    BinaryKernel<T, T><<<Blocks(n), kThreads, 0, s>>>(fn, static_cast<const T*>(x), static_cast<const T*>(y),
                                                      static_cast<T*>(z), sh, c, n);
  }
  return cudaGetLastError();
}

template <typename S>
cudaError_t CastFrom(ElemType dst, const void* x, void* y, int64_t n, cudaStream_t s) {
  const S* in = static_cast<const S*>(x);
  switch (dst) {
    case ElemType::kFloat: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<float*>(y), n); break;
    case ElemType::kDouble: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<double*>(y), n); break;
    case ElemType::kHalf: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<__half*>(y), n); break;
    case ElemType::kBFloat16:
      CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(y), n);
      break;
    case ElemType::kInt32: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<int32_t*>(y), n); break;
    case ElemType::kInt64: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<int64_t*>(y), n); break;
    case ElemType::kBool: CastKernel<<<Blocks(n), kThreads, 0, s>>>(in, static_cast<bool*>(y), n); break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchUnary(UnaryFn fn, ElemType t, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Unary<float>(fn, x, y, n, s);
    case ElemType::kDouble: return Unary<double>(fn, x, y, n, s);
    case ElemType::kHalf: return Unary<__half>(fn, x, y, n, s);
    case ElemType::kBFloat16: return Unary<__nv_bfloat16>(fn, x, y, n, s);
    case ElemType::kInt64: return Unary<int64_t>(fn, x, y, n, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchBinary(BinaryFn fn, ElemType t, const void* x, const void* y, void* z,
                         const StridedShape& shape, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Binary<float>(fn, x, y, z, shape, n, s);
    case ElemType::kDouble: return Binary<double>(fn, x, y, z, shape, n, s);
    case ElemType::kHalf: return Binary<__half>(fn, x, y, z, shape, n, s);
    case ElemType::kBFloat16: return Binary<__nv_bfloat16>(fn, x, y, z, shape, n, s);
    case ElemType::kInt64: return Binary<int64_t>(fn, x, y, z, shape, n, s);
    case ElemType::kBool:
      if (fn != BinaryFn::kEqual && fn != BinaryFn::kNotEqual) return cudaErrorInvalidValue;
      return Binary<bool>(fn, x, y, z, shape, n, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchCast(ElemType src, ElemType dst, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (src) {
    case ElemType::kFloat: return CastFrom<float>(dst, x, y, n, s);
    case ElemType::kDouble: return CastFrom<double>(dst, x, y, n, s);
    case ElemType::kHalf: return CastFrom<__half>(dst, x, y, n, s);
    case ElemType::kBFloat16: return CastFrom<__nv_bfloat16>(dst, x, y, n, s);
    case ElemType::kInt32: return CastFrom<int32_t>(dst, x, y, n, s);
    case ElemType::kInt64: return CastFrom<int64_t>(dst, x, y, n, s);
    case ElemType::kBool: return CastFrom<bool>(dst, x, y, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchFill(int elem_bytes, const void* value, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: FillKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(value), static_cast<uint8_t*>(out), n); break;
    case 2: FillKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(value), static_cast<uint16_t*>(out), n); break;
    case 4: FillKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint32_t*>(value), static_cast<uint32_t*>(out), n); break;
    case 8: FillKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint64_t*>(value), static_cast<uint64_t*>(out), n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchBroadcastCopy(int elem_bytes, const void* x, void* out, const StridedShape& shape,
                                int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: BroadcastCopyKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), shape, n); break;
    case 2: BroadcastCopyKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), shape, n); break;
    case 4: BroadcastCopyKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), shape, n); break;
    case 8: BroadcastCopyKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(out), shape, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchMatrixBandPart(int elem_bytes, const void* x, void* out, int64_t n_total, int64_t m, int64_t n,
                                 int64_t lower, int64_t upper, cudaStream_t s) {
  if (n_total == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: BandPartKernel<<<Blocks(n_total), kThreads, 0, s>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), n_total, m, n, lower, upper); break;
    case 2: BandPartKernel<<<Blocks(n_total), kThreads, 0, s>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), n_total, m, n, lower, upper); break;
    case 4: BandPartKernel<<<Blocks(n_total), kThreads, 0, s>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), n_total, m, n, lower, upper); break;
    case 8: BandPartKernel<<<Blocks(n_total), kThreads, 0, s>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(out), n_total, m, n, lower, upper); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCumulative(ElemType t, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                             bool exclusive, bool reverse, bool prod, cudaStream_t s) {
  if (outer * n * inner == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Cumulative<float>(x, out, outer, n, inner, exclusive, reverse, prod, s);
    case ElemType::kDouble: return Cumulative<double>(x, out, outer, n, inner, exclusive, reverse, prod, s);
    case ElemType::kHalf: return Cumulative<__half>(x, out, outer, n, inner, exclusive, reverse, prod, s);
    case ElemType::kBFloat16: return Cumulative<__nv_bfloat16>(x, out, outer, n, inner, exclusive, reverse, prod, s);
    case ElemType::kInt64: return Cumulative<int64_t>(x, out, outer, n, inner, exclusive, reverse, prod, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchStridedScatter(int elem_bytes, const void* x, void* out, const StridedShape& shape, int64_t n,
                                 cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: StridedScatterKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), shape, n); break;
    case 2: StridedScatterKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), shape, n); break;
    case 4: StridedScatterKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), shape, n); break;
    case 8: StridedScatterKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(out), shape, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace strata
