// SendOp and RecvOp: the kernels of _Send and _Recv, the pair the session's
// partitioner puts on each edge between devices. They only hand a tensor to
// the step's Rendezvous (kernels/rendezvous.h) under the key their attrs name;
// the rendezvous moves it, copying between host and device memory where the
// devices need it (runtime/local_rendezvous.h). They never touch the data, so
// every device type registers these same classes:
//
//   STRATA_REGISTER_KERNEL(KernelBuilder("_Send").Device(kDeviceCpu), SendOp);
//   STRATA_REGISTER_KERNEL(KernelBuilder("_Recv").Device(kDeviceCpu), RecvOp);
//
// Thread-safety: no per-step state; Compute may run concurrently.
#ifndef STRATA_KERNELS_SEND_RECV_OPS_H_
#define STRATA_KERNELS_SEND_RECV_OPS_H_

#include <string>

#include "kernels/op_kernel.h"

namespace strata {

class SendOp : public OpKernel {
 public:
  explicit SendOp(OpKernelConstruction& c);
  absl::Status Compute(OpKernelContext& ctx) override;

 private:
  std::string key_;
};

class RecvOp : public AsyncOpKernel {
 public:
  explicit RecvOp(OpKernelConstruction& c);
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override;

 private:
  std::string key_;
};

}  // namespace strata

#endif  // STRATA_KERNELS_SEND_RECV_OPS_H_
