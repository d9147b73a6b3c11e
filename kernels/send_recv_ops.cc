#include "kernels/send_recv_ops.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/rendezvous.h"

namespace strata {
namespace {

// The rendezvous key of a _Send/_Recv pair, from the attrs both carry.
absl::Status ParseKey(OpKernelConstruction& c, std::string* key) {
  std::string tensor_name, send_device, recv_device;
  int64_t incarnation = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("tensor_name", &tensor_name));
  STRATA_RETURN_IF_ERROR(c.GetAttr("send_device", &send_device));
  STRATA_RETURN_IF_ERROR(c.GetAttr("send_device_incarnation", &incarnation));
  STRATA_RETURN_IF_ERROR(c.GetAttr("recv_device", &recv_device));
  *key = Rendezvous::CreateKey(send_device, static_cast<uint64_t>(incarnation), recv_device,
                               tensor_name);
  return absl::OkStatus();
}

}  // namespace

SendOp::SendOp(OpKernelConstruction& c) : OpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, ParseKey(c, &key_));
}

absl::Status SendOp::Compute(OpKernelContext& ctx) {
  Rendezvous* r = ctx.params().rendezvous;
  if (r == nullptr) return absl::FailedPreconditionError("_Send run without a rendezvous");
  // On a GPU the kernels that made the value may still be enqueued; a copy
  // out of device memory waits for them on the device's streams. An empty
  // tensor is the executor's dead marker (a value of a branch not taken):
  // it is sent as is, so the receiver is dead too.
  return r->Send(key_, ctx.input(0));
}

RecvOp::RecvOp(OpKernelConstruction& c) : AsyncOpKernel(c) {
  STRATA_KERNEL_REQUIRES_OK(c, ParseKey(c, &key_));
}

void RecvOp::ComputeAsync(OpKernelContext& ctx, DoneCallback done) {
  Rendezvous* r = ctx.params().rendezvous;
  if (r == nullptr) {
    done(absl::FailedPreconditionError("_Recv run without a rendezvous"));
    return;
  }
  // The context outlives `done`, so capturing it by pointer is safe.
  OpKernelContext* c = &ctx;
  const DataType want = output_type(0);
  r->RecvAsync(key_, [c, want, done = std::move(done)](const absl::Status& s, const Tensor& t) {
    if (!s.ok()) {
      done(s);
      return;
    }
    if (!t.IsInitialized()) {  // dead (runtime/executor.h): no output
      done(absl::OkStatus());
      return;
    }
    if (t.dtype() != want) {
      done(absl::InvalidArgumentError(absl::StrCat("received ", DataTypeString(t.dtype()),
                                                   ", expected ", DataTypeString(want))));
      return;
    }
    c->set_output(0, t);
    done(absl::OkStatus());
  });
}

}  // namespace strata
