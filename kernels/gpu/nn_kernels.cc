// GPU kernels of the nn family's elementwise ops: Relu, ReluGrad and BiasAdd
// (graph/ops/nn_ops.h; on the CPU, kernels/cpu/nn_kernels.cc), over the
// elementwise launchers of cwise_gpu.cu. Convolutions are conv_kernels.cc,
// pooling pooling_kernels.cc, softmax softmax_kernels.cc.
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/gpu/unary_op.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

// ReluGrad(gradients, features): same shapes, no broadcasting.
class ReluGradOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit ReluGradOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Tensor& f = ctx.input(1);
    if (g.shape() != f.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("ReluGrad: gradients ", g.shape().DebugString(),
                                                     " and features ", f.shape().DebugString(),
                                                     " must have the same shape"));
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(g.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, g.shape(), &out));
    StridedShape s;
    s.rank = 1;
    s.dims[0] = g.NumElements();
    s.x_strides[0] = s.y_strides[0] = 1;
    return CudaStatus(LaunchBinary(BinaryFn::kReluGrad, t, g.raw_data(), f.raw_data(), out->raw_data(), s,
                                   g.NumElements(), stream),
                      "ReluGrad");
  }
};

// BiasAdd(value, bias): bias over the channel dim (last for NHWC, 1 for NCHW).
class BiasAddOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit BiasAddOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, GetBiasDataFormat(c, &nchw_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& v = ctx.input(0);
    const Tensor& bias = ctx.input(1);
    const int min_rank = nchw_ ? 3 : 2;
    if (v.dims() < min_rank || bias.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("BiasAdd: value must have rank >= ", min_rank,
                                                     " and bias rank 1, got ", v.shape().DebugString(),
                                                     " and ", bias.shape().DebugString()));
    }
    const int cdim = nchw_ ? 1 : v.dims() - 1;
    const int64_t c = v.dim_size(cdim);
    if (bias.dim_size(0) != c) {
      return absl::InvalidArgumentError(absl::StrCat("BiasAdd: bias has ", bias.dim_size(0),
                                                     " entries but value ", v.shape().DebugString(),
                                                     " has ", c, " channels"));
    }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < cdim; ++d) outer *= v.dim_size(d);
    for (int d = cdim + 1; d < v.dims(); ++d) inner *= v.dim_size(d);
    StridedShape s;
    s.rank = 3;
    s.dims[0] = outer;
    s.dims[1] = c;
    s.dims[2] = inner;
    s.x_strides[0] = c * inner;
    s.x_strides[1] = inner;
    s.x_strides[2] = 1;
    s.y_strides[0] = 0;
    s.y_strides[1] = 1;
    s.y_strides[2] = 0;
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(v.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, v.shape(), &out));
    return CudaStatus(LaunchBinary(BinaryFn::kAdd, t, v.raw_data(), bias.raw_data(), out->raw_data(), s,
                                   v.NumElements(), stream),
                      "BiasAdd");
  }

 private:
  bool nchw_ = false;
};

#define REGISTER_GPU(op, dt, cls) \
  STRATA_REGISTER_KERNEL(KernelBuilder(op).Device(kDeviceGpu).TypeConstraint("T", dt), cls)
#define REGISTER_NN(dt)                              \
  REGISTER_GPU("Relu", dt, UnaryOp<UnaryFn::kRelu>); \
  REGISTER_GPU("ReluGrad", dt, ReluGradOp);          \
  REGISTER_GPU("BiasAdd", dt, BiasAddOp)
REGISTER_NN(DT_FLOAT);
REGISTER_NN(DT_DOUBLE);
REGISTER_NN(DT_HALF);
REGISTER_NN(DT_BFLOAT16);
#undef REGISTER_NN
#undef REGISTER_GPU

}  // namespace
}  // namespace gpu
}  // namespace strata
