// StridedSlice and StridedSliceGrad on the CPU (graph/ops/strided_slice.h).
// Both walk the plan's elements of the full-size tensor in row-major order:
// StridedSlice gathers them into its output, StridedSliceGrad scatters dy
// into zeros. The walk copies contiguous runs where the innermost dims are
// taken whole with stride 1, and single elements otherwise. Bytes only, so
// one kernel serves every dtype.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/strided_slice.h"
#include "kernels/cpu/array_copy.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

absl::StatusOr<std::vector<int64_t>> SpecVector(const Tensor& t, const char* what) {
  if (t.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("StridedSlice ", what, " must be 1-D, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT16) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < t.NumElements(); ++i) v.push_back(t.data<int16_t>()[i]);
    return v;
  }
  return IntTensorValues(t, what);
}

// Reads begin, end and strides (inputs first..first+2) and plans the slice
// of a tensor of shape `full`.
absl::StatusOr<StridedSlicePlan> PlanFromInputs(OpKernelContext& ctx, int first, const TensorShape& full,
                                                const StridedSliceMasks& masks) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> begin, SpecVector(ctx.input(first), "begin"));
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> end, SpecVector(ctx.input(first + 1), "end"));
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> strides, SpecVector(ctx.input(first + 2), "strides"));
  return PlanStridedSlice(PartialTensorShape(full.dim_sizes()), begin, end, strides, masks);
}

// Moves the plan's elements between `full` (the sliced tensor's layout) and
// `packed` (the slice, row-major): gather when kGather, else scatter.
template <bool kGather>
void StridedMove(const Eigen::ThreadPoolDevice& dev, const StridedSlicePlan& plan, const TensorShape& full,
                 size_t elem, char* full_data, char* packed) {
  const int rank = full.dims();
  if (rank == 0) {
    kGather ? std::memcpy(packed, full_data, elem) : std::memcpy(full_data, packed, elem);
    return;
  }
  const std::vector<int64_t> strides = array_copy::RowMajorStrides(full.dim_sizes());
  // The innermost dims taken whole (k+1..) are one contiguous block; dim k
  // joins it when its stride is 1, else its elements are `count` blocks
  // `step` apart.
  int k = rank - 1;
  while (k > 0 && plan.stride[k] == 1 && plan.begin[k] == 0 && plan.size[k] == full.dim_size(k)) --k;
  int64_t inner = 1;
  for (int i = k + 1; i < rank; ++i) inner *= plan.size[i];
  const bool joins = plan.stride[k] == 1;
  const int64_t run_elems = joins ? plan.size[k] * inner : inner;
  const int64_t count = joins ? 1 : plan.size[k];
  const int64_t step = plan.stride[k] * strides[k];
  int64_t base = 0;
  std::vector<int64_t> outer_dims, outer_strides;
  for (int i = 0; i < rank; ++i) base += plan.begin[i] * strides[i];
  for (int i = 0; i < k; ++i) {
    outer_dims.push_back(plan.size[i]);
    outer_strides.push_back(plan.stride[i] * strides[i]);
  }
  int64_t rows = 1;
  for (int64_t d : outer_dims) rows *= d;
  const size_t run_bytes = static_cast<size_t>(run_elems) * elem;
  const int64_t row_elems = run_elems * count;
  dev.parallelFor(rows, array_copy::CopyCost(row_elems * static_cast<int64_t>(elem)),
                  [&](Eigen::Index first, Eigen::Index last) {
                    array_copy::StridedWalker w(outer_dims, outer_strides, first, base);
                    for (Eigen::Index r = first; r < last; ++r, w.Next()) {
                      char* p = packed + r * row_elems * static_cast<int64_t>(elem);
                      int64_t off = w.offset();
                      for (int64_t j = 0; j < count; ++j, off += step, p += run_bytes) {
                        char* f = full_data + off * static_cast<int64_t>(elem);
                        kGather ? std::memcpy(p, f, run_bytes) : std::memcpy(f, p, run_bytes);
                      }
                    }
                  });
}

class StridedSliceOp : public OpKernel {
 public:
  explicit StridedSliceOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, ReadStridedSliceMasks(c, &masks_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(StridedSlicePlan plan, PlanFromInputs(ctx, 1, in.shape(), masks_));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, plan.output.AsTensorShape());
    if (plan.whole) {  // the input's elements in order: share its buffer
      STRATA_ASSIGN_OR_RETURN(Tensor t, in.Reshaped(out_shape));
      ctx.set_output(0, std::move(t));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    StridedMove<true>(ctx.eigen_cpu_device(), plan, in.shape(), DataTypeSize(in.dtype()),
                      static_cast<char*>(in.raw_data()), static_cast<char*>(out->raw_data()));
    return absl::OkStatus();
  }

 private:
  StridedSliceMasks masks_;
};

class StridedSliceGradOp : public OpKernel {
 public:
  explicit StridedSliceGradOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, ReadStridedSliceMasks(c, &masks_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(ctx.input(0), "StridedSliceGrad shape"));
    STRATA_ASSIGN_OR_RETURN(StridedSlicePlan plan, PlanFromInputs(ctx, 1, shape, masks_));
    const Tensor& dy = ctx.input(4);
    STRATA_RETURN_IF_ERROR(CheckStridedSliceGradDy(plan, shape, dy.shape()));
    if (plan.whole) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, dy.Reshaped(shape));
      ctx.set_output(0, std::move(t));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    std::memset(out->raw_data(), 0, out->TotalBytes());
    if (dy.NumElements() == 0) return absl::OkStatus();
    StridedMove<false>(ctx.eigen_cpu_device(), plan, shape, DataTypeSize(dy.dtype()),
                       static_cast<char*>(out->raw_data()), static_cast<char*>(dy.raw_data()));
    return absl::OkStatus();
  }

 private:
  StridedSliceMasks masks_;
};

STRATA_REGISTER_KERNEL(KernelBuilder("StridedSlice").Device(kDeviceCpu), StridedSliceOp);
STRATA_REGISTER_KERNEL(KernelBuilder("StridedSliceGrad").Device(kDeviceCpu), StridedSliceGradOp);

}  // namespace
}  // namespace strata
