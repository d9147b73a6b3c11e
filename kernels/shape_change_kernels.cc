#include "kernels/shape_change_kernels.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"

namespace strata {

absl::Status ExpandDimsCompute(OpKernelContext& ctx, const Tensor& dim_on_host) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dim, IntTensorValues(dim_on_host, "ExpandDims dim"));
  if (dim.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("ExpandDims dim must be one value, got ", dim.size()));
  }
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape out, ExpandDimsOutputShape(ctx.input(0).shape(), dim[0]));
  STRATA_ASSIGN_OR_RETURN(TensorShape full, out.AsTensorShape());
  STRATA_ASSIGN_OR_RETURN(Tensor t, ctx.input(0).Reshaped(full));
  ctx.set_output(0, std::move(t));
  return absl::OkStatus();
}

SqueezeOp::SqueezeOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("squeeze_dims", &dims_));
}

absl::Status SqueezeOp::Compute(OpKernelContext& ctx) {
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape out, SqueezeOutputShape(ctx.input(0).shape(), dims_));
  STRATA_ASSIGN_OR_RETURN(TensorShape full, out.AsTensorShape());
  STRATA_ASSIGN_OR_RETURN(Tensor t, ctx.input(0).Reshaped(full));
  ctx.set_output(0, std::move(t));
  return absl::OkStatus();
}

}  // namespace strata
