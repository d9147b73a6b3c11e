// GPU kernels for the array and core ops a training step runs: Const,
// Identity, NoOp, Reshape, Shape, Size, Fill, ZerosLike, OnesLike,
// BroadcastTo and Range. Shapes are int32 tensors in host memory on GPU devices, so
// these read them directly; an int64 shape tensor (device memory) is read
// back with a synchronous copy. Kernels whose tensors all live in host memory
// (int32 Fill, int32 ZerosLike) compute on the host.
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/call_frame_kernels.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/shape_change_kernels.h"

namespace strata {
namespace gpu {
namespace {

// `t` in host memory (itself, or a synchronous copy of a device tensor).
absl::StatusOr<Tensor> OnHostCopy(const OpKernelContext& ctx, const Tensor& t) {
  if (OnHost(ctx, t.dtype())) return t;
  Tensor host(t.dtype(), t.shape());
  STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, t, &host));
  return host;
}

// The value of attr 'value' placed where its dtype lives on this device (a
// one-time copy at construction).
class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction& c) : OpKernel(c) {
    auto it = c.def().attr().find("value");
    if (it == c.def().attr().end() || it->second.value_case() != AttrValue::kTensor) {
      c.SetStatus(absl::InvalidArgumentError("attr 'value' is missing or not a tensor"));
      return;
    }
    auto t = Tensor::FromProto(it->second.tensor(), c.device()->host_allocator());
    if (!t.ok()) {
      c.SetStatus(AnnotateStatus(t.status(), "attr 'value': "));
      return;
    }
    if (t->dtype() != output_type(0)) {
      c.SetStatus(absl::InvalidArgumentError(absl::StrCat("attr 'value' holds ", DataTypeString(t->dtype()),
                                                          " but attr 'dtype' is ", DataTypeString(output_type(0)))));
      return;
    }
    if (LivesInHostMemory(c.device()->device_type(), t->dtype())) {
      value_ = *std::move(t);
      return;
    }
    const GpuDeviceContext* g = c.device()->gpu_context();
    if (g == nullptr) {
      c.SetStatus(absl::FailedPreconditionError(absl::StrCat("Const: device ", c.device()->name(), " has no GPU stream")));
      return;
    }
    auto d = Tensor::Allocate(c.device()->allocator(), t->dtype(), t->shape());
    if (!d.ok()) {
      c.SetStatus(AnnotateStatus(d.status(), "Const: "));
      return;
    }
    if (t->TotalBytes() > 0) {
      cudaStream_t s = static_cast<cudaStream_t>(g->stream);
      absl::Status st = CudaStatus(
          cudaMemcpyAsync(d->raw_data(), t->raw_data(), t->TotalBytes(), cudaMemcpyHostToDevice, s), "Const copy");
      if (st.ok()) st = CudaStatus(cudaStreamSynchronize(s), "Const copy");
      if (!st.ok()) {
        c.SetStatus(st);
        return;
      }
    }
    value_ = *std::move(d);
  }
  // The value is made once, at construction.
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, value_);
    return absl::OkStatus();
  }

 private:
  Tensor value_;
};

class IdentityOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, ctx.input(0));
    return absl::OkStatus();
  }
};

class NoOpOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
};

class ReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  // An int64 shape is copied to the host synchronously.
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    if (ctx.input(1).dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reshape shape must be 1-D, got shape ", ctx.input(1).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(Tensor shape, OnHostCopy(ctx, ctx.input(1)));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> requested, IntTensorValues(shape, "shape"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out, ReshapeOutputShape(ctx.input(0).shape(), requested));
    STRATA_ASSIGN_OR_RETURN(TensorShape full, out.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(Tensor t, ctx.input(0).Reshaped(full));
    ctx.set_output(0, std::move(t));
    return absl::OkStatus();
  }
};

// Writes `values` (int64) into output 0 as its dtype (int32 checked), on the
// host or copied to the device.
absl::Status WriteIndexOutput(OpKernelContext& ctx, const TensorShape& shape, const std::vector<int64_t>& values,
                              const char* op) {
  const DataType dt = ctx.op_kernel().output_type(0);
  Tensor host(dt, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dt == DT_INT32) {
      if (values[i] > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, " has out_type int32 but a value is ", values[i]));
      }
      host.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    } else {
      host.data<int64_t>()[i] = values[i];
    }
  }
  Tensor* out;
  STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, shape, &out));
  if (OnHost(ctx, dt)) {
    if (host.TotalBytes() > 0) std::memcpy(out->raw_data(), host.raw_data(), host.TotalBytes());
    return absl::OkStatus();
  }
  return CopyHostToDevice(ctx, host, out);
}

class ShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  // An int64 result is copied from a pageable host temporary.
  bool IsCaptureSafe() const override { return output_type(0) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const TensorShape& s = ctx.input(0).shape();
    std::vector<int64_t> dims(s.dim_sizes().begin(), s.dim_sizes().end());
    return WriteIndexOutput(ctx, TensorShape{s.dims()}, dims, "Shape");
  }
};

class SizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return output_type(0) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    return WriteIndexOutput(ctx, TensorShape(), {ctx.input(0).NumElements()}, "Size");
  }
};

// Fills `out` (in the memory of its dtype) with the element at `value`, which
// is in the same memory.
absl::Status FillWith(OpKernelContext& ctx, const void* value, Tensor* out) {
  const size_t esize = DataTypeSize(out->dtype());
  if (OnHost(ctx, out->dtype())) {
    char* dst = static_cast<char*>(out->raw_data());
    for (int64_t i = 0; i < out->NumElements(); ++i) std::memcpy(dst + i * esize, value, esize);
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
  return CudaStatus(LaunchFill(static_cast<int>(esize), value, out->raw_data(), out->NumElements(), s), "Fill");
}

class FillOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(0) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& value = ctx.input(1);
    if (value.dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Fill value must be a scalar, got shape ", value.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(Tensor dims, OnHostCopy(ctx, ctx.input(0)));
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(dims, "Fill dims"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, shape, &out));
    return FillWith(ctx, value.raw_data(), out);
  }
};

// ZerosLike / OnesLike: zero bits are zero in every dtype; one is written as
// its bit pattern into a device scalar first.
template <bool kOne>
class ConstantLikeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const DataType dt = in.dtype();
    Tensor* out;
    if (OnHost(ctx, dt)) {
      STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, in.shape(), &out));
    } else {
      STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, in.shape(), &out));
    }
    if (!kOne) {
      if (out->TotalBytes() == 0) return absl::OkStatus();
      if (OnHost(ctx, dt)) {
        std::memset(out->raw_data(), 0, out->TotalBytes());
        return absl::OkStatus();
      }
      STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
      return CudaStatus(cudaMemsetAsync(out->raw_data(), 0, out->TotalBytes(), s), "ZerosLike");
    }
    // Pinned (the device's host allocator), so a recorded copy can read it.
    STRATA_ASSIGN_OR_RETURN(Tensor one_host, Tensor::Allocate(ctx.device()->host_allocator(), dt, TensorShape()));
    STRATA_RETURN_IF_ERROR(OneBits(dt, one_host.raw_data()));
    if (OnHost(ctx, dt)) return FillWith(ctx, one_host.raw_data(), out);
    Tensor one;
    STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, dt, TensorShape(), &one));
    STRATA_RETURN_IF_ERROR(CopyHostToDevice(ctx, one_host, &one));
    return FillWith(ctx, one.raw_data(), out);
  }

 private:
  static absl::Status OneBits(DataType dt, void* dst) {
    auto put = [dst](auto v) {
      std::memcpy(dst, &v, sizeof(v));
      return absl::OkStatus();
    };
    switch (dt) {
      case DT_FLOAT: return put(1.0f);
      case DT_DOUBLE: return put(1.0);
      case DT_HALF: return put(uint16_t{0x3c00});
      case DT_BFLOAT16: return put(uint16_t{0x3f80});
      case DT_BOOL: return put(true);
      case DT_INT32: return put(int32_t{1});
      case DT_INT64: return put(int64_t{1});
      default:
        return absl::InvalidArgumentError(absl::StrCat("OnesLike: no GPU kernel for ", DataTypeString(dt)));
    }
  }
};

class BroadcastToOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(Tensor shape_t, OnHostCopy(ctx, ctx.input(1)));
    STRATA_ASSIGN_OR_RETURN(TensorShape target, ShapeFromShapeTensor(shape_t, "BroadcastTo shape"));
    if (in.dims() > target.dims()) {
      return absl::InvalidArgumentError(absl::StrCat("BroadcastTo: input ", in.shape().DebugString(),
                                                     " has more dims than the target ", target.DebugString()));
    }
    const int pad = target.dims() - in.dims();
    for (int i = 0; i < in.dims(); ++i) {
      if (in.dim_size(i) != 1 && in.dim_size(i) != target.dim_size(pad + i)) {
        return absl::InvalidArgumentError(absl::StrCat("BroadcastTo: input ", in.shape().DebugString(),
                                                       " is not broadcastable to ", target.DebugString()));
      }
    }
    if (in.shape() == target) {
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    // Collapse adjacent target dims that are all broadcast or all copied.
    StridedShape s;
    s.rank = 0;
    int64_t in_stride = 1;
    std::vector<int64_t> strides(target.dims(), 0);
    for (int i = in.dims() - 1; i >= 0; --i) {
      if (in.dim_size(i) != 1) strides[pad + i] = in_stride;
      in_stride *= in.dim_size(i);
    }
    int prev_kind = -1;
    for (int d = 0; d < target.dims(); ++d) {
      const int64_t size = target.dim_size(d);
      if (size == 1) continue;
      const int kind = strides[d] != 0;
      if (kind == prev_kind) {
        s.dims[s.rank - 1] *= size;
        if (kind) s.x_strides[s.rank - 1] = strides[d];
      } else {
        if (s.rank == kMaxDims) return absl::InvalidArgumentError("BroadcastTo: too many alternating dims for the GPU");
        s.dims[s.rank] = size;
        s.x_strides[s.rank] = strides[d];
        ++s.rank;
        prev_kind = kind;
      }
    }
    if (s.rank == 0) {
      s.rank = 1;
      s.dims[0] = 1;
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, target, &out));
    const size_t esize = DataTypeSize(in.dtype());
    if (OnHost(ctx, in.dtype())) {
      const char* src = static_cast<const char*>(in.raw_data());
      char* dst = static_cast<char*>(out->raw_data());
      for (int64_t i = 0; i < out->NumElements(); ++i) {
        int64_t r = i, off = 0;
        for (int d = s.rank - 1; d >= 0; --d) {
          off += (r % s.dims[d]) * s.x_strides[d];
          r /= s.dims[d];
        }
        std::memcpy(dst + i * esize, src + off * esize, esize);
      }
      return absl::OkStatus();
    }
    STRATA_ASSIGN_OR_RETURN(cudaStream_t st, Stream(ctx));
    return CudaStatus(
        LaunchBroadcastCopy(static_cast<int>(esize), in.raw_data(), out->raw_data(), s, out->NumElements(), st),
        "BroadcastTo");
  }
};

// Range: start, limit and delta are scalars, read on the host (int32 lives
// there; the others are copied back synchronously). The sequence is written
// on the host as the CPU kernel writes it, then copied into device memory
// from a pageable buffer (staged before the copy call returns): a range is an
// index vector, small beside what it indexes.
class RangeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(0) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor args[3];
    for (int i = 0; i < 3; ++i) {
      if (ctx.input(i).dims() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Range start, limit and delta must be scalars, input ", i, " has shape ",
                         ctx.input(i).shape().DebugString()));
      }
      STRATA_ASSIGN_OR_RETURN(args[i], OnHostCopy(ctx, ctx.input(i)));
    }
    switch (input_type(0)) {
      case DT_FLOAT:
        return Write<float>(ctx, args);
      case DT_DOUBLE:
        return Write<double>(ctx, args);
      case DT_INT32:
        return Write<int32_t>(ctx, args);
      case DT_INT64:
        return Write<int64_t>(ctx, args);
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Range: unsupported type ", DataTypeString(input_type(0))));
    }
  }

 private:
  template <typename T>
  static absl::Status Write(OpKernelContext& ctx, const Tensor* args) {
    const T start = *args[0].data<T>(), limit = *args[1].data<T>(), delta = *args[2].data<T>();
    absl::StatusOr<int64_t> n =
        std::is_integral<T>::value
            ? RangeLength(static_cast<int64_t>(start), static_cast<int64_t>(limit),
                          static_cast<int64_t>(delta))
            : RangeLength(static_cast<double>(start), static_cast<double>(limit),
                          static_cast<double>(delta));
    if (!n.ok()) return n.status();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, TensorShape{*n}, &out));
    const bool host = OnHost(ctx, out->dtype());
    Tensor staged = host ? *out : Tensor(out->dtype(), out->shape());
    T* o = staged.data<T>();
    for (int64_t i = 0; i < *n; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return host ? absl::OkStatus() : CopyHostToDevice(ctx, staged, out);
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Const").Device(kDeviceGpu), ConstOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Identity").Device(kDeviceGpu), IdentityOp);
STRATA_REGISTER_KERNEL(KernelBuilder("StopGradient").Device(kDeviceGpu), IdentityOp);
STRATA_REGISTER_KERNEL(KernelBuilder("NoOp").Device(kDeviceGpu), NoOpOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceArg").Device(kDeviceGpu), ArgOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceRetval").Device(kDeviceGpu), RetvalOp);
// ExpandDims and Squeeze: kernels/shape_change_kernels.h.
class ExpandDimsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(Tensor dim, OnHostCopy(ctx, ctx.input(1)));  // int64 lives on the device
    return ExpandDimsCompute(ctx, dim);
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Reshape").Device(kDeviceGpu), ReshapeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("ExpandDims").Device(kDeviceGpu), ExpandDimsOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Squeeze").Device(kDeviceGpu), SqueezeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Shape").Device(kDeviceGpu), ShapeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Size").Device(kDeviceGpu), SizeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Fill").Device(kDeviceGpu), FillOp);
STRATA_REGISTER_KERNEL(KernelBuilder("ZerosLike").Device(kDeviceGpu), ConstantLikeOp<false>);
STRATA_REGISTER_KERNEL(KernelBuilder("OnesLike").Device(kDeviceGpu), ConstantLikeOp<true>);
STRATA_REGISTER_KERNEL(KernelBuilder("BroadcastTo").Device(kDeviceGpu), BroadcastToOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Range").Device(kDeviceGpu), RangeOp);

}  // namespace
}  // namespace gpu
}  // namespace strata
