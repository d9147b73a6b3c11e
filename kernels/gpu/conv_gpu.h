// Launchers for the convolution and max-pooling GPU kernels (conv_gpu.cu):
// im2col / col2im for convolutions computed as cuBLAS products (the glue in
// conv_kernels.cc), and direct max pooling and its gradient. NHWC layouts,
// filters [rows, cols, in_depth, out_depth]. Conventions as in cwise_gpu.h.
//
//   LaunchIm2Col(ElemType::kFloat, input, col, geom, /*first_image=*/0, /*images=*/n, stream);
//   // col [images*out_rows*out_cols, filter_rows*filter_cols*in_depth]
//
// Thread-safety: reentrant. Ownership: pointers borrowed until the stream
// reaches the kernel.
#ifndef STRATA_KERNELS_GPU_CONV_GPU_H_
#define STRATA_KERNELS_GPU_CONV_GPU_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpu/elem_type.h"

namespace strata {
namespace gpu {

struct ConvGeom {
  int64_t batch, in_rows, in_cols, in_depth;
  int64_t filter_rows, filter_cols, out_depth;
  int64_t stride_rows, stride_cols, dilation_rows, dilation_cols;
  int64_t out_rows, out_cols, pad_top, pad_left;
};

// col rows for images [first, first + images): taps outside the input are 0.
// float and double.
cudaError_t LaunchIm2Col(ElemType t, const void* input, void* col, const ConvGeom& g, int64_t first,
                         int64_t images, cudaStream_t stream);

// The input gradient of images [first, first + images) from their col
// gradient: each input element sums the col entries that read it (a gather,
// so no atomics and a deterministic order). float and double.
cudaError_t LaunchCol2Im(ElemType t, const void* col, void* input_grad, const ConvGeom& g, int64_t first,
                         int64_t images, cudaStream_t stream);

struct PoolGeom {
  int64_t batch, in_rows, in_cols, depth;
  int64_t window_rows, window_cols, stride_rows, stride_cols;
  int64_t out_rows, out_cols, pad_top, pad_left;
};

// Max over each window's in-range taps (the type's lowest value for a window
// with none). float, double, half, bfloat16.
cudaError_t LaunchMaxPool(ElemType t, const void* input, void* output, const PoolGeom& g, cudaStream_t stream);

// Input gradient: each window's gradient goes to its first maximum in
// row-major window order (TensorFlow's rule for ties); computed per input
// element (a gather). float, double, half, bfloat16.
cudaError_t LaunchMaxPoolGrad(ElemType t, const void* input, const void* grad, void* input_grad,
                              const PoolGeom& g, cudaStream_t stream);

// The mean of each window's in-range taps; its gradient spreads each grad
// entry evenly over them (per input element, a gather). float, double,
// half, bfloat16 (accumulating in float).
cudaError_t LaunchAvgPool(ElemType t, const void* input, void* output, const PoolGeom& g, cudaStream_t stream);
cudaError_t LaunchAvgPoolGrad(ElemType t, const void* grad, void* input_grad, const PoolGeom& g,
                              cudaStream_t stream);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_CONV_GPU_H_
