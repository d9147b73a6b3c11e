// CPU kernels of the resource-variable family (graph/ops/state_ops.h). The
// value lives in the device's ResourceMgr as a Var (kernels/resource_mgr.h);
// these kernels take its mutex only for the pointer swap or in-place update,
// and never copy a value unless a reader still holds the buffer being
// written (copy-on-write).
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

// Finds or makes the variable (container, shared_name) in this device's
// ResourceMgr and outputs its handle. The Var is made uninitialized: the
// first assignment gives it a value.
class VarHandleOp : public OpKernel {
 public:
  explicit VarHandleOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("container", &container_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("shared_name", &shared_name_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("dtype", &dtype_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("shape", &shape_));
    // TensorFlow's rule: an unnamed variable is named after its node.
    if (shared_name_.empty()) shared_name_ = c.def().name();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    ResourceMgr* rm = ctx.device()->resource_manager();
    if (rm == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("device ", ctx.device()->name(), " has no resource manager"));
    }
    uint64_t id = 0;
    STRATA_ASSIGN_OR_RETURN(
        std::shared_ptr<Var> var,
        rm->LookupOrCreate<Var>(
            container_, shared_name_,
            [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
              return std::make_shared<Var>(shared_name_, dtype_, shape_);
            },
            &id));
    // Two VarHandleOps naming one variable must agree on what it is.
    if (var->dtype() != dtype_ || !var->declared_shape().IsCompatibleWith(shape_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "asks for variable '", shared_name_, "' as ", DataTypeString(dtype_), " ",
          shape_.DebugString(), " but it exists as ", var->DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(Tensor handle, MakeResourceHandle(ctx.allocator(), id));
    ctx.set_output(0, std::move(handle));
    return absl::OkStatus();
  }

 private:
  std::string container_, shared_name_;
  DataType dtype_ = DT_INVALID;
  PartialTensorShape shape_;
};

// Outputs the current value, sharing its buffer: writers copy before writing
// a buffer someone else holds, so this snapshot never changes.
class ReadVariableOp : public OpKernel {
 public:
  explicit ReadVariableOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    STRATA_RETURN_IF_ERROR(var->CheckDtype(output_type(0), "ReadVariableOp"));
    ReaderMutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    ctx.set_output(0, var->value());
    return absl::OkStatus();
  }
};

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

// False for a handle nothing has created yet (or that was destroyed), as in
// TensorFlow, rather than an error.
class VarIsInitializedOp : public OpKernel {
 public:
  explicit VarIsInitializedOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape(), &out));
    auto var = LookupResource<Var>(ctx, 0);
    if (!var.ok() && var.status().code() != absl::StatusCode::kNotFound) return var.status();
    bool initialized = false;
    if (var.ok()) {
      ReaderMutexLock l((*var)->mu());
      initialized = (*var)->is_initialized();
    }
    *out->data<bool>() = initialized;
    return absl::OkStatus();
  }
};

class DestroyResourceOp : public OpKernel {
 public:
  explicit DestroyResourceOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("ignore_lookup_error", &ignore_lookup_error_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    ResourceMgr* rm = ctx.device()->resource_manager();
    if (rm == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("device ", ctx.device()->name(), " has no resource manager"));
    }
    STRATA_ASSIGN_OR_RETURN(uint64_t id, ResourceIdFromHandle(ctx.input(0)));
    absl::Status s = rm->Delete(id);
    if (s.code() == absl::StatusCode::kNotFound && ignore_lookup_error_) return absl::OkStatus();
    return s;
  }

 private:
  bool ignore_lookup_error_ = true;
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
