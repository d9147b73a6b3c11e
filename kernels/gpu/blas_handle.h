// A cuBLAS handle as Strata's GPU devices use it: bound to the device's
// compute stream, with a workspace of its own of the size NVIDIA's cuBLAS
// documentation recommends (cublasSetWorkspace: 32 MiB on Hopper and later,
// 4 MiB before). Without one, cuBLAS picks from fewer kernels (4096³ half
// and bfloat16 products ran at 0.58x and 0.63x of PyTorch's on an H200), and
// a handle's calls could not be captured into a CUDA graph.
//
//   BlasHandle blas;
//   STRATA_RETURN_IF_ERROR(blas.Init(ordinal, stream));
//   context.blas = blas.handle();
//
// Thread-safety: Init and the destructor on one thread; the handle is then
// used one call at a time on its stream. Ownership: owns the handle and the
// workspace (cudaMalloc'd, outside the device's allocator and its limit).
#ifndef STRATA_KERNELS_GPU_BLAS_HANDLE_H_
#define STRATA_KERNELS_GPU_BLAS_HANDLE_H_

#include <cstddef>

#include "absl/status/status.h"

namespace strata {
namespace gpu {

// The workspace cuBLAS recommends for a device of compute capability
// `compute_major`.x.
size_t RecommendedBlasWorkspaceBytes(int compute_major);

class BlasHandle {
 public:
  BlasHandle() = default;
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  // Creates the handle on GPU `ordinal` (made current), binds it to `stream`
  // (a cudaStream_t) and gives it its workspace. FailedPrecondition naming
  // the step and the CUDA or cuBLAS error.
  absl::Status Init(int ordinal, void* stream);

  void* handle() const { return handle_; }  // a cublasHandle_t
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  int ordinal_ = -1;
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_BLAS_HANDLE_H_
