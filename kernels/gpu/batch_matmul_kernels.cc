// BatchMatMulV2 on the GPU through cuBLAS (blas.h): one strided batched
// product when each operand is either one matrix for all batches or one per
// batch (the usual attention shapes), otherwise one product per output batch
// (batch dims broadcast partially, e.g. [2,1] against [1,3]).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/batch_matmul_plan.h"
#include "kernels/gpu/blas.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

class BatchMatMulOp : public OpKernel {
 public:
  explicit BatchMatMulOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("adj_x", &adj_x_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("adj_y", &adj_y_));
  }
  bool IsCaptureSafe() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const BatchMatMulPlan p, PlanBatchMatMul(x.shape(), y.shape(), adj_x_, adj_y_));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, p.out, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    const int64_t x_cols = x.dim_size(x.dims() - 1), y_cols = y.dim_size(y.dims() - 1);
    const int64_t x_size = x.dim_size(x.dims() - 2) * x_cols, y_size = y.dim_size(y.dims() - 2) * y_cols;
    const int64_t z_size = p.m * p.n;
    if (p.strided) {
      return GemmStridedBatched(ctx, x.dtype(), adj_x_, adj_y_, p.m, p.n, p.k, x.raw_data(), x_cols,
                                p.x_stride * x_size, y.raw_data(), y_cols, p.y_stride * y_size, out->raw_data(),
                                z_size, p.batch);
    }
    const size_t esize = DataTypeSize(x.dtype());
    const char* xp = static_cast<const char*>(x.raw_data());
    const char* yp = static_cast<const char*>(y.raw_data());
    char* zp = static_cast<char*>(out->raw_data());
    for (int64_t b = 0; b < p.batch; ++b) {
      STRATA_RETURN_IF_ERROR(Gemm(ctx, x.dtype(), adj_x_, adj_y_, p.m, p.n, p.k, xp + p.x_batch[b] * x_size * esize,
                                  x_cols, yp + p.y_batch[b] * y_size * esize, y_cols, zp + b * z_size * esize,
                                  /*accumulate=*/false));
    }
    return absl::OkStatus();
  }

 private:
  bool adj_x_ = false;
  bool adj_y_ = false;
};

#define REGISTER_BMM(T)                                                                           \
  STRATA_REGISTER_KERNEL(KernelBuilder("BatchMatMulV2").Device(kDeviceGpu).TypeConstraint("T", T), \
                         BatchMatMulOp)
REGISTER_BMM(DT_FLOAT);
REGISTER_BMM(DT_DOUBLE);
REGISTER_BMM(DT_HALF);
REGISTER_BMM(DT_BFLOAT16);
#undef REGISTER_BMM

}  // namespace
}  // namespace gpu
}  // namespace strata
