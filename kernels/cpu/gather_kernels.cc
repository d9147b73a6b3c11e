// GatherV2 (an embedding lookup), ResourceGather (the same from a
// variable), UnsortedSegmentSum (its gradient's scatter-add) and
// ResourceScatterAdd/Sub/Update (rows of a variable added to, subtracted
// from or written) on the CPU. An index out of range is InvalidArgument
// naming it and its position, as TensorFlow's CPU kernels do, never a read
// or write outside the tensors; the scatters check every index before
// writing any row.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

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

// var[indices[i...], ...] (+|-)= updates[i..., ...], or the scalar update
// for each named row. As AssignAddVariableOp: under the variable's writer
// lock, in place unless a reader still holds the buffer (PrepareForUpdate
// copies it then, so earlier reads stay snapshots). Every check comes before
// the first write, so an error leaves the variable as it was.
enum class ScatterKind { kAdd, kSub, kUpdate };

template <typename T, ScatterKind kKind>
class ResourceScatterUpdateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const char* op = kKind == ScatterKind::kAdd   ? "ResourceScatterAdd"
                     : kKind == ScatterKind::kSub ? "ResourceScatterSub"
                                                  : "ResourceScatterUpdate";
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    STRATA_RETURN_IF_ERROR(var->CheckDtype(input_type(2), op));
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                            IntTensorValues(indices, absl::StrCat(op, " indices").c_str()));
    MutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    // A copy: PrepareForUpdate may replace the value.
    const TensorShape shape = var->value().shape();
    if (shape.dims() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", var->DebugString(), " holds a scalar; it has no rows"));
    }
    // updates: indices.shape + shape[1:], or a scalar.
    const bool scalar = updates.dims() == 0;
    DimVector want(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end());
    int64_t inner = 1;
    for (int d = 1; d < shape.dims(); ++d) {
      want.push_back(shape.dim_size(d));
      inner *= shape.dim_size(d);
    }
    if (!scalar && updates.shape().dim_sizes() != absl::Span<const int64_t>(want)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " updates have shape ", updates.shape().DebugString(),
          "; they must be a scalar or have shape ", PartialTensorShape(want).DebugString(),
          " (indices' shape, then the rows' of ", var->DebugString(), " whose value has shape ",
          shape.DebugString(), ")"));
    }
    const int64_t rows = shape.dim_size(0);
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= rows) {
        return absl::InvalidArgumentError(absl::StrCat(op, " indices[", i, "] = ", idx[i],
                                                       " is not in [0, ", rows, ") (the rows of ",
                                                       var->DebugString(), ")"));
      }
    }
    STRATA_RETURN_IF_ERROR(var->PrepareForUpdate(ctx.allocator()));
    T* v = var->mutable_value()->data<T>();
    const T* u = updates.data<T>();
    for (size_t i = 0; i < idx.size(); ++i) {
      T* row = v + idx[i] * inner;
      const T* from = scalar ? u : u + static_cast<int64_t>(i) * inner;
      const int64_t step = scalar ? 0 : 1;
      for (int64_t k = 0; k < inner; ++k) {
        if constexpr (kKind == ScatterKind::kAdd) {
          row[k] += from[k * step];
        } else if constexpr (kKind == ScatterKind::kSub) {
          row[k] -= from[k * step];
        } else {
          row[k] = from[k * step];
        }
      }
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
#define REGISTER_SCATTER(T)                                                                 \
  STRATA_REGISTER_KERNEL(                                                                   \
      KernelBuilder("ResourceScatterAdd").Device(kDeviceCpu).TypeConstraint<T>("dtype"),    \
      ResourceScatterUpdateOp<T, ScatterKind::kAdd>);                                       \
  STRATA_REGISTER_KERNEL(                                                                   \
      KernelBuilder("ResourceScatterSub").Device(kDeviceCpu).TypeConstraint<T>("dtype"),    \
      ResourceScatterUpdateOp<T, ScatterKind::kSub>);                                       \
  STRATA_REGISTER_KERNEL(                                                                   \
      KernelBuilder("ResourceScatterUpdate").Device(kDeviceCpu).TypeConstraint<T>("dtype"), \
      ResourceScatterUpdateOp<T, ScatterKind::kUpdate>)
REGISTER_SCATTER(float);
REGISTER_SCATTER(double);
REGISTER_SCATTER(int32_t);
REGISTER_SCATTER(int64_t);
#undef REGISTER_SCATTER

}  // namespace
}  // namespace strata
