// _Send and _Recv for GPU partitions. They only hand tensors to the step's
// rendezvous by key; the rendezvous (runtime/local_rendezvous.h, given the
// devices) copies a value between host and device memory on the devices' copy
// streams. No CUDA here, so the session's CPU/GPU path is also tested with a
// stand-in GPU device (session_gpu_path_test).
#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/rendezvous.h"

namespace strata {
namespace {

absl::Status KeyFromAttrs(OpKernelConstruction& c, std::string* key) {
  std::string tensor, from, to;
  int64_t incarnation = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("tensor_name", &tensor));
  STRATA_RETURN_IF_ERROR(c.GetAttr("send_device", &from));
  STRATA_RETURN_IF_ERROR(c.GetAttr("send_device_incarnation", &incarnation));
  STRATA_RETURN_IF_ERROR(c.GetAttr("recv_device", &to));
  *key = Rendezvous::CreateKey(from, static_cast<uint64_t>(incarnation), to, tensor);
  return absl::OkStatus();
}

class GpuSendOp : public OpKernel {
 public:
  explicit GpuSendOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, KeyFromAttrs(c, &key_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    Rendezvous* r = ctx.params().rendezvous;
    if (r == nullptr) return absl::FailedPreconditionError("_Send run without a rendezvous");
    // The kernels that made the value are enqueued, not finished; a copy out
    // of device memory waits for them on the GPU.
    return r->Send(key_, ctx.input(0));
  }

 private:
  std::string key_;
};

class GpuRecvOp : public AsyncOpKernel {
 public:
  explicit GpuRecvOp(OpKernelConstruction& c) : AsyncOpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, KeyFromAttrs(c, &key_));
  }
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Rendezvous* r = ctx.params().rendezvous;
    if (r == nullptr) {
      done(absl::FailedPreconditionError("_Recv run without a rendezvous"));
      return;
    }
    OpKernelContext* c = &ctx;  // outlives `done`
    const DataType want = output_type(0);
    r->RecvAsync(key_, [c, want, done = std::move(done)](const absl::Status& s, const Tensor& t) {
      if (s.ok() && t.dtype() != want) {
        done(absl::InvalidArgumentError(absl::StrCat("received ", DataTypeString(t.dtype()),
                                                     ", expected ", DataTypeString(want))));
        return;
      }
      if (s.ok()) c->set_output(0, t);
      done(s);
    });
  }

 private:
  std::string key_;
};

STRATA_REGISTER_KERNEL(KernelBuilder("_Send").Device(kDeviceGpu), GpuSendOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Recv").Device(kDeviceGpu), GpuRecvOp);

}  // namespace
}  // namespace strata
