// CollectiveOpKernel: the kernel of the collective ops (graph/ops/
// collective_ops.h) on every device type. It reads the int32 key inputs,
// describes the collective as CollectiveParams and hands it, with the data
// tensor, to the step's CollectiveExecutor (kernels/collective.h), which the
// session provides: the in-process or cross-process executors on CPU devices,
// NcclCollectiveExecutor on GPUs. The kernel never touches the data, so one
// class serves both; on a GPU device the key and shape inputs are int32 and
// live in host memory (LivesInHostMemory), where it reads them.
//
//   STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceV2").Device(kDeviceCpu),
//                          CollectiveKernel<CollectiveType::kAllReduce>);
//
// Thread-safety: kernels hold no per-step state; ComputeAsync may run
// concurrently. Ownership: the executor gets the input tensor by value.
#ifndef STRATA_KERNELS_COLLECTIVE_OP_KERNEL_H_
#define STRATA_KERNELS_COLLECTIVE_OP_KERNEL_H_

#include <string>

#include "kernels/collective.h"
#include "kernels/op_kernel.h"

namespace strata {

class CollectiveOpKernel : public AsyncOpKernel {
public:
  CollectiveOpKernel(OpKernelConstruction &c, CollectiveType type);
  void ComputeAsync(OpKernelContext &ctx, DoneCallback done) override;

private:
  absl::Status MakeParams(const OpKernelContext &ctx,
                          CollectiveParams *p) const;

  const CollectiveType type_;
  DataType dtype_ = DT_INVALID;
  std::string hint_;
  float timeout_seconds_ = 0;
  MergeOp merge_op_ = MergeOp::kAdd;
  FinalOp final_op_ = FinalOp::kId;
};

template <CollectiveType kType>
class CollectiveKernel : public CollectiveOpKernel {
public:
  explicit CollectiveKernel(OpKernelConstruction &c)
      : CollectiveOpKernel(c, kType) {}
};

} // namespace strata

#endif // STRATA_KERNELS_COLLECTIVE_OP_KERNEL_H_
