// Transpose, Slice and AddN on the GPU, on the elementwise launchers
// (cwise_gpu.h): Transpose and Slice are strided copies (LaunchBroadcastCopy
// with the input's strides permuted, or offset to the slice's start); AddN
// adds its inputs pairwise into the output. int32 tensors live in host
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
      Tensor host = ctx.input(i);
      if (host.dims() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("Slice ", i == 1 ? "begin" : "size", " must be 1-D, got shape ",
                                                       host.shape().DebugString()));
      }
      if (!OnHost(ctx, host.dtype())) {
        host = Tensor(ctx.input(i).dtype(), ctx.input(i).shape());
        STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, ctx.input(i), &host));
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntTensorValues(host, i == 1 ? "begin" : "size"));
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
  STRATA_REGISTER_KERNEL(KernelBuilder("Slice").Device(kDeviceGpu).TypeConstraint("T", T), SliceOp)
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
