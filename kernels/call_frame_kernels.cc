#include "kernels/call_frame_kernels.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/call_frame.h"

namespace strata {

ArgOp::ArgOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("index", &index_));
}

absl::Status ArgOp::Compute(OpKernelContext& ctx) {
  CallFrame* frame = ctx.params().call_frame;
  if (frame == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(type_string(), " run without a call frame"));
  }
  Tensor* out = ctx.mutable_output(0);
  STRATA_RETURN_IF_ERROR(frame->GetArg(index_, out));
  if (out->dtype() != output_type(0)) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", index_, " is ",
                                                   DataTypeString(out->dtype()), ", expected ",
                                                   DataTypeString(output_type(0))));
  }
  return absl::OkStatus();
}

RetvalOp::RetvalOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("index", &index_));
}

absl::Status RetvalOp::Compute(OpKernelContext& ctx) {
  CallFrame* frame = ctx.params().call_frame;
  if (frame == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(type_string(), " run without a call frame"));
  }
  return frame->SetRetval(index_, ctx.input(0));
}

}  // namespace strata
