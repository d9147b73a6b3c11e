// GPU kernels for MaxPool, MaxPoolGrad, AvgPool and AvgPoolGrad (NHWC,
// SAME/VALID padding); attrs
// and geometry are kernels/conv_geometry.h's, shared with the CPU kernels,
// the launchers are in conv_gpu.cu. Padded positions never win the max or
// count in a mean, as on the CPU.
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/nn_ops.h"
#include "kernels/conv_geometry.h"
#include "kernels/gpu/conv_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

// The shared geometry as the launchers' plain struct.
absl::StatusOr<PoolGeom> Geometry(const PoolAttrsParsed& a, const TensorShape& in) {
  STRATA_ASSIGN_OR_RETURN(PoolGeometry g, ComputePoolGeometry(a, in));
  return PoolGeom{g.batch,       g.in_rows,     g.in_cols,     g.depth,    g.window_rows, g.window_cols,
                  g.stride_rows, g.stride_cols, g.out_rows,    g.out_cols, g.pad_top,     g.pad_left};
}

// A pooling kernel's attrs, parsed once; every pooling kernel is recordable.
class PoolKernel : public OpKernel {
 public:
  explicit PoolKernel(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParsePoolKernelAttrs(c, "GPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsCaptureSafe() const override { return true; }

 protected:
  PoolAttrsParsed attrs_;
};

class MaxPoolOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(const PoolGeom g, Geometry(attrs_, input.shape()));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(input.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.batch, g.out_rows, g.out_cols, g.depth}, &out));
    return CudaStatus(LaunchMaxPool(t, input.raw_data(), out->raw_data(), g, stream), "MaxPool");
  }
};

class MaxPoolGradOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    const Tensor& orig_out = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(const PoolGeom g, Geometry(attrs_, input.shape()));
    const TensorShape pooled{g.batch, g.out_rows, g.out_cols, g.depth};
    if (orig_out.shape() != pooled || grad.shape() != pooled) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MaxPoolGrad: orig_output ", orig_out.shape().DebugString(), " and grad ", grad.shape().DebugString(),
          " must have the pooled shape ", pooled.DebugString(), " of orig_input ", input.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(input.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* dx;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, input.shape(), &dx));
    return CudaStatus(LaunchMaxPoolGrad(t, input.raw_data(), grad.raw_data(), dx->raw_data(), g, stream),
                      "MaxPoolGrad");
  }
};

class AvgPoolOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(const PoolGeom g, Geometry(attrs_, input.shape()));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(input.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.batch, g.out_rows, g.out_cols, g.depth}, &out));
    return CudaStatus(LaunchAvgPool(t, input.raw_data(), out->raw_data(), g, stream), "AvgPool");
  }
};

// orig_input_shape is int32: host memory, read directly.
class AvgPoolGradOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(const TensorShape in_shape, ShapeFromSizes(ctx.input(0), "AvgPoolGrad orig_input_shape"));
    const Tensor& grad = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const PoolGeom g, Geometry(attrs_, in_shape));
    const TensorShape pooled{g.batch, g.out_rows, g.out_cols, g.depth};
    if (grad.shape() != pooled) {
      return absl::InvalidArgumentError(absl::StrCat("AvgPoolGrad: grad ", grad.shape().DebugString(),
                                                     " must have the pooled shape ", pooled.DebugString(),
                                                     " of orig_input_shape ", in_shape.DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(grad.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* dx;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, in_shape, &dx));
    return CudaStatus(LaunchAvgPoolGrad(t, grad.raw_data(), dx->raw_data(), g, stream), "AvgPoolGrad");
  }
};

#define REGISTER(op, dt, cls) STRATA_REGISTER_KERNEL(KernelBuilder(op).Device(kDeviceGpu).TypeConstraint("T", dt), cls)
REGISTER("MaxPool", DT_FLOAT, MaxPoolOp);
REGISTER("MaxPool", DT_DOUBLE, MaxPoolOp);
REGISTER("MaxPool", DT_HALF, MaxPoolOp);
REGISTER("MaxPool", DT_BFLOAT16, MaxPoolOp);
REGISTER("MaxPoolGrad", DT_FLOAT, MaxPoolGradOp);
REGISTER("MaxPoolGrad", DT_DOUBLE, MaxPoolGradOp);
REGISTER("MaxPoolGrad", DT_HALF, MaxPoolGradOp);
REGISTER("MaxPoolGrad", DT_BFLOAT16, MaxPoolGradOp);
REGISTER("AvgPool", DT_FLOAT, AvgPoolOp);
REGISTER("AvgPool", DT_DOUBLE, AvgPoolOp);
REGISTER("AvgPool", DT_HALF, AvgPoolOp);
REGISTER("AvgPool", DT_BFLOAT16, AvgPoolOp);
REGISTER("AvgPoolGrad", DT_FLOAT, AvgPoolGradOp);
REGISTER("AvgPoolGrad", DT_DOUBLE, AvgPoolGradOp);
REGISTER("AvgPoolGrad", DT_HALF, AvgPoolGradOp);
REGISTER("AvgPoolGrad", DT_BFLOAT16, AvgPoolGradOp);
#undef REGISTER

}  // namespace
}  // namespace gpu
}  // namespace strata
