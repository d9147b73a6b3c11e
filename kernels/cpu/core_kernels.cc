// CPU kernels of the core op family (graph/ops/core_ops.h). None of them
// computes anything: they move tensors between the graph, the step's call
// frame and the rendezvous, so each is written to cost as little as the
// executor around it (no copies, no allocation after construction).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "kernels/call_frame_kernels.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/send_recv_ops.h"

namespace strata {
namespace {

// Parses `value` once, into the device's memory; each run outputs the same
// buffer (a reference, so consumers never write it in place).
class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction& c) : OpKernel(c) {
    auto it = c.def().attr().find("value");
    if (it == c.def().attr().end() || it->second.value_case() != AttrValue::kTensor) {
      c.SetStatus(absl::InvalidArgumentError("attr 'value' is missing or not a tensor"));
      return;
    }
    auto t = Tensor::FromProto(it->second.tensor(), c.device()->allocator());
    if (!t.ok()) {
      c.SetStatus(AnnotateStatus(t.status(), "attr 'value': "));
      return;
    }
    if (t->dtype() != output_type(0)) {
      c.SetStatus(absl::InvalidArgumentError(
          absl::StrCat("attr 'value' holds ", DataTypeString(t->dtype()), " but attr 'dtype' is ",
                       DataTypeString(output_type(0)))));
      return;
    }
    value_ = *std::move(t);
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, value_);
    return absl::OkStatus();
  }

 private:
  Tensor value_;
};

// Runs only when nothing was fed in its place: that is the user's error.
class PlaceholderOp : public OpKernel {
 public:
  explicit PlaceholderOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("shape", &shape_));
  }
  absl::Status Compute(OpKernelContext&) override {
    return absl::InvalidArgumentError(absl::StrCat("You must feed a value for placeholder '",
                                                   name(), "' with dtype ",
                                                   DataTypeString(output_type(0)), " and shape ",
                                                   shape_.DebugString()));
  }

 private:
  PartialTensorShape shape_;
};

// Passes its input through: moves it out of the executor's input slot, so a
// buffer with a single consumer stays forwardable downstream.
class IdentityOp : public OpKernel {
 public:
  explicit IdentityOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, std::move(ctx.params().inputs[0]));
    return absl::OkStatus();
  }
};

class NoOpOp : public OpKernel {
 public:
  explicit NoOpOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
};

// Hands `data` to output 1 when `pred` holds, else to output 0; the other
// output stays unset, which the executor reads as dead.
class SwitchOp : public OpKernel {
 public:
  explicit SwitchOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& pred = ctx.input(1);
    if (pred.dtype() != DT_BOOL || pred.NumElements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("pred must be a bool scalar, got ",
                                                     DataTypeString(pred.dtype()), " of shape ",
                                                     pred.shape().DebugString()));
    }
    const bool taken = *pred.data<bool>();
    ctx.set_output(taken ? 1 : 0, std::move(ctx.params().inputs[0]));
    return absl::OkStatus();
  }
};

// Forwards the first live (set) input and its index; with none live (the
// executor runs a Merge with dead inputs) its outputs stay unset: dead.
class MergeOp : public OpKernel {
 public:
  explicit MergeOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.input(i).IsInitialized()) continue;
      Tensor* index = nullptr;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(1, TensorShape{}, &index));
      *index->data<int32_t>() = i;
      ctx.set_output(0, std::move(ctx.params().inputs[i]));
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Switch").Device(kDeviceCpu), SwitchOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Merge").Device(kDeviceCpu), MergeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Const").Device(kDeviceCpu), ConstOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Placeholder").Device(kDeviceCpu), PlaceholderOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Identity").Device(kDeviceCpu), IdentityOp);
STRATA_REGISTER_KERNEL(KernelBuilder("StopGradient").Device(kDeviceCpu), IdentityOp);
STRATA_REGISTER_KERNEL(KernelBuilder("NoOp").Device(kDeviceCpu), NoOpOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Arg").Device(kDeviceCpu), ArgOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Retval").Device(kDeviceCpu), RetvalOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceArg").Device(kDeviceCpu), ArgOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceRetval").Device(kDeviceCpu), RetvalOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Send").Device(kDeviceCpu), SendOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Recv").Device(kDeviceCpu), RecvOp);

}  // namespace
}  // namespace strata
