// Runs a kernel built by strata_cuda_library on GPU 0 and reads the result
// back. Skips where the machine has no GPU (the CUDA build still links it).
#include <vector>

#include "gtest/gtest.h"
#include "third_party/cuda/smoke.h"

namespace strata {
namespace {

TEST(CudaSmokeTest, KernelScalesDeviceBuffer) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    GTEST_SKIP() << "no GPU: " << cudaGetErrorString(err);
  }
  const int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(LaunchScale(dev, n, 3.0f, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], 3.0f * i) << "element " << i;
}

}  // namespace
}  // namespace strata
