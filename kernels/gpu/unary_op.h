// UnaryOp<fn>: the GPU kernel of an elementwise unary op (one launch of
// LaunchUnary, in place when the input is not needed elsewhere), shared by
// the op families whose ops are elementwise: the cwise family (Neg, Exp, ...:
// cwise_kernels.cc) and the nn family (Relu: nn_kernels.cc).
//
//   REGISTER_GPU("Relu", DT_FLOAT, UnaryOp<UnaryFn::kRelu>);
//
// Thread-safety and ownership: as for every OpKernel.
#ifndef STRATA_KERNELS_GPU_UNARY_OP_H_
#define STRATA_KERNELS_GPU_UNARY_OP_H_

#include "base/status.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {

template <UnaryFn kFn>
class UnaryOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit UnaryOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(x.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    return CudaStatus(LaunchUnary(kFn, t, x.raw_data(), y->raw_data(), x.NumElements(), stream),
                      type_string().c_str());
  }
};

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_UNARY_OP_H_
