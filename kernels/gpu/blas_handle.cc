#include "kernels/gpu/blas_handle.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace strata {
namespace gpu {

size_t RecommendedBlasWorkspaceBytes(int compute_major) {
  return compute_major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

namespace {

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status Cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

}  // namespace

absl::Status BlasHandle::Init(int ordinal, void* stream) {
  if (handle_ != nullptr) return absl::FailedPreconditionError("BlasHandle::Init called twice");
  ordinal_ = ordinal;
  if (absl::Status s = Cuda(cudaSetDevice(ordinal), "cudaSetDevice"); !s.ok()) return s;
  int major = 0;
  if (absl::Status s = Cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal),
                            "cudaDeviceGetAttribute(compute capability)");
      !s.ok()) {
    return s;
  }
  cublasHandle_t h = nullptr;
  if (absl::Status s = Cublas(cublasCreate(&h), "cublasCreate"); !s.ok()) return s;
  handle_ = h;
  if (absl::Status s = Cublas(cublasSetStream(h, static_cast<cudaStream_t>(stream)), "cublasSetStream");
      !s.ok()) {
    return s;
  }
  // After cublasSetStream, which resets the handle's workspace to its
  // default one.
  const size_t bytes = RecommendedBlasWorkspaceBytes(major);
  if (absl::Status s = Cuda(cudaMalloc(&workspace_, bytes), "cudaMalloc (cuBLAS workspace)"); !s.ok()) {
    workspace_ = nullptr;
    return s;
  }
  workspace_bytes_ = bytes;
  return Cublas(cublasSetWorkspace(h, workspace_, bytes), "cublasSetWorkspace");
}

BlasHandle::~BlasHandle() {
  if (handle_ == nullptr && workspace_ == nullptr) return;
  cudaSetDevice(ordinal_);
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
  if (workspace_ != nullptr) cudaFree(workspace_);
}

}  // namespace gpu
}  // namespace strata
