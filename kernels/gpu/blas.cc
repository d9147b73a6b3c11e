#include "kernels/gpu/blas.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/gpu_util.h"

namespace strata {
namespace gpu {

namespace {

// The element and compute types cuBLAS uses for `dt`: float in full fp32
// (no TF32), half and bfloat16 accumulating in fp32, double in fp64.
struct BlasTypes {
  cudaDataType_t type;
  cublasComputeType_t compute;
};

absl::StatusOr<BlasTypes> TypesOf(DataType dt) {
  switch (dt) {
    case DT_FLOAT: return BlasTypes{CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DT_HALF: return BlasTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DT_BFLOAT16: return BlasTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case DT_DOUBLE: return BlasTypes{CUDA_R_64F, CUBLAS_COMPUTE_64F};
    default:
      return absl::InvalidArgumentError(absl::StrCat("no cuBLAS product for dtype ", DataTypeString(dt)));
  }
}

}  // namespace

absl::Status Gemm(const OpKernelContext& ctx, DataType dt, bool transpose_a, bool transpose_b, int64_t m,
                  int64_t n, int64_t k, const void* a, int64_t a_cols, const void* b, int64_t b_cols, void* c,
                  bool accumulate) {
  if (m == 0 || n == 0) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(const GpuDeviceContext* g, Context(ctx));
  if (k == 0) {
    if (accumulate) return absl::OkStatus();
    return CudaStatus(cudaMemsetAsync(c, 0, m * n * DataTypeSize(dt), static_cast<cudaStream_t>(g->stream)),
                      "MatMul (k = 0)");
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || a_cols > kMax || b_cols > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("matrix product [", m, ",", k, "]x[", k, ",", n, "] exceeds cuBLAS's int dimensions"));
  }
  if (g->blas == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ctx.device()->name(), " has no cuBLAS handle"));
  }
  cublasHandle_t h = static_cast<cublasHandle_t>(g->blas);
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  STRATA_ASSIGN_OR_RETURN(const BlasTypes bt, TypesOf(dt));
  const cudaDataType_t type = bt.type;
  const cublasComputeType_t compute = bt.compute;
  const float alpha_f = 1.0f, beta_f = accumulate ? 1.0f : 0.0f;
  const double alpha_d = 1.0, beta_d = accumulate ? 1.0 : 0.0;
  const void* alpha = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta_d) : &beta_f;
  // Column-major Cᵀ[n,m] = op(B)ᵀ · op(A)ᵀ: B first.
  const cublasStatus_t st =
      cublasGemmEx(h, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, b, type,
                   static_cast<int>(b_cols), a, type, static_cast<int>(a_cols), beta, c, type, static_cast<int>(n),
                   compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmEx [", m, ",", k, "]x[", k, ",", n, "] ",
                                            DataTypeString(dt), ": ", cublasGetStatusName(st), ": ",
                                            cublasGetStatusString(st)));
  }
  return absl::OkStatus();
}

absl::Status GemmStridedBatched(const OpKernelContext& ctx, DataType dt, bool transpose_a, bool transpose_b,
                                int64_t m, int64_t n, int64_t k, const void* a, int64_t a_cols, int64_t stride_a,
                                const void* b, int64_t b_cols, int64_t stride_b, void* c, int64_t stride_c,
                                int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(const GpuDeviceContext* g, Context(ctx));
  if (k == 0) {
    return CudaStatus(cudaMemsetAsync(c, 0, batch * m * n * DataTypeSize(dt), static_cast<cudaStream_t>(g->stream)),
                      "BatchMatMulV2 (k = 0)");
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || a_cols > kMax || b_cols > kMax || batch > kMax) {
    return absl::InvalidArgumentError(absl::StrCat("batched product ", batch, " x [", m, ",", k, "]x[", k, ",", n,
                                                   "] exceeds cuBLAS's int dimensions"));
  }
  if (g->blas == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ctx.device()->name(), " has no cuBLAS handle"));
  }
  cublasHandle_t h = static_cast<cublasHandle_t>(g->blas);
  STRATA_ASSIGN_OR_RETURN(const BlasTypes bt, TypesOf(dt));
  const cudaDataType_t type = bt.type;
  const cublasComputeType_t compute = bt.compute;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta_d) : &beta_f;
  // Column-major Cᵀ = op(B)ᵀ · op(A)ᵀ per batch, as Gemm.
  const cublasStatus_t st = cublasGemmStridedBatchedEx(
      h, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), alpha, b, type, static_cast<int>(b_cols), stride_b, a, type,
      static_cast<int>(a_cols), stride_a, beta, c, type, static_cast<int>(n), stride_c, static_cast<int>(batch),
      compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmStridedBatchedEx ", batch, " x [", m, ",", k, "]x[", k, ",", n,
                                            "] ", DataTypeString(dt), ": ", cublasGetStatusName(st), ": ",
                                            cublasGetStatusString(st)));
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace strata
