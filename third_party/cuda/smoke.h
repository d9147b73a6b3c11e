// A kernel that scales a device buffer in place: the smallest proof that the
// CUDA build (nvcc objects linked into a cc target) works end to end.
#ifndef STRATA_THIRD_PARTY_CUDA_SMOKE_H_
#define STRATA_THIRD_PARTY_CUDA_SMOKE_H_

#include <cuda_runtime.h>

namespace strata {

// Enqueues x[i] *= factor for i < n on `stream`.
cudaError_t LaunchScale(float* x, int n, float factor, cudaStream_t stream);

}  // namespace strata

#endif  // STRATA_THIRD_PARTY_CUDA_SMOKE_H_
