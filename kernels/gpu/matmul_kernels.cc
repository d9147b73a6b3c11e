// GPU MatMul through cuBLAS (blas.h): float, double, half and bfloat16, with
// the transpose attrs passed to cuBLAS rather than materialized.
#include "absl/strings/str_cat.h"
#include "base/status.h"
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
    if (a.dims() != 2 || b.dims() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("MatMul needs matrices, but a has shape ",
                                                     a.shape().DebugString(), " and b has shape ",
                                                     b.shape().DebugString()));
    }
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0);
    const int64_t k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t k2 = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    if (k != k2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Matrix size-incompatible: In[0]: ", a.shape().DebugString(), " (transpose_a=", transpose_a_,
          "), In[1]: ", b.shape().DebugString(), " (transpose_b=", transpose_b_, ")"));
    }
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
