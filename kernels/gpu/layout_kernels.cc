// Transpose, Slice, Tile, Split, SplitV and AddN on the GPU, on the
// elementwise launchers (cwise_gpu.h): Transpose, Slice and Split are
// strided copies (LaunchBroadcastCopy with the input's strides permuted, or
// offset to the part's start); Tile is one too, over [m0, d0, m1, d1, ...]
// with stride 0 on the repeat axes (that shape's row-major order is the
// tiled output's); AddN adds its inputs pairwise into the output. int32 tensors live in host
// memory, where the CPU kernels serve them (placement's host fallback).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
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
  STRATA_REGISTER_KERNEL(KernelBuilder("Tile").Device(kDeviceGpu).TypeConstraint("T", T), TileOp);   \
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
