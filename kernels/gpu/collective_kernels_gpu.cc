// GPU kernels of the collective ops (graph/ops/collective_ops.h): the same
// attrs, inputs and validation as the CPU kernels (kernels/cpu/
// collective_kernels.cc); the step's CollectiveExecutor on GPU devices is
// NcclCollectiveExecutor (runtime/collective/nccl/), which moves the device
// buffers with NCCL. On a GPU device the int32 key inputs live in host memory
// (kernels/device_base.h LivesInHostMemory), so they are read here directly;
// the data tensor is in device memory and only handed on.
//
// Registered for T in {float, half, double, int64}: int32 tensors live in
// host memory on GPU devices, and NCCL has no bool, so those collectives stay
// on CPU devices. CollectiveBcastRecvV2 is registered for Tshape = int32 only:
// an int64 shape would live in device memory, out of the kernel's reach.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/collective_ops.h"
#include "graph/status.h"
#include "kernels/collective.h"
#include "kernels/device_base.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

absl::Status ReadHostInt32(const OpKernelContext& ctx, int index, const char* what, int* out) {
  const Tensor& t = ctx.input(index);
  if (t.dtype() != DT_INT32 || t.NumElements() != 1 || t.dims() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("input '", what, "' must be an int32 scalar, got ",
                                                   DataTypeString(t.dtype()), " ",
                                                   t.shape().DebugString()));
  }
  *out = t.data<int32_t>()[0];
  return absl::OkStatus();
}

class GpuCollectiveKernel : public AsyncOpKernel {
 public:
  GpuCollectiveKernel(OpKernelConstruction& c, CollectiveType type) : AsyncOpKernel(c), type_(type) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("T", &dtype_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("communication_hint", &hint_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("timeout_seconds", &timeout_seconds_));
    if (type_ == CollectiveType::kAllReduce) {
      std::string merge, final_op;
      STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("merge_op", &merge));
      STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("final_op", &final_op));
      auto m = ParseMergeOp(merge);
      STRATA_KERNEL_REQUIRES_OK(c, m.status());
      auto f = ParseFinalOp(final_op);
      STRATA_KERNEL_REQUIRES_OK(c, f.status());
      merge_op_ = *m;
      final_op_ = *f;
    }
  }

  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    CollectiveExecutor* executor = ctx.params().collective_executor;
    if (executor == nullptr) {
      done(absl::FailedPreconditionError(absl::StrCat(
          type_string(), " on ", ctx.device()->name(),
          " needs a collective executor, and none is configured for this run (GPU collectives "
          "run in a Session whose strategy provides the NCCL executor)")));
      return;
    }
    CollectiveParams p;
    if (absl::Status s = MakeParams(ctx, &p); !s.ok()) {
      done(s);
      return;
    }
    Tensor input = type_ == CollectiveType::kBroadcastRecv ? Tensor() : ctx.input(0);
    // The context outlives `done`, so capturing it by pointer is safe.
    OpKernelContext* c = &ctx;
    executor->ExecuteAsync(p, std::move(input), ctx.allocator(), ctx.params().cancellation,
                           [c, done = std::move(done)](absl::Status s, Tensor out) {
                             if (s.ok()) c->set_output(0, std::move(out));
                             done(std::move(s));
                           });
  }

 private:
  absl::Status MakeParams(const OpKernelContext& ctx, CollectiveParams* p) const {
    const int first_key = type_ == CollectiveType::kBroadcastRecv ? 0 : 1;
    STRATA_RETURN_IF_ERROR(ReadHostInt32(ctx, first_key, "group_size", &p->group_size));
    STRATA_RETURN_IF_ERROR(ReadHostInt32(ctx, first_key + 1, "group_key", &p->group_key));
    STRATA_RETURN_IF_ERROR(ReadHostInt32(ctx, first_key + 2, "instance_key", &p->instance_key));
    if (p->group_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("group_size is ", p->group_size, ", must be >= 1"));
    }
    p->type = type_;
    p->step_id = ctx.params().step_id;
    p->device = ctx.device()->name();
    p->node_name = name();
    p->dtype = dtype_;
    p->merge_op = merge_op_;
    p->final_op = final_op_;
    p->timeout_seconds = timeout_seconds_;
    p->communication_hint = hint_;
    if (type_ != CollectiveType::kBroadcastRecv) {
      p->shape = ctx.input(0).shape();
      if (type_ == CollectiveType::kAllGather && p->shape.dims() == 0) {
        return absl::InvalidArgumentError("CollectiveGatherV2 needs an input of rank >= 1, got a scalar");
      }
      return absl::OkStatus();
    }
    const Tensor& shape = ctx.input(3);
    if (shape.dtype() != DT_INT32 || shape.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input 'shape' must be an int32 vector (host memory) on a GPU device, got ",
          DataTypeString(shape.dtype()), " ", shape.shape().DebugString()));
    }
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < shape.NumElements(); ++i) {
      const int64_t d = shape.data<int32_t>()[i];
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("input 'shape' has a negative dimension ", d));
      dims.push_back(d);
    }
    STRATA_ASSIGN_OR_RETURN(p->shape, TensorShape::FromDims(dims));
    return absl::OkStatus();
  }

  const CollectiveType type_;
  DataType dtype_ = DT_INVALID;
  std::string hint_;
  float timeout_seconds_ = 0;
  MergeOp merge_op_ = MergeOp::kAdd;
  FinalOp final_op_ = FinalOp::kId;
};

template <CollectiveType kType>
class Kernel : public GpuCollectiveKernel {
 public:
  explicit Kernel(OpKernelConstruction& c) : GpuCollectiveKernel(c, kType) {}
};

#define STRATA_REGISTER_GPU_COLLECTIVES(T)                                                     \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceV2").Device(kDeviceGpu).TypeConstraint("T", T), \
                         Kernel<CollectiveType::kAllReduce>);                                   \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveGatherV2").Device(kDeviceGpu).TypeConstraint("T", T), \
                         Kernel<CollectiveType::kAllGather>);                                   \
  STRATA_REGISTER_KERNEL(                                                                      \
      KernelBuilder("CollectiveBcastSendV2").Device(kDeviceGpu).TypeConstraint("T", T),         \
      Kernel<CollectiveType::kBroadcastSend>);                                                 \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveBcastRecvV2")                                \
                             .Device(kDeviceGpu)                                               \
                             .TypeConstraint("T", T)                                           \
                             .TypeConstraint("Tshape", DT_INT32),                              \
                         Kernel<CollectiveType::kBroadcastRecv>)

STRATA_REGISTER_GPU_COLLECTIVES(DT_FLOAT);
STRATA_REGISTER_GPU_COLLECTIVES(DT_HALF);
STRATA_REGISTER_GPU_COLLECTIVES(DT_DOUBLE);
STRATA_REGISTER_GPU_COLLECTIVES(DT_INT64);

}  // namespace
}  // namespace strata
