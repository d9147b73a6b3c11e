// CudaStatus: the one place CUDA runtime and cuBLAS error codes become an
// absl::Status, with what was being done and the code's name.
//
//   STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)"));
//
// Thread-safety: pure functions. Ownership: none.
#ifndef STRATA_RUNTIME_GPU_CUDA_STATUS_H_
#define STRATA_RUNTIME_GPU_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace strata {

// OK for cudaSuccess; otherwise a Status whose code says what the caller can
// do (out of memory: ResourceExhausted; no usable device or driver:
// FailedPrecondition; anything else: Internal), naming `what`.
inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                       cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

inline absl::Status CublasStatus(cublasStatus_t st, absl::string_view what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", cublasGetStatusName(st), " (",
                                       cublasGetStatusString(st), ")");
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (st == CUBLAS_STATUS_NOT_INITIALIZED) return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

}  // namespace strata

#endif  // STRATA_RUNTIME_GPU_CUDA_STATUS_H_
