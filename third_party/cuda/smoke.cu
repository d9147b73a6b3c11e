#include "third_party/cuda/smoke.h"

namespace strata {
namespace {

__global__ void ScaleKernel(float* x, int n, float factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

}  // namespace

cudaError_t LaunchScale(float* x, int n, float factor, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<(n + 255) / 256, 256, 0, stream>>>(x, n, factor);
  return cudaGetLastError();
}

}  // namespace strata
