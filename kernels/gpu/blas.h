// Row-major matrix products on cuBLAS for the GPU kernels (MatMul, and the
// convolutions' im2col products).
//
//   // c[m,n] = op(a) · op(b), a and b row-major as stored in Tensors
//   STRATA_RETURN_IF_ERROR(gpu::Gemm(ctx, DT_FLOAT, ta, tb, m, n, k, a, a_cols, b, b_cols, c,
//                                    /*accumulate=*/false));
//
// cuBLAS is column-major; a row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, which needs no copies. float computes in
// full fp32 (no TF32, so results match the CPU kernels closely); half and
// bfloat16 accumulate in fp32 (cublasGemmEx); double in fp64.
//
// Thread-safety: uses the device's handle, bound to its stream (one kernel
// at a time per stream, as the executor runs them). Ownership: none kept.
#ifndef STRATA_KERNELS_GPU_BLAS_H_
#define STRATA_KERNELS_GPU_BLAS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "graph/types.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {

// c = op(a)·op(b) (+ c when `accumulate`), op(a) [m,k], op(b) [k,n], c [m,n];
// a_cols and b_cols are the stored (row-major) widths of a and b. A k of 0
// gives zeros (or leaves c when accumulating). Internal naming the cuBLAS
// status on failure; InvalidArgument for a dtype cuBLAS is not used for.
absl::Status Gemm(const OpKernelContext& ctx, DataType dt, bool transpose_a, bool transpose_b, int64_t m,
                  int64_t n, int64_t k, const void* a, int64_t a_cols, const void* b, int64_t b_cols, void* c,
                  bool accumulate);

// `batch` products c_i = op(a_i)·op(b_i), a_i = a + i * stride_a elements
// (0: the same a for every i), likewise b; c_i = c + i * stride_c
// (cublasGemmStridedBatchedEx, one launch).
absl::Status GemmStridedBatched(const OpKernelContext& ctx, DataType dt, bool transpose_a, bool transpose_b,
                                int64_t m, int64_t n, int64_t k, const void* a, int64_t a_cols, int64_t stride_a,
                                const void* b, int64_t b_cols, int64_t stride_b, void* c, int64_t stride_c,
                                int64_t batch);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_BLAS_H_
