// GatherV2 (an embedding lookup), ResourceGather (the same from a
// variable) and UnsortedSegmentSum (its gradient's
// scatter-add) on the CPU. An index out of range is InvalidArgument naming
// it and its position, as TensorFlow's CPU kernels do, never a read or
// write outside the tensors.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

absl::StatusOr<int64_t> OneValue(const Tensor& t, const char* what) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntTensorValues(t, what));
  if (v.size() != 1) return absl::InvalidArgumentError(absl::StrCat(what, " must be one value, got ", v.size()));
  return v[0];
}

// out = params gathered along `axis` at `indices` (GatherV2's semantics,
// batch_dims 0); `op` names the kernel in errors.
absl::Status GatherAlongAxis(OpKernelContext& ctx, const Tensor& params, const Tensor& indices, int64_t axis,
                             const char* op) {
  STRATA_ASSIGN_OR_RETURN(const GatherPlan p, PlanGather(params.shape(), indices.shape(), axis));
  const int64_t outer = p.outer, inner = p.inner, n = p.n;
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> idx, IntTensorValues(indices, absl::StrCat(op, " indices").c_str()));
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat(op, " indices[", i, "] = ", idx[i], " is not in [0, ", n, ")"));
    }
  }
  Tensor* out;
  STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, p.out, &out));
  const size_t row = static_cast<size_t>(inner) * DataTypeSize(params.dtype());
  const char* src = static_cast<const char*>(params.raw_data());
  char* dst = static_cast<char*>(out->raw_data());
  const int64_t m = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(dst + (o * m + i) * row, src + (o * n + idx[i]) * row, row);
    }
  }
  return absl::OkStatus();
}

absl::Status RequireNoBatchDims(OpKernelConstruction& c, const char* op) {
  int64_t batch_dims = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, " batch_dims ", batch_dims, " is not supported"));
  }
  return absl::OkStatus();
}

class GatherV2Op : public OpKernel {
 public:
  explicit GatherV2Op(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, RequireNoBatchDims(c, "GatherV2"));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(int64_t axis, OneValue(ctx.input(2), "GatherV2 axis"));
    return GatherAlongAxis(ctx, ctx.input(0), ctx.input(1), axis, "GatherV2");
  }
};

// The rows are copied under the variable's reader lock: the output is a
// snapshot, as a read's is.
class ResourceGatherOp : public OpKernel {
 public:
  explicit ResourceGatherOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, RequireNoBatchDims(c, "ResourceGather"));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    STRATA_RETURN_IF_ERROR(var->CheckDtype(output_type(0), "ResourceGather"));
    ReaderMutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    if (var->value().dims() < 1) {
      return absl::InvalidArgumentError("ResourceGather: the variable is a scalar; it has no rows to gather");
    }
    return GatherAlongAxis(ctx, var->value(), ctx.input(1), 0, "ResourceGather");
  }
};

template <typename T>
class UnsortedSegmentSumOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& ids = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(int64_t segments, OneValue(ctx.input(2), "UnsortedSegmentSum num_segments"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_shape, SegmentSumOutputShape(data.shape(), ids.shape(), segments));
    STRATA_ASSIGN_OR_RETURN(TensorShape full, out_shape.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> id, IntTensorValues(ids, "UnsortedSegmentSum segment_ids"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, full, &out));
    T* o = out->data<T>();
    std::fill(o, o + out->NumElements(), T(0));
    const int64_t inner = id.empty() ? 0 : data.NumElements() / static_cast<int64_t>(id.size());
    const T* d = data.data<T>();
    for (size_t i = 0; i < id.size(); ++i) {
      if (id[i] < 0 || id[i] >= segments) {
        return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum segment_ids[", i, "] = ", id[i],
                                                       " is not in [0, ", segments, ")"));
      }
      T* row = o + id[i] * inner;
      const T* from = d + static_cast<int64_t>(i) * inner;
      for (int64_t k = 0; k < inner; ++k) row[k] += from[k];
    }
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("GatherV2").Device(kDeviceCpu), GatherV2Op);
STRATA_REGISTER_KERNEL(KernelBuilder("ResourceGather").Device(kDeviceCpu), ResourceGatherOp);
#define REGISTER_SEGMENT_SUM(T) \
  STRATA_REGISTER_KERNEL(KernelBuilder("UnsortedSegmentSum").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         UnsortedSegmentSumOp<T>)
REGISTER_SEGMENT_SUM(float);
REGISTER_SEGMENT_SUM(double);
REGISTER_SEGMENT_SUM(int32_t);
REGISTER_SEGMENT_SUM(int64_t);
#undef REGISTER_SEGMENT_SUM

}  // namespace
}  // namespace strata
