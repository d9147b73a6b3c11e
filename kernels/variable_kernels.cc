#include "kernels/variable_kernels.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

absl::StatusOr<ResourceMgr*> DeviceResources(const OpKernelContext& ctx) {
  ResourceMgr* rm = ctx.device()->resource_manager();
  if (rm == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", ctx.device()->name(), " has no resource manager"));
  }
  return rm;
}

VarHandleOp::VarHandleOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("container", &container_));
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("shared_name", &shared_name_));
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("dtype", &dtype_));
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("shape", &shape_));
  // TensorFlow's rule: an unnamed variable is named after its node.
  if (shared_name_.empty()) shared_name_ = c.def().name();
}

absl::Status VarHandleOp::Compute(OpKernelContext& ctx) {
  STRATA_ASSIGN_OR_RETURN(ResourceMgr * rm, DeviceResources(ctx));
  uint64_t id = 0;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var,
                          rm->LookupOrCreate<Var>(
                              container_, shared_name_,
                              [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
                                return std::make_shared<Var>(shared_name_, dtype_, shape_);
                              },
                              &id));
  // Two VarHandleOps naming one variable must agree on what it is.
  if (var->dtype() != dtype_ || !var->declared_shape().IsCompatibleWith(shape_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("asks for variable '", shared_name_, "' as ", DataTypeString(dtype_), " ",
                     shape_.DebugString(), " but it exists as ", var->DebugString()));
  }
  STRATA_ASSIGN_OR_RETURN(Tensor handle, MakeResourceHandle(ctx.device()->host_allocator(), id));
  ctx.set_output(0, std::move(handle));
  return absl::OkStatus();
}

absl::Status ReadVariableOp::Compute(OpKernelContext& ctx) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
  STRATA_RETURN_IF_ERROR(var->CheckDtype(output_type(0), "ReadVariableOp"));
  ReaderMutexLock l(var->mu());
  STRATA_RETURN_IF_ERROR(var->CheckInitialized());
  ctx.set_output(0, var->value());
  return absl::OkStatus();
}

DestroyResourceOp::DestroyResourceOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("ignore_lookup_error", &ignore_lookup_error_));
}

absl::Status DestroyResourceOp::Compute(OpKernelContext& ctx) {
  STRATA_ASSIGN_OR_RETURN(ResourceMgr * rm, DeviceResources(ctx));
  STRATA_ASSIGN_OR_RETURN(uint64_t id, ResourceIdFromHandle(ctx.input(0)));
  absl::Status s = rm->Delete(id);
  if (s.code() == absl::StatusCode::kNotFound && ignore_lookup_error_) return absl::OkStatus();
  return s;
}

absl::StatusOr<bool> VariableIsInitialized(OpKernelContext& ctx) {
  absl::StatusOr<std::shared_ptr<Var>> var = LookupResource<Var>(ctx, 0);
  if (!var.ok() && var.status().code() != absl::StatusCode::kNotFound) return var.status();
  if (!var.ok()) return false;
  ReaderMutexLock l((*var)->mu());
  return (*var)->is_initialized();
}

}  // namespace strata
