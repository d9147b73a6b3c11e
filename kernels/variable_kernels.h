// The resource-variable kernels that are the same on every device
// (graph/ops/state_ops.h): VarHandleOp, ReadVariableOp and
// DestroyResourceOp, and the lookup VarIsInitializedOp makes. The CPU and
// GPU kernel files register them and keep what differs: where a value lives
// and how it is copied (kernels/cpu/variable_kernels.cc,
// kernels/gpu/variable_kernels.cc).
//
//   STRATA_REGISTER_KERNEL(KernelBuilder("ReadVariableOp").Device(kDeviceCpu), ReadVariableOp);
//
// Handles (DT_RESOURCE) live in host memory; the Var in the device's
// ResourceMgr (kernels/resource_mgr.h). Errors: FailedPrecondition for a
// device without a resource manager; InvalidArgument naming the variable for
// two handles that disagree on its dtype or shape; a read's dtype or
// initialization error naming it. Thread-safety: as every OpKernel.
#ifndef STRATA_KERNELS_VARIABLE_KERNELS_H_
#define STRATA_KERNELS_VARIABLE_KERNELS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {

// The device's ResourceMgr; FailedPrecondition naming a device without one.
absl::StatusOr<ResourceMgr*> DeviceResources(const OpKernelContext& ctx);

// Finds or makes the variable (container, shared_name) in the device's
// ResourceMgr and outputs its handle. The Var is made uninitialized: the
// first assignment gives it a value.
class VarHandleOp : public OpKernel {
 public:
  explicit VarHandleOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;
  bool IsCaptureSafe() const override { return true; }

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
  absl::Status Compute(OpKernelContext& ctx) override;
  // On a GPU an int32 variable lives in host memory, where a recorded step
  // would not see its later values.
  bool IsCaptureSafe() const override { return output_type(0) != DT_INT32; }
};

class DestroyResourceOp : public OpKernel {
 public:
  explicit DestroyResourceOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;

 private:
  bool ignore_lookup_error_ = true;
};

// Whether input 0's variable has a value: false for a handle nothing has
// created yet (or that was destroyed), as in TensorFlow, rather than an
// error (VarIsInitializedOp's answer; each device writes it where a bool
// lives).
absl::StatusOr<bool> VariableIsInitialized(OpKernelContext& ctx);

}  // namespace strata

#endif  // STRATA_KERNELS_VARIABLE_KERNELS_H_
