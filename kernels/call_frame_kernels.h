// The kernels of _Arg/_Retval and _DeviceArg/_DeviceRetval: a step's inputs
// and outputs through its CallFrame (kernels/call_frame.h), the same on every
// device. _Arg/_Retval carry the session's feeds and fetches on the CPU;
// _DeviceArg/_DeviceRetval carry a recorded GPU partition's values in device
// memory (runtime/step_graph.h). The CPU and GPU kernel files register them:
//
//   STRATA_REGISTER_KERNEL(KernelBuilder("_Arg").Device(kDeviceCpu), ArgOp);
//
// Errors: FailedPrecondition without a call frame; InvalidArgument for an
// argument of another dtype, naming its index. Thread-safety: as every
// OpKernel.
#ifndef STRATA_KERNELS_CALL_FRAME_KERNELS_H_
#define STRATA_KERNELS_CALL_FRAME_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/op_kernel.h"

namespace strata {

class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;
  // It hands over a tensor: no work of its own.
  bool IsCaptureSafe() const override { return true; }

 private:
  int64_t index_ = 0;
};

class RetvalOp : public OpKernel {
 public:
  explicit RetvalOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;
  bool IsCaptureSafe() const override { return true; }
  bool ReadsHostInputOnDevice(int) const override { return true; }

 private:
  int64_t index_ = 0;
};

}  // namespace strata

#endif  // STRATA_KERNELS_CALL_FRAME_KERNELS_H_
