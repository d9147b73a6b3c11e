// im2col / col2im and max pooling. One thread per output element of each
// launch, in grid-stride loops; the depth dim is innermost, so neighbouring
// threads touch neighbouring addresses.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits>

#include "kernels/gpu/conv_gpu.h"

namespace strata {
namespace gpu {
namespace {

constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

template <typename T> __device__ __forceinline__ float ToF(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float ToF(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ double ToF(double v) { return v; }

template <typename T> __device__ __forceinline__ T Lowest() { return std::numeric_limits<T>::lowest(); }
template <> __device__ __forceinline__ __half Lowest() { return __ushort_as_half(0xfbff); }
template <> __device__ __forceinline__ __nv_bfloat16 Lowest() { return __ushort_as_bfloat16(0xff7f); }

template <typename T>
__global__ void Im2ColKernel(const T* in, T* col, ConvGeom g, int64_t first, int64_t images) {
  const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
  const int64_t n_total = images * g.out_rows * g.out_cols * k;
  GRID_LOOP(i, n_total) {
    int64_t r = i;
    const int64_t c = r % g.in_depth;
    r /= g.in_depth;
    const int64_t kw = r % g.filter_cols;
    r /= g.filter_cols;
    const int64_t kh = r % g.filter_rows;
    r /= g.filter_rows;
    const int64_t ow = r % g.out_cols;
    r /= g.out_cols;
    const int64_t oh = r % g.out_rows;
    const int64_t n = first + r / g.out_rows;
    const int64_t h = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
    const int64_t w = ow * g.stride_cols - g.pad_left + kw * g.dilation_cols;
    T v = T(0);
    if (h >= 0 && h < g.in_rows && w >= 0 && w < g.in_cols) {
      v = in[((n * g.in_rows + h) * g.in_cols + w) * g.in_depth + c];
    }
    col[i] = v;
  }
}

template <typename T>
__global__ void Col2ImKernel(const T* col, T* in_grad, ConvGeom g, int64_t first, int64_t images) {
  const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
  const int64_t n_total = images * g.in_rows * g.in_cols * g.in_depth;
  GRID_LOOP(i, n_total) {
    int64_t r = i;
    const int64_t c = r % g.in_depth;
    r /= g.in_depth;
    const int64_t w = r % g.in_cols;
    r /= g.in_cols;
    const int64_t h = r % g.in_rows;
    const int64_t n = r / g.in_rows;  // relative to `first`
    T sum = T(0);
    for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
      const int64_t hh = h + g.pad_top - kh * g.dilation_rows;
      if (hh < 0 || hh % g.stride_rows != 0) continue;
      const int64_t oh = hh / g.stride_rows;
      if (oh >= g.out_rows) continue;
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const int64_t ww = w + g.pad_left - kw * g.dilation_cols;
        if (ww < 0 || ww % g.stride_cols != 0) continue;
        const int64_t ow = ww / g.stride_cols;
        if (ow >= g.out_cols) continue;
        const int64_t row = (n * g.out_rows + oh) * g.out_cols + ow;
        sum += col[row * k + (kh * g.filter_cols + kw) * g.in_depth + c];
      }
    }
    in_grad[(first * g.in_rows * g.in_cols * g.in_depth) + i] = sum;
  }
}

__device__ __forceinline__ void Window(int64_t o, int64_t stride, int64_t pad, int64_t window, int64_t in,
                                       int64_t* b, int64_t* e) {
  const int64_t start = o * stride - pad;
  *b = start > 0 ? start : 0;
  *e = start + window < in ? start + window : in;
}

// (n, row, col, c) of flat index i of an NHWC [batch, rows, cols, depth] tensor.
__device__ __forceinline__ void NhwcCoords(int64_t i, int64_t rows, int64_t cols, int64_t depth, int64_t* n,
                                           int64_t* row, int64_t* col, int64_t* c) {
  *c = i % depth;
  i /= depth;
  *col = i % cols;
  i /= cols;
  *row = i % rows;
  *n = i / rows;
}

// The output positions [lo, hi] whose windows hold input position p:
// o * stride - pad <= p < o * stride - pad + window.
__device__ __forceinline__ void WindowsHolding(int64_t p, int64_t pad, int64_t window, int64_t stride, int64_t out,
                                               int64_t* lo, int64_t* hi) {
  const int64_t num = p + pad - window + 1;
  *lo = num <= 0 ? 0 : (num + stride - 1) / stride;
  *hi = min((p + pad) / stride, out - 1);
}

// The flat input index of the first maximum of window (n, oh, ow, c), or -1.
template <typename T>
__device__ int64_t ArgMaxOfWindow(const T* in, const PoolGeom& g, int64_t n, int64_t oh, int64_t ow, int64_t c) {
  int64_t h0, h1, w0, w1;
  Window(oh, g.stride_rows, g.pad_top, g.window_rows, g.in_rows, &h0, &h1);
  Window(ow, g.stride_cols, g.pad_left, g.window_cols, g.in_cols, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) return -1;
  int64_t arg = ((n * g.in_rows + h0) * g.in_cols + w0) * g.depth + c;
  auto best = ToF(in[arg]);
  for (int64_t h = h0; h < h1; ++h) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t idx = ((n * g.in_rows + h) * g.in_cols + w) * g.depth + c;
      const auto v = ToF(in[idx]);
      if (v > best) {
        best = v;
        arg = idx;
      }
    }
  }
  return arg;
}

template <typename T>
__global__ void MaxPoolKernel(const T* in, T* out, PoolGeom g) {
  const int64_t n_total = g.batch * g.out_rows * g.out_cols * g.depth;
  GRID_LOOP(i, n_total) {
    int64_t n, oh, ow, c;
    NhwcCoords(i, g.out_rows, g.out_cols, g.depth, &n, &oh, &ow, &c);
    const int64_t arg = ArgMaxOfWindow(in, g, n, oh, ow, c);
    out[i] = arg < 0 ? Lowest<T>() : in[arg];
  }
}

template <typename T>
__global__ void MaxPoolGradKernel(const T* in, const T* grad, T* in_grad, PoolGeom g) {
  const int64_t n_total = g.batch * g.in_rows * g.in_cols * g.depth;
  GRID_LOOP(i, n_total) {
    int64_t n, h, w, c;
    NhwcCoords(i, g.in_rows, g.in_cols, g.depth, &n, &h, &w, &c);
    int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    WindowsHolding(h, g.pad_top, g.window_rows, g.stride_rows, g.out_rows, &oh_lo, &oh_hi);
    WindowsHolding(w, g.pad_left, g.window_cols, g.stride_cols, g.out_cols, &ow_lo, &ow_hi);
    float sum = 0.0f;
    double dsum = 0.0;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        if (ArgMaxOfWindow(in, g, n, oh, ow, c) == i) {
          const T gv = grad[((n * g.out_rows + oh) * g.out_cols + ow) * g.depth + c];
          if constexpr (std::is_same<T, double>::value) {
            dsum += gv;
          } else {
            sum += ToF(gv);
          }
        }
      }
    }
    if constexpr (std::is_same<T, double>::value) {
      in_grad[i] = dsum;
    } else if constexpr (std::is_same<T, float>::value) {
      in_grad[i] = sum;
    } else if constexpr (std::is_same<T, __half>::value) {
      in_grad[i] = __float2half_rn(sum);
    } else {
      in_grad[i] = __float2bfloat16_rn(sum);
    }
  }
}

}  // namespace

cudaError_t LaunchIm2Col(ElemType t, const void* input, void* col, const ConvGeom& g, int64_t first,
                         int64_t images, cudaStream_t stream) {
  const int64_t n = images * g.out_rows * g.out_cols * g.filter_rows * g.filter_cols * g.in_depth;
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat:
      Im2ColKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const float*>(input), static_cast<float*>(col), g,
                                                        first, images);
      break;
    case ElemType::kDouble:
      Im2ColKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const double*>(input), static_cast<double*>(col),
                                                        g, first, images);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(ElemType t, const void* col, void* input_grad, const ConvGeom& g, int64_t first,
                         int64_t images, cudaStream_t stream) {
  const int64_t n = images * g.in_rows * g.in_cols * g.in_depth;
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ElemType::kFloat:
      Col2ImKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const float*>(col),
                                                        static_cast<float*>(input_grad), g, first, images);
      break;
    case ElemType::kDouble:
      Col2ImKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const double*>(col),
                                                        static_cast<double*>(input_grad), g, first, images);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// float accumulation for float/half/bfloat16, double for double.
template <typename T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };
template <typename T> __device__ __forceinline__ T FromAcc(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half FromAcc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 FromAcc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ double FromAccD(double v) { return v; }

template <typename T>
__global__ void AvgPoolKernel(const T* in, T* out, PoolGeom g) {
  using A = typename Acc<T>::type;
  const int64_t n_total = g.batch * g.out_rows * g.out_cols * g.depth;
  GRID_LOOP(i, n_total) {
    int64_t n, oh, ow, c;
    NhwcCoords(i, g.out_rows, g.out_cols, g.depth, &n, &oh, &ow, &c);
    int64_t h0, h1, w0, w1;
    Window(oh, g.stride_rows, g.pad_top, g.window_rows, g.in_rows, &h0, &h1);
    Window(ow, g.stride_cols, g.pad_left, g.window_cols, g.in_cols, &w0, &w1);
    A sum = 0;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) sum += ToF(in[((n * g.in_rows + h) * g.in_cols + w) * g.depth + c]);
    }
    const int64_t count = (h1 - h0) * (w1 - w0);
    const A mean = sum / static_cast<A>(count > 0 ? count : 1);
    if constexpr (std::is_same<T, double>::value) {
      out[i] = FromAccD(mean);
    } else {
      out[i] = FromAcc<T>(mean);
    }
  }
}

// Per input element: the sum over the windows that hold it of grad / the
// window's in-range tap count (a gather: no atomics).
template <typename T>
__global__ void AvgPoolGradKernel(const T* grad, T* in_grad, PoolGeom g) {
  using A = typename Acc<T>::type;
  const int64_t n_total = g.batch * g.in_rows * g.in_cols * g.depth;
  GRID_LOOP(i, n_total) {
    int64_t n, h, w, c;
    NhwcCoords(i, g.in_rows, g.in_cols, g.depth, &n, &h, &w, &c);
    int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    WindowsHolding(h, g.pad_top, g.window_rows, g.stride_rows, g.out_rows, &oh_lo, &oh_hi);
    WindowsHolding(w, g.pad_left, g.window_cols, g.stride_cols, g.out_cols, &ow_lo, &ow_hi);
    A sum = 0;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      int64_t h0, h1;
      Window(oh, g.stride_rows, g.pad_top, g.window_rows, g.in_rows, &h0, &h1);
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        int64_t w0, w1;
        Window(ow, g.stride_cols, g.pad_left, g.window_cols, g.in_cols, &w0, &w1);
        const A count = static_cast<A>((h1 - h0) * (w1 - w0));
        sum += ToF(grad[((n * g.out_rows + oh) * g.out_cols + ow) * g.depth + c]) / count;
      }
    }
    if constexpr (std::is_same<T, double>::value) {
      in_grad[i] = FromAccD(sum);
    } else {
      in_grad[i] = FromAcc<T>(sum);
    }
  }
}

template <typename T>
static cudaError_t AvgPool(const void* in, void* out, const PoolGeom& g, cudaStream_t stream) {
  const int64_t n = g.batch * g.out_rows * g.out_cols * g.depth;
  if (n == 0) return cudaSuccess;
  AvgPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out), g);
  return cudaGetLastError();
}

template <typename T>
static cudaError_t AvgPoolGrad(const void* grad, void* in_grad, const PoolGeom& g, cudaStream_t stream) {
  const int64_t n = g.batch * g.in_rows * g.in_cols * g.depth;
  if (n == 0) return cudaSuccess;
  AvgPoolGradKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(grad), static_cast<T*>(in_grad), g);
  return cudaGetLastError();
}

template <typename T>
static cudaError_t Pool(const void* in, void* out, const PoolGeom& g, cudaStream_t stream) {
  const int64_t n = g.batch * g.out_rows * g.out_cols * g.depth;
  if (n == 0) return cudaSuccess;
  MaxPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out), g);
  return cudaGetLastError();
}

template <typename T>
static cudaError_t PoolGrad(const void* in, const void* grad, void* in_grad, const PoolGeom& g,
                            cudaStream_t stream) {
  const int64_t n = g.batch * g.in_rows * g.in_cols * g.depth;
  if (n == 0) return cudaSuccess;
  MaxPoolGradKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<const T*>(grad),
                                                         static_cast<T*>(in_grad), g);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool(ElemType t, const void* input, void* output, const PoolGeom& g, cudaStream_t stream) {
  switch (t) {
    case ElemType::kFloat: return Pool<float>(input, output, g, stream);
    case ElemType::kDouble: return Pool<double>(input, output, g, stream);
    case ElemType::kHalf: return Pool<__half>(input, output, g, stream);
    case ElemType::kBFloat16: return Pool<__nv_bfloat16>(input, output, g, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchMaxPoolGrad(ElemType t, const void* input, const void* grad, void* input_grad,
                              const PoolGeom& g, cudaStream_t stream) {
  switch (t) {
    case ElemType::kFloat: return PoolGrad<float>(input, grad, input_grad, g, stream);
    case ElemType::kDouble: return PoolGrad<double>(input, grad, input_grad, g, stream);
    case ElemType::kHalf: return PoolGrad<__half>(input, grad, input_grad, g, stream);
    case ElemType::kBFloat16: return PoolGrad<__nv_bfloat16>(input, grad, input_grad, g, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchAvgPool(ElemType t, const void* input, void* output, const PoolGeom& g, cudaStream_t stream) {
  switch (t) {
    case ElemType::kFloat: return AvgPool<float>(input, output, g, stream);
    case ElemType::kDouble: return AvgPool<double>(input, output, g, stream);
    case ElemType::kHalf: return AvgPool<__half>(input, output, g, stream);
    case ElemType::kBFloat16: return AvgPool<__nv_bfloat16>(input, output, g, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchAvgPoolGrad(ElemType t, const void* grad, void* input_grad, const PoolGeom& g,
                              cudaStream_t stream) {
  switch (t) {
    case ElemType::kFloat: return AvgPoolGrad<float>(grad, input_grad, g, stream);
    case ElemType::kDouble: return AvgPoolGrad<double>(grad, input_grad, g, stream);
    case ElemType::kHalf: return AvgPoolGrad<__half>(grad, input_grad, g, stream);
    case ElemType::kBFloat16: return AvgPoolGrad<__nv_bfloat16>(grad, input_grad, g, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpu
}  // namespace strata
