// Reductions: a [rows, cols] matrix reduced over its rows (BiasAddGrad, batch
// sums and means) has a column kernel (ReduceColumns below); elsewhere, where
// the innermost kept dim is contiguous in x, one thread per output walks
// the reduced elements and neighbouring threads read neighbouring addresses;
// otherwise (reducing over the last dim) one warp per output strides over the
// reduced elements and combines with shuffles. Softmax and cross-entropy use
// one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "kernels/gpu/reduce_gpu.h"

namespace strata {
namespace gpu {
namespace {

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

template <typename A> __device__ __forceinline__ A Identity(ReduceFn fn) {
  if constexpr (std::is_floating_point<A>::value) {
    if (fn == ReduceFn::kMax) return -INFINITY;
    if (fn == ReduceFn::kMin) return INFINITY;
  } else {
    if (fn == ReduceFn::kMax) return INT64_MIN;
    if (fn == ReduceFn::kMin) return INT64_MAX;
  }
  if (fn == ReduceFn::kProd) return A(1);
  return A(0);
}

template <typename A> __device__ __forceinline__ A Combine(ReduceFn fn, A a, A b) {
  if (fn == ReduceFn::kMax) return a > b ? a : b;
  if (fn == ReduceFn::kMin) return a < b ? a : b;
  if (fn == ReduceFn::kProd) return a * b;
  return a + b;
}

// An empty reduction gives TensorFlow's values: the type's lowest (highest)
// finite value for Max (Min), 0 for Sum, 1 for Prod, NaN for a floating Mean.
template <typename A> __device__ __forceinline__ A Finish(ReduceFn fn, A a, int64_t count) {
  if (count == 0 && fn == ReduceFn::kMax) return std::numeric_limits<A>::lowest();
  if (count == 0 && fn == ReduceFn::kMin) return std::numeric_limits<A>::max();
  if (fn == ReduceFn::kMean) return a / static_cast<A>(count);
  return a;
}

__device__ __forceinline__ int64_t Offset(int rank, const int64_t* dims, const int64_t* strides, int64_t i) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

template <typename T>
__global__ void ReducePerThread(ReduceFn fn, const T* x, T* out, ReduceShape s) {
  using A = typename Acc<T>::type;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < s.num_outputs;
       o += int64_t{blockDim.x} * gridDim.x) {
    const T* base = x + Offset(s.kept_rank, s.kept_dims, s.kept_strides, o);
    A acc = Identity<A>(fn);
    for (int64_t r = 0; r < s.num_reduced; ++r) {
      acc = Combine(fn, acc, Load(base[Offset(s.reduced_rank, s.reduced_dims, s.reduced_strides, r)]));
    }
    out[o] = Store<T>(Finish(fn, acc, s.num_reduced));
  }
}

template <typename A> __device__ __forceinline__ A WarpCombine(ReduceFn fn, A v) {
  for (int m = 16; m > 0; m /= 2) v = Combine(fn, v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

template <typename T>
__global__ void ReducePerWarp(ReduceFn fn, const T* x, T* out, ReduceShape s) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{blockDim.x} / 32 * gridDim.x;
  for (int64_t o = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; o < s.num_outputs; o += warps) {
    const T* base = x + Offset(s.kept_rank, s.kept_dims, s.kept_strides, o);
    A acc = Identity<A>(fn);
    for (int64_t r = lane; r < s.num_reduced; r += 32) {
      acc = Combine(fn, acc, Load(base[Offset(s.reduced_rank, s.reduced_dims, s.reduced_strides, r)]));
    }
    acc = WarpCombine(fn, acc);
    if (lane == 0) out[o] = Store<T>(Finish(fn, acc, s.num_reduced));
  }
}

// x is [rows, cols] row-major, reduced over rows (BiasAddGrad, a batch sum
// or mean): a block of 32 x kColumnLanes threads per 32 columns; each thread
// combines every kColumnLanes-th row of its column (neighbouring threads
// read neighbouring addresses), then lane 0 combines the lanes' partials in
// a fixed order, so the result does not depend on timing. One thread per
// column walking every row would wait for each of its loads in turn.
constexpr int kColumnLanes = 32;

template <typename T>
__global__ void ReduceColumns(ReduceFn fn, const T* x, T* out, int64_t rows, int64_t cols) {
  using A = typename Acc<T>::type;
  __shared__ A partial[kColumnLanes][33];
  const int64_t c = blockIdx.x * int64_t{32} + threadIdx.x;
  A acc = Identity<A>(fn);
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kColumnLanes) acc = Combine(fn, acc, Load(x[r * cols + c]));
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    A total = partial[0][threadIdx.x];
    for (int l = 1; l < kColumnLanes; ++l) total = Combine(fn, total, partial[l][threadIdx.x]);
    out[c] = Store<T>(Finish(fn, total, rows));
  }
}

template <typename T, typename Index>
__global__ void ArgMaxKernel(const T* x, Index* out, ReduceShape s) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < s.num_outputs;
       o += int64_t{blockDim.x} * gridDim.x) {
    const T* base = x + Offset(s.kept_rank, s.kept_dims, s.kept_strides, o);
    const int64_t stride = s.reduced_strides[0];
    auto best = Load(base[0]);
    int64_t arg = 0;
    for (int64_t r = 1; r < s.num_reduced; ++r) {
      const auto v = Load(base[r * stride]);
      if (v > best) {
        best = v;
        arg = r;
      }
    }
    out[o] = static_cast<Index>(arg);
  }
}

constexpr int kRowThreads = 256;

// Block-wide combine through shared memory; every thread gets the result.
template <typename A>
__device__ A BlockCombine(ReduceFn fn, A v, A* scratch) {
  v = WarpCombine(fn, v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < blockDim.x / 32 ? scratch[lane] : Identity<A>(fn);
    w = WarpCombine(fn, w);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  const A r = scratch[32];
  __syncthreads();
  return r;
}

template <typename T>
__global__ void SoftmaxKernel(const T* x, T* y, int64_t cols, bool log) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[33];
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  A m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = max(m, Load(xr[c]));
  m = BlockCombine(ReduceFn::kMax, m, scratch);
  A sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(Load(xr[c]) - m);
  sum = BlockCombine(ReduceFn::kSum, sum, scratch);
  // Every read of xr is done (BlockCombine synchronizes), so y may alias x.
  const A log_sum = ::log(sum);
  const A inv = A(1) / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A v = Load(xr[c]) - m;
    yr[c] = Store<T>(log ? v - log_sum : exp(v) * inv);
  }
}

template <typename T, typename Label>
__global__ void SparseXentKernel(const T* x, const Label* labels, T* loss, T* bp, int64_t cols) {
  __shared__ T scratch[33];
  const T* xr = x + blockIdx.x * cols;
  T* br = bp + blockIdx.x * cols;
  const int64_t label = static_cast<int64_t>(labels[blockIdx.x]);
  const bool valid = label >= 0 && label < cols;
  T m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = max(m, xr[c]);
  m = BlockCombine(ReduceFn::kMax, m, scratch);
  T sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(xr[c] - m);
  sum = BlockCombine(ReduceFn::kSum, sum, scratch);
  const T label_logit = valid ? xr[label] - m : T(NAN);
  __syncthreads();  // label_logit is read by every thread before br overwrites x
  const T inv = T(1) / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const T p = exp(xr[c] - m) * inv;
    br[c] = valid ? p - (c == label ? T(1) : T(0)) : T(NAN);
  }
  if (threadIdx.x == 0) loss[blockIdx.x] = ::log(sum) - label_logit;
}

inline int Blocks(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

template <typename T>
cudaError_t Reduce(ReduceFn fn, const void* x, void* out, const ReduceShape& s, cudaStream_t stream) {
  const T* in = static_cast<const T*>(x);
  T* o = static_cast<T*>(out);
  const bool inner_contiguous = s.kept_rank > 0 && s.kept_strides[s.kept_rank - 1] == 1;
  const bool columns = s.kept_rank == 1 && s.reduced_rank == 1 && s.kept_strides[0] == 1 &&
                       s.reduced_strides[0] == s.kept_dims[0];
  if (columns && s.num_outputs > 0 && s.num_reduced >= kColumnLanes) {
    const dim3 threads(32, kColumnLanes);
    const int64_t blocks = (s.num_outputs + 31) / 32;
    if (blocks > 2147483647) return cudaErrorInvalidValue;
    ReduceColumns<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(fn, in, o, s.num_reduced,
                                                                            s.num_outputs);
  } else if (inner_contiguous || s.num_reduced < 64) {
    ReducePerThread<T><<<Blocks(s.num_outputs, 256), 256, 0, stream>>>(fn, in, o, s);
  } else {
    ReducePerWarp<T><<<Blocks(s.num_outputs * 32, 256), 256, 0, stream>>>(fn, in, o, s);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t ArgMax(const void* x, void* out, bool out_int64, const ReduceShape& s, cudaStream_t stream) {
  const T* in = static_cast<const T*>(x);
  if (out_int64) {
    ArgMaxKernel<<<Blocks(s.num_outputs, 256), 256, 0, stream>>>(in, static_cast<int64_t*>(out), s);
  } else {
    ArgMaxKernel<<<Blocks(s.num_outputs, 256), 256, 0, stream>>>(in, static_cast<int32_t*>(out), s);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t Softmax(const void* x, void* y, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  SoftmaxKernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                             static_cast<T*>(y), cols, log);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Xent(const void* x, const void* labels, bool labels_int64, void* loss, void* bp, int64_t rows,
                 int64_t cols, cudaStream_t stream) {
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows);
  if (labels_int64) {
    SparseXentKernel<<<grid, kRowThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const int64_t*>(labels),
                                                       static_cast<T*>(loss), static_cast<T*>(bp), cols);
  } else {
    SparseXentKernel<<<grid, kRowThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const int32_t*>(labels),
                                                       static_cast<T*>(loss), static_cast<T*>(bp), cols);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchReduce(ReduceFn fn, ElemType t, const void* x, void* out, const ReduceShape& s,
                         cudaStream_t stream) {
  if (s.num_outputs == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Reduce<float>(fn, x, out, s, stream);
    case ElemType::kDouble: return Reduce<double>(fn, x, out, s, stream);
    case ElemType::kHalf: return Reduce<__half>(fn, x, out, s, stream);
    case ElemType::kBFloat16: return Reduce<__nv_bfloat16>(fn, x, out, s, stream);
    case ElemType::kInt64: return Reduce<int64_t>(fn, x, out, s, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchArgMax(ElemType t, const void* x, void* out, bool out_int64, const ReduceShape& s,
                         cudaStream_t stream) {
  if (s.num_outputs == 0) return cudaSuccess;
  if (s.num_reduced < 1 || s.reduced_rank != 1) return cudaErrorInvalidValue;
  switch (t) {
    case ElemType::kFloat: return ArgMax<float>(x, out, out_int64, s, stream);
    case ElemType::kDouble: return ArgMax<double>(x, out, out_int64, s, stream);
    case ElemType::kHalf: return ArgMax<__half>(x, out, out_int64, s, stream);
    case ElemType::kBFloat16: return ArgMax<__nv_bfloat16>(x, out, out_int64, s, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchSoftmax(ElemType t, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Softmax<float>(x, y, rows, cols, log, stream);
    case ElemType::kDouble: return Softmax<double>(x, y, rows, cols, log, stream);
    case ElemType::kHalf: return Softmax<__half>(x, y, rows, cols, log, stream);
    case ElemType::kBFloat16: return Softmax<__nv_bfloat16>(x, y, rows, cols, log, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchSparseXent(ElemType t, const void* x, const void* labels, bool labels_int64, void* loss,
                             void* backprop, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat: return Xent<float>(x, labels, labels_int64, loss, backprop, rows, cols, stream);
    case ElemType::kDouble: return Xent<double>(x, labels, labels_int64, loss, backprop, rows, cols, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpu
}  // namespace strata
