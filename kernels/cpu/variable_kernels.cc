// CPU kernels of the resource-variable family (graph/ops/state_ops.h; the
// device-independent ones are kernels/variable_kernels.h, registered here). The
// value lives in the device's ResourceMgr as a Var (kernels/resource_mgr.h);
// these kernels take its mutex only for the pointer swap or in-place update,
// and never copy a value unless a reader still holds the buffer being
// written (copy-on-write).
#include "kernels/variable_kernels.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/state_ops.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

class AssignVariableOp : public OpKernel {
 public:
  explicit AssignVariableOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("validate_shape", &validate_shape_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    // Take the value out of the executor's slot: when this op is its only
    // consumer, the variable ends up the buffer's sole owner and the next
    // update runs in place.
    Tensor value = std::move(ctx.params().inputs[1]);
    if (value.allocator() != ctx.allocator() && value.TotalBytes() > 0) {
      // Keep a variable's memory in its own device's allocator (and stats).
      Tensor copy;
      STRATA_RETURN_IF_ERROR(ctx.allocate_temp(value.dtype(), value.shape(), &copy));
      std::memcpy(copy.raw_data(), value.raw_data(), value.TotalBytes());
      value = std::move(copy);
    }
    MutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckAssignable(value, validate_shape_));
    var->set_value(std::move(value));
    return absl::OkStatus();
  }

 private:
  bool validate_shape_ = false;
};

// var (+|-)= value, in place unless a reader holds the buffer.
template <typename T, bool kAdd>
class AssignUpdateVariableOp : public OpKernel {
 public:
  explicit AssignUpdateVariableOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    const Tensor& delta = ctx.input(1);
    MutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    STRATA_RETURN_IF_ERROR(var->CheckAssignable(delta, /*require_current_shape=*/true));
    STRATA_RETURN_IF_ERROR(var->PrepareForUpdate(ctx.allocator()));
    auto v = Flat<T>(*var->mutable_value());
    auto d = Flat<T>(delta);
    // Small updates (counters, biases) are cheaper on this thread than on the pool.
    if (delta.NumElements() < 32768) {
      if (kAdd) v += d; else v -= d;
    } else {
      if (kAdd) v.device(ctx.eigen_cpu_device()) += d;
      else v.device(ctx.eigen_cpu_device()) -= d;
    }
    return absl::OkStatus();
  }
};

// False for a handle nothing has created yet (or that was destroyed).
class VarIsInitializedOp : public OpKernel {
 public:
  explicit VarIsInitializedOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape(), &out));
    STRATA_ASSIGN_OR_RETURN(*out->data<bool>(), VariableIsInitialized(ctx));
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("VarHandleOp").Device(kDeviceCpu), VarHandleOp);
// Reading and assigning move whole buffers, so one kernel serves every dtype.
STRATA_REGISTER_KERNEL(KernelBuilder("ReadVariableOp").Device(kDeviceCpu), ReadVariableOp);
STRATA_REGISTER_KERNEL(KernelBuilder("AssignVariableOp").Device(kDeviceCpu), AssignVariableOp);
STRATA_REGISTER_KERNEL(KernelBuilder("VarIsInitializedOp").Device(kDeviceCpu), VarIsInitializedOp);
STRATA_REGISTER_KERNEL(KernelBuilder("DestroyResourceOp").Device(kDeviceCpu), DestroyResourceOp);

#define STRATA_REGISTER_ASSIGN_UPDATE(T)                                                    \
  STRATA_REGISTER_KERNEL(                                                                   \
      KernelBuilder("AssignAddVariableOp").Device(kDeviceCpu).TypeConstraint<T>("dtype"),  \
      AssignUpdateVariableOp<T, true>);                                                     \
  STRATA_REGISTER_KERNEL(                                                                   \
      KernelBuilder("AssignSubVariableOp").Device(kDeviceCpu).TypeConstraint<T>("dtype"),  \
      AssignUpdateVariableOp<T, false>)

STRATA_REGISTER_ASSIGN_UPDATE(float);
STRATA_REGISTER_ASSIGN_UPDATE(double);
STRATA_REGISTER_ASSIGN_UPDATE(int32_t);
STRATA_REGISTER_ASSIGN_UPDATE(int64_t);

#undef STRATA_REGISTER_ASSIGN_UPDATE

}  // namespace
}  // namespace strata
