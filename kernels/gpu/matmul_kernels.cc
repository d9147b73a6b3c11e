// GPU MatMul through cuBLAS (blas.h): float, double, half and bfloat16, with
// the transpose attrs passed to cuBLAS rather than materialized.
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/batch_matmul_plan.h"
#include "kernels/gpu/blas.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

class MatMulOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit MatMulOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_a", &transpose_a_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_b", &transpose_b_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const MatMulDims d, PlanMatMul(a.shape(), b.shape(), transpose_a_, transpose_b_));
    const int64_t m = d.m, n = d.n, k = d.k;
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{m, n}, &out));
    return Gemm(ctx, a.dtype(), transpose_a_, transpose_b_, m, n, k, a.raw_data(), a.dim_size(1), b.raw_data(),
                b.dim_size(1), out->raw_data(), /*accumulate=*/false);
  }

 private:
  bool transpose_a_ = false, transpose_b_ = false;
};

STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceGpu).TypeConstraint("T", DT_FLOAT), MatMulOp);
STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceGpu).TypeConstraint("T", DT_DOUBLE), MatMulOp);
STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceGpu).TypeConstraint("T", DT_HALF), MatMulOp);
STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceGpu).TypeConstraint("T", DT_BFLOAT16), MatMulOp);

}  // namespace
}  // namespace gpu
}  // namespace strata
