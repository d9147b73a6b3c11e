#include "kernels/collective_op_kernel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {
namespace {

absl::Status ReadScalarInt(const OpKernelContext &ctx, int index,
                           const char *what, int *out) {
  const Tensor &t = ctx.input(index);
  if (t.dtype() != DT_INT32 || t.NumElements() != 1 || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", what, "' must be an int32 scalar, got ",
                     DataTypeString(t.dtype()), " ", t.shape().DebugString()));
  }
  *out = t.data<int32_t>()[0];
  return absl::OkStatus();
}

} // namespace

CollectiveOpKernel::CollectiveOpKernel(OpKernelConstruction &c,
                                       CollectiveType type)
    : AsyncOpKernel(c), type_(type) {
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("T", &dtype_));
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("communication_hint", &hint_));
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("timeout_seconds", &timeout_seconds_));
  if (type_ == CollectiveType::kAllReduce || type_ == CollectiveType::kReduceScatter) {
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

void CollectiveOpKernel::ComputeAsync(OpKernelContext &ctx, DoneCallback done) {
  CollectiveExecutor *executor = ctx.params().collective_executor;
  if (executor == nullptr) {
    done(absl::FailedPreconditionError(
        absl::StrCat(type_string(), " on ", ctx.device()->name(),
                     " needs a collective executor, and none is configured for "
                     "this run (run collective ops "
                     "in a Session, which provides one; on GPUs a strategy "
                     "provides the NCCL executor)")));
    return;
  }
  CollectiveParams p;
  absl::Status s = MakeParams(ctx, &p);
  if (!s.ok()) {
    done(s);
    return;
  }
  // Forwarded when nobody else holds it, so that an all-reduce may run in
  // place (DistributedCollectiveExecutor).
  Tensor input =
      type_ == CollectiveType::kBroadcastRecv ? Tensor() : ctx.forward_input(0);
  // The context outlives `done`, so capturing it by pointer is safe.
  OpKernelContext *c = &ctx;
  executor->ExecuteAsync(
      p, std::move(input), ctx.allocator(), ctx.params().cancellation,
      [c, done = std::move(done)](absl::Status s, Tensor out) {
        if (s.ok())
          c->set_output(0, std::move(out));
        done(std::move(s));
      });
}

absl::Status CollectiveOpKernel::MakeParams(const OpKernelContext &ctx,
                                            CollectiveParams *p) const {
  const int first_key = type_ == CollectiveType::kBroadcastRecv ? 0 : 1;
  STRATA_RETURN_IF_ERROR(
      ReadScalarInt(ctx, first_key, "group_size", &p->group_size));
  STRATA_RETURN_IF_ERROR(
      ReadScalarInt(ctx, first_key + 1, "group_key", &p->group_key));
  STRATA_RETURN_IF_ERROR(
      ReadScalarInt(ctx, first_key + 2, "instance_key", &p->instance_key));
  if (p->group_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_size is ", p->group_size, ", must be >= 1"));
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
      return absl::InvalidArgumentError(
          "CollectiveGatherV2 needs an input of rank >= 1, got a scalar");
    }
    return CheckReduceScatterShape(*p);
  }
  const Tensor &shape = ctx.input(3);
  if (shape.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 'shape' must be a vector, got shape ",
                     shape.shape().DebugString()));
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < shape.NumElements(); ++i) {
    const int64_t d = shape.dtype() == DT_INT32 ? shape.data<int32_t>()[i]
                                                : shape.data<int64_t>()[i];
    if (d < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("input 'shape' has a negative dimension ", d));
    dims.push_back(d);
  }
  auto ts = TensorShape::FromDims(dims);
  if (!ts.ok())
    return ts.status();
  p->shape = *ts;
  return absl::OkStatus();
}

} // namespace strata
