// GatherV2 (an embedding lookup) and UnsortedSegmentSum (its gradient's
// scatter-add) on the CPU. An index out of range is InvalidArgument naming
// it and its position, as TensorFlow's CPU kernels do, never a read or
// write outside the tensors.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

absl::StatusOr<int64_t> OneValue(const Tensor& t, const char* what) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntTensorValues(t, what));
  if (v.size() != 1) return absl::InvalidArgumentError(absl::StrCat(what, " must be one value, got ", v.size()));
  return v[0];
}

class GatherV2Op : public OpKernel {
 public:
  explicit GatherV2Op(OpKernelConstruction& c) : OpKernel(c) {
    int64_t batch_dims = 0;
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("batch_dims", &batch_dims));
    if (batch_dims != 0) {
      c.SetStatus(absl::InvalidArgumentError(absl::StrCat("GatherV2 batch_dims ", batch_dims, " is not supported")));
    }
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(int64_t axis, OneValue(ctx.input(2), "GatherV2 axis"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_shape, GatherOutputShape(params.shape(), indices.shape(), axis));
    STRATA_ASSIGN_OR_RETURN(TensorShape full, out_shape.AsTensorShape());
    if (axis < 0) axis += params.dims();
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= params.dim_size(d);
    for (int d = static_cast<int>(axis) + 1; d < params.dims(); ++d) inner *= params.dim_size(d);
    const int64_t n = params.dim_size(static_cast<int>(axis));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> idx, IntTensorValues(indices, "GatherV2 indices"));
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat("GatherV2 indices[", i, "] = ", idx[i], " is not in [0, ", n, ")"));
      }
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, full, &out));
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
