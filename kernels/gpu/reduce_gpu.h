// Launchers for reductions, ArgMax, softmax and sparse softmax cross-entropy
// on the GPU (reduce_gpu.cu). Plain signatures; see cwise_gpu.h for the
// conventions (enqueue on `stream`, return the launch error, never
// synchronize).
//
//   ReduceShape r = ...;  // kept and reduced dims with their input strides
//   LaunchReduce(ReduceFn::kSum, ElemType::kFloat, x, out, r, stream);
//   LaunchSoftmax(ElemType::kFloat, logits, y, rows, cols, /*log=*/false, stream);
//
// Thread-safety: reentrant. Ownership: pointers borrowed until the stream
// reaches the kernel.
#ifndef STRATA_KERNELS_GPU_REDUCE_GPU_H_
#define STRATA_KERNELS_GPU_REDUCE_GPU_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpu/elem_type.h"

namespace strata {
namespace gpu {

enum class ReduceFn : int { kSum, kMean, kMax, kMin, kProd };

// out[o] = reduce over r of x[offset(o) + offset(r)]: `kept` dims (the
// output, row-major) and `reduced` dims, each with its stride in x. An empty
// reduction gives the identity (0; -inf for kMax, +inf for kMin; NaN for
// kMean's 0/0).
struct ReduceShape {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxDims] = {0}, kept_strides[kMaxDims] = {0};
  int64_t reduced_dims[kMaxDims] = {0}, reduced_strides[kMaxDims] = {0};
  int64_t num_outputs = 1, num_reduced = 1;
};

// float, double, half, bfloat16 (accumulating in float for the 16-bit
// types), int64.
cudaError_t LaunchReduce(ReduceFn fn, ElemType t, const void* x, void* out, const ReduceShape& shape,
                         cudaStream_t stream);

// Index (int32 or int64 per out_int64) of the first maximum over the one
// reduced dim; num_reduced must be >= 1. float, double, half, bfloat16.
cudaError_t LaunchArgMax(ElemType t, const void* x, void* out, bool out_int64, const ReduceShape& shape,
                         cudaStream_t stream);

// Softmax (or LogSoftmax) over the last dim of [rows, cols]; y may alias x.
// float, double, half, bfloat16.
cudaError_t LaunchSoftmax(ElemType t, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                          cudaStream_t stream);

// loss[r] = -log softmax(x[r])[label[r]], backprop = softmax(x) - onehot(label);
// backprop may alias x. Labels are device int32 or int64 (labels_int64); a
// label outside [0, cols) gives NaN in its row (checking would need a
// device-to-host round trip). float, double.
cudaError_t LaunchSparseXent(ElemType t, const void* x, const void* labels, bool labels_int64, void* loss,
                             void* backprop, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_REDUCE_GPU_H_
