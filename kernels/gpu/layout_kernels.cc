// Transpose, Slice, StridedSlice(Grad), Tile, Split, SplitV and AddN on the
// GPU, on the elementwise launchers (cwise_gpu.h): Transpose, Slice,
// StridedSlice and Split are
// strided copies (LaunchBroadcastCopy with the input's strides permuted, or
// offset to the part's start); Tile is one too, over [m0, d0, m1, d1, ...]
// with stride 0 on the repeat axes (that shape's row-major order is the
// tiled output's); StridedSliceGrad zeroes its output and scatters dy
// (LaunchStridedScatter); AddN adds its inputs pairwise into the output. int32 tensors live in host
// memory, where the CPU kernels serve them (placement's host fallback).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/strided_slice.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

// Row-major strides of `dims`.
std::vector<int64_t> Strides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

// out[i] = in[base + sum_d coord_d(i) * strides[d]] over `out_dims`.
absl::Status StridedCopy(OpKernelContext& ctx, const Tensor& in, int64_t base, absl::Span<const int64_t> out_dims,
                         const std::vector<int64_t>& strides, Tensor* out, const char* what) {
  if (out->NumElements() == 0) return absl::OkStatus();
  if (out_dims.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", out_dims.size(), " exceeds the GPU limit ", kMaxDims));
  }
  StridedShape s;
  s.rank = static_cast<int>(out_dims.size());
  if (s.rank == 0) {
    s.rank = 1;
    s.dims[0] = 1;
    s.x_strides[0] = 0;
  }
  for (size_t d = 0; d < out_dims.size(); ++d) {
    s.dims[d] = out_dims[d];
    s.x_strides[d] = strides[d];
  }
  STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
  const int esize = static_cast<int>(DataTypeSize(in.dtype()));
  const char* src = static_cast<const char*>(in.raw_data()) + base * esize;
  return CudaStatus(LaunchBroadcastCopy(esize, src, out->raw_data(), s, out->NumElements(), stream), what);
}

// The values of int input `i` (int8, int32 or int64; read back from the
// device when it lives there).
absl::StatusOr<std::vector<int64_t>> HostIntValues(OpKernelContext& ctx, int i, const char* what) {
  Tensor host = ctx.input(i);
  if (!OnHost(ctx, host.dtype())) {
    host = Tensor(ctx.input(i).dtype(), ctx.input(i).shape());
    STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, ctx.input(i), &host));
  }
  if (host.dtype() == DT_INT8) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < host.NumElements(); ++k) v.push_back(host.data<int8_t>()[k]);
    return v;
  }
  return IntTensorValues(host, what);
}

class TileOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (ctx.input(1).dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("Tile multiples must be a vector, got shape ",
                                                     ctx.input(1).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> m, HostIntValues(ctx, 1, "Tile multiples"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, TileOutputShape(in.shape(), m));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const std::vector<int64_t> in_strides = Strides(in.shape().dim_sizes());
    std::vector<int64_t> dims, strides;
    for (int i = 0; i < in.dims(); ++i) {
      if (m[i] != 1) {
        dims.push_back(m[i]);
        strides.push_back(0);
      }
      dims.push_back(in.dim_size(i));
      strides.push_back(in_strides[i]);
    }
    return StridedCopy(ctx, in, 0, dims, strides, out, "Tile");
  }
};

// Split (split_dim, value) and SplitV (value, size_splits, split_dim).
template <bool kSizes>
class SplitOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return !kSizes || input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(kSizes ? 0 : 1);
    const Tensor& axis_t = ctx.input(kSizes ? 2 : 0);
    if (axis_t.dims() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("split_dim must be a scalar, got shape ",
                                                     axis_t.shape().DebugString()));
    }
    const int64_t axis_v = *axis_t.data<int32_t>();
    std::vector<int64_t> sizes;
    if (kSizes) {
      if (ctx.input(1).dims() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("SplitV size_splits must be a vector, got shape ",
                                                       ctx.input(1).shape().DebugString()));
      }
      STRATA_ASSIGN_OR_RETURN(sizes, HostIntValues(ctx, 1, "SplitV size_splits"));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<PartialTensorShape> shapes,
                            SplitOutputShapes(in.shape(), axis_v, num_outputs(), sizes));
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v, in.dims(), "split_dim"));
    const std::vector<int64_t> strides = Strides(in.shape().dim_sizes());
    int64_t offset = 0;
    for (int k = 0; k < num_outputs(); ++k) {
      STRATA_ASSIGN_OR_RETURN(TensorShape shape, shapes[k].AsTensorShape());
      Tensor* out;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(k, shape, &out));
      STRATA_RETURN_IF_ERROR(
          StridedCopy(ctx, in, offset * strides[axis], shape.dim_sizes(), strides, out, kSizes ? "SplitV" : "Split"));
      offset += shape.dim_size(axis);
    }
    return absl::OkStatus();
  }
};

class TransposeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    Tensor perm_host = ctx.input(1);
    if (!OnHost(ctx, perm_host.dtype())) {
      perm_host = Tensor(ctx.input(1).dtype(), ctx.input(1).shape());
      STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, ctx.input(1), &perm_host));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> perm_v, IntTensorValues(perm_host, "perm"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, TransposeOutputShape(in.shape(), perm_v));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(std::vector<int> perm, NormalizePermutation(perm_v, in.dims()));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const std::vector<int64_t> in_strides = Strides(in.shape().dim_sizes());
    std::vector<int64_t> strides(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) strides[d] = in_strides[perm[d]];
    return StridedCopy(ctx, in, 0, out_shape.dim_sizes(), strides, out, "Transpose");
  }
};

class SliceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    std::vector<int64_t> begin, size;
    for (int i = 1; i <= 2; ++i) {
      if (ctx.input(i).dims() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("Slice ", i == 1 ? "begin" : "size", " must be 1-D, got shape ",
                                                       ctx.input(i).shape().DebugString()));
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> v, HostIntValues(ctx, i, i == 1 ? "begin" : "size"));
      (i == 1 ? begin : size) = std::move(v);
    }
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, SliceOutputShape(in.shape(), begin, size));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    if (out_shape == in.shape()) {  // the whole input: share its buffer
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const std::vector<int64_t> strides = Strides(in.shape().dim_sizes());
    int64_t base = 0;
    for (size_t d = 0; d < begin.size(); ++d) base += begin[d] * strides[d];
    return StridedCopy(ctx, in, base, out_shape.dim_sizes(), strides, out, "Slice");
  }
};

// The plan of StridedSlice(Grad)'s spec (inputs first..first+2) over `full`.
absl::StatusOr<StridedSlicePlan> PlanOnDevice(OpKernelContext& ctx, int first, const TensorShape& full,
                                              const StridedSliceMasks& masks) {
  std::vector<int64_t> spec[3];
  const char* what[3] = {"StridedSlice begin", "StridedSlice end", "StridedSlice strides"};
  for (int k = 0; k < 3; ++k) {
    if (ctx.input(first + k).dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what[k], " must be 1-D, got shape ", ctx.input(first + k).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(spec[k], HostIntValues(ctx, first + k, what[k]));
  }
  return PlanStridedSlice(PartialTensorShape(full.dim_sizes()), spec[0], spec[1], spec[2], masks);
}

// The plan as strides over the processing shape (one dim per input dim,
// size-1 dims dropped): element offsets into the full tensor, and the base.
void PlanStrides(const StridedSlicePlan& plan, const TensorShape& full, std::vector<int64_t>* dims,
                 std::vector<int64_t>* strides, int64_t* base) {
  const std::vector<int64_t> full_strides = Strides(full.dim_sizes());
  *base = 0;
  for (int d = 0; d < full.dims(); ++d) {
    *base += plan.begin[d] * full_strides[d];
    if (plan.size[d] == 1) continue;
    dims->push_back(plan.size[d]);
    strides->push_back(plan.stride[d] * full_strides[d]);
  }
}

class StridedSliceOp : public OpKernel {
 public:
  explicit StridedSliceOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, ReadStridedSliceMasks(c, &masks_));
  }
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(StridedSlicePlan plan, PlanOnDevice(ctx, 1, in.shape(), masks_));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, plan.output.AsTensorShape());
    if (plan.whole) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, in.Reshaped(out_shape));
      ctx.set_output(0, std::move(t));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    std::vector<int64_t> dims, strides;
    int64_t base = 0;
    PlanStrides(plan, in.shape(), &dims, &strides, &base);
    return StridedCopy(ctx, in, base, dims, strides, out, "StridedSlice");
  }

 private:
  StridedSliceMasks masks_;
};

class StridedSliceGradOp : public OpKernel {
 public:
  explicit StridedSliceGradOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, ReadStridedSliceMasks(c, &masks_));
  }
  bool IsCaptureSafe() const override { return input_type(0) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    if (ctx.input(0).dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("StridedSliceGrad shape must be 1-D, got shape ",
                                                     ctx.input(0).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dims_v, HostIntValues(ctx, 0, "StridedSliceGrad shape"));
    auto shape_or = TensorShape::FromDims(dims_v);
    if (!shape_or.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("StridedSliceGrad shape is not a valid shape: ",
                                                     shape_or.status().message()));
    }
    const TensorShape shape = *shape_or;
    STRATA_ASSIGN_OR_RETURN(StridedSlicePlan plan, PlanOnDevice(ctx, 1, shape, masks_));
    const Tensor& dy = ctx.input(4);
    STRATA_RETURN_IF_ERROR(CheckStridedSliceGradDy(plan, shape, dy.shape()));
    if (plan.whole) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, dy.Reshaped(shape));
      ctx.set_output(0, std::move(t));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    STRATA_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(out->raw_data(), 0, out->TotalBytes(), stream), "StridedSliceGrad"));
    if (dy.NumElements() == 0) return absl::OkStatus();
    std::vector<int64_t> dims, strides;
    int64_t base = 0;
    PlanStrides(plan, shape, &dims, &strides, &base);
    if (dims.empty()) {
      dims.push_back(1);
      strides.push_back(0);
    }
    if (dims.size() > static_cast<size_t>(kMaxDims)) {
      return absl::InvalidArgumentError(
          absl::StrCat("StridedSliceGrad: rank ", dims.size(), " exceeds the GPU limit ", kMaxDims));
    }
    StridedShape s;
    s.rank = static_cast<int>(dims.size());
    const std::vector<int64_t> dy_strides = Strides(dims);
    for (int d = 0; d < s.rank; ++d) {
      s.dims[d] = dims[d];
      s.x_strides[d] = dy_strides[d];
      s.y_strides[d] = strides[d];
    }
    const int esize = static_cast<int>(DataTypeSize(dy.dtype()));
    char* dst = static_cast<char*>(out->raw_data()) + base * esize;
    return CudaStatus(LaunchStridedScatter(esize, dy.raw_data(), dst, s, dy.NumElements(), stream), "StridedSliceGrad");
  }

 private:
  StridedSliceMasks masks_;
};

// MatrixBandPart: num_lower/num_upper are read on the host (int64 ones
// from the device: not capture-safe).
class MatrixBandPartOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.dims() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("MatrixBandPart input must be at least 2-D, got shape ", in.shape().DebugString()));
    }
    for (int i = 1; i <= 2; ++i) {
      if (ctx.input(i).dims() != 0) {
        return absl::InvalidArgumentError(absl::StrCat("MatrixBandPart ", i == 1 ? "num_lower" : "num_upper",
                                                       " must be a scalar, got shape ",
                                                       ctx.input(i).shape().DebugString()));
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> lower, HostIntValues(ctx, 1, "MatrixBandPart num_lower"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> upper, HostIntValues(ctx, 2, "MatrixBandPart num_upper"));
    const int64_t m = in.dim_size(in.dims() - 2), n = in.dim_size(in.dims() - 1);
    STRATA_RETURN_IF_ERROR(CheckBandBounds(in.shape(), lower[0], upper[0]));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    return CudaStatus(LaunchMatrixBandPart(static_cast<int>(DataTypeSize(in.dtype())), in.raw_data(), out->raw_data(),
                                           in.NumElements(), m, n, lower[0], upper[0], stream),
                      "MatrixBandPart");
  }
};

class AddNOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& first = ctx.input(0);
    for (int i = 1; i < num_inputs(); ++i) {
      if (ctx.input(i).shape() != first.shape()) {
        return absl::InvalidArgumentError(absl::StrCat("AddN: input ", i, " has shape ", ctx.input(i).shape().DebugString(),
                                                       ", input 0 ", first.shape().DebugString()));
      }
    }
    if (num_inputs() == 1) {
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, first.shape(), &out));
    const int64_t n = first.NumElements();
    if (n == 0) return absl::OkStatus();
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(first.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    StridedShape s;  // the same shape on both sides
    s.rank = 1;
    s.dims[0] = n;
    s.x_strides[0] = 1;
    s.y_strides[0] = 1;
    // out = x0 + x1, then out += x_i: elementwise, so out may be an operand.
    STRATA_RETURN_IF_ERROR(CudaStatus(
        LaunchBinary(BinaryFn::kAdd, t, first.raw_data(), ctx.input(1).raw_data(), out->raw_data(), s, n, stream), "AddN"));
    for (int i = 2; i < num_inputs(); ++i) {
      STRATA_RETURN_IF_ERROR(CudaStatus(
          LaunchBinary(BinaryFn::kAdd, t, out->raw_data(), ctx.input(i).raw_data(), out->raw_data(), s, n, stream),
          "AddN"));
    }
    return absl::OkStatus();
  }
};

#define REGISTER_LAYOUT(T)                                                                         \
  STRATA_REGISTER_KERNEL(KernelBuilder("Transpose").Device(kDeviceGpu).TypeConstraint("T", T), \
                         TransposeOp);                                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Slice").Device(kDeviceGpu).TypeConstraint("T", T), SliceOp); \
  STRATA_REGISTER_KERNEL(KernelBuilder("StridedSlice").Device(kDeviceGpu).TypeConstraint("T", T),   \
                         StridedSliceOp);                                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("StridedSliceGrad").Device(kDeviceGpu).TypeConstraint("T", T), \
                         StridedSliceGradOp);                                                        \
  STRATA_REGISTER_KERNEL(KernelBuilder("Tile").Device(kDeviceGpu).TypeConstraint("T", T), TileOp);   \
  STRATA_REGISTER_KERNEL(KernelBuilder("MatrixBandPart").Device(kDeviceGpu).TypeConstraint("T", T),  \
                         MatrixBandPartOp);                                                          \
  STRATA_REGISTER_KERNEL(KernelBuilder("Split").Device(kDeviceGpu).TypeConstraint("T", T),          \
                         SplitOp<false>);                                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("SplitV").Device(kDeviceGpu).TypeConstraint("T", T), SplitOp<true>)
REGISTER_LAYOUT(DT_FLOAT);
REGISTER_LAYOUT(DT_DOUBLE);
REGISTER_LAYOUT(DT_HALF);
REGISTER_LAYOUT(DT_BFLOAT16);
REGISTER_LAYOUT(DT_INT64);
REGISTER_LAYOUT(DT_BOOL);
#undef REGISTER_LAYOUT

#define REGISTER_ADDN(T) \
  STRATA_REGISTER_KERNEL(KernelBuilder("AddN").Device(kDeviceGpu).TypeConstraint("T", T), AddNOp)
REGISTER_ADDN(DT_FLOAT);
REGISTER_ADDN(DT_DOUBLE);
REGISTER_ADDN(DT_HALF);
REGISTER_ADDN(DT_BFLOAT16);
REGISTER_ADDN(DT_INT64);
#undef REGISTER_ADDN

}  // namespace
}  // namespace gpu
}  // namespace strata
