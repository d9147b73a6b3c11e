// Launchers for GatherV2 and UnsortedSegmentSum on the GPU (gather_gpu.cu),
// with plain signatures (device pointers, sizes, a stream) for the OpKernel
// glue (gather_kernels.cc).
//
//   LaunchGather(params, idx, /*int64=*/false, out, outer, n, m, inner_bytes, stream);
//
// Indices are in device memory. An index outside [0, n) (or a segment id
// outside [0, segments)) never reads or writes outside the tensors: a
// gathered row is zeros, a summed row is dropped, as TensorFlow's GPU
// kernels do (the glue checks host-memory indices first and reports them).
// Launchers enqueue on `stream`, return the launch error and never
// synchronize.
//
// Thread-safety: reentrant. Ownership: pointers are borrowed until the
// stream reaches the kernel.
#ifndef STRATA_KERNELS_GPU_GATHER_GPU_H_
#define STRATA_KERNELS_GPU_GATHER_GPU_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpu/elem_type.h"

namespace strata {
namespace gpu {

// out[o, i, :] = params[o, idx[i], :] for o < outer, i < m; params is
// [outer, n, inner] and a row is `row_bytes` bytes.
cudaError_t LaunchGather(const void* params, const void* indices, bool indices_int64, void* out,
                         int64_t outer, int64_t n, int64_t m, int64_t row_bytes, cudaStream_t s);

// out[segments, inner] = 0, then out[ids[r], :] += data[r, :] for r < rows
// (atomic adds: the order of additions, and so the rounding, may differ
// between runs). float, double, half, bfloat16.
cudaError_t LaunchUnsortedSegmentSum(ElemType t, const void* data, const void* ids, bool ids_int64,
                                     void* out, int64_t rows, int64_t inner, int64_t segments,
                                     cudaStream_t s);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_GATHER_GPU_H_
