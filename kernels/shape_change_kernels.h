// ExpandDims and Squeeze, the same on every device: the input's buffer under
// another shape (graph/ops/array_ops.h says which). The CPU and GPU kernel
// files register them; a GPU kernel first copies ExpandDims's dim to the
// host (an int64 dim lives in device memory there).
//
//   absl::Status Compute(OpKernelContext& ctx) override { return ExpandDimsCompute(ctx, ctx.input(1)); }
//   STRATA_REGISTER_KERNEL(KernelBuilder("Squeeze").Device(kDeviceCpu), SqueezeOp);
//
// Errors: InvalidArgument naming the dim and the shape (out of range, not of
// size 1, more than one dim value). Thread-safety: as every OpKernel.
#ifndef STRATA_KERNELS_SHAPE_CHANGE_KERNELS_H_
#define STRATA_KERNELS_SHAPE_CHANGE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "graph/tensor.h"
#include "kernels/op_kernel.h"

namespace strata {

// ExpandDims's output: input 0 with a dim of 1 inserted at `dim` (a host
// int32/int64 tensor of one value).
absl::Status ExpandDimsCompute(OpKernelContext& ctx, const Tensor& dim_on_host);

class SqueezeOp : public OpKernel {
 public:
  explicit SqueezeOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;
  bool IsCaptureSafe() const override { return true; }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace strata

#endif  // STRATA_KERNELS_SHAPE_CHANGE_KERNELS_H_
