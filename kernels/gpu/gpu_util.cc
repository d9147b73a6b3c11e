#include "kernels/gpu/gpu_util.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {
namespace gpu {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", cudaGetErrorName(err), ": ",
                                          cudaGetErrorString(err)));
}

absl::StatusOr<const GpuDeviceContext*> Context(const OpKernelContext& ctx) {
  const GpuDeviceContext* g = ctx.device()->gpu_context();
  if (g == nullptr || g->stream == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        ctx.op_kernel().type_string(), ": GPU kernel run on device ", ctx.device()->name(),
        ", which has no GPU stream"));
  }
  return g;
}

absl::StatusOr<cudaStream_t> Stream(const OpKernelContext& ctx) {
  STRATA_ASSIGN_OR_RETURN(const GpuDeviceContext* g, Context(ctx));
  return static_cast<cudaStream_t>(g->stream);
}

absl::StatusOr<ElemType> ToElemType(DataType dt) {
  switch (dt) {
    case DT_FLOAT: return ElemType::kFloat;
    case DT_DOUBLE: return ElemType::kDouble;
    case DT_HALF: return ElemType::kHalf;
    case DT_BFLOAT16: return ElemType::kBFloat16;
    case DT_INT32: return ElemType::kInt32;
    case DT_INT64: return ElemType::kInt64;
    case DT_BOOL: return ElemType::kBool;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", DataTypeString(dt), " has no GPU kernels"));
  }
}

bool OnHost(const OpKernelContext& ctx, DataType dt) {
  return LivesInHostMemory(ctx.device()->device_type(), dt);
}

absl::Status AllocateOutput(OpKernelContext& ctx, int i, const TensorShape& shape, Tensor** out) {
  const DataType dt = ctx.op_kernel().output_type(i);
  if (!OnHost(ctx, dt) || ctx.device()->host_allocator() == ctx.allocator()) {
    return ctx.allocate_output(i, shape, out);
  }
  auto t = Tensor::Allocate(ctx.device()->host_allocator(), dt, shape);
  if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat("output ", i, ": "));
  ctx.set_output(i, *std::move(t));
  *out = ctx.mutable_output(i);
  return absl::OkStatus();
}

absl::Status AllocateDeviceTemp(OpKernelContext& ctx, DataType dt, const TensorShape& shape,
                                Tensor* out) {
  return ctx.allocate_temp(dt, shape, out);
}

absl::Status CopyHostToDevice(const OpKernelContext& ctx, const Tensor& host, Tensor* device) {
  if (host.TotalBytes() == 0) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
  const void* src = host.raw_data();
  // From pinned memory the DMA reads the source when the stream reaches the
  // copy, after this returns; by then the caller may have dropped `host` and
  // the pinned pool handed its bytes to the next int32 tensor (int32 lives in
  // pinned host memory on a GPU device). So a pinned source is first copied
  // to pageable memory, which CUDA stages before cudaMemcpyAsync returns.
  // Not while a step is recorded: a recording holds its host buffers for its
  // lifetime, and a capture may not copy from pageable memory.
  std::vector<char> staged;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamIsCapturing(s, &capturing), "cudaStreamIsCapturing"));
  if (capturing == cudaStreamCaptureStatusNone) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, src) != cudaSuccess) {
      cudaGetLastError();  // memory CUDA does not know: pageable
    } else if (attr.type == cudaMemoryTypeHost) {
      staged.assign(static_cast<const char*>(src),
                    static_cast<const char*>(src) + host.TotalBytes());
      src = staged.data();
    }
  }
  return CudaStatus(
      cudaMemcpyAsync(device->raw_data(), src, host.TotalBytes(), cudaMemcpyHostToDevice, s),
      "host-to-device copy");
}

absl::Status CopyDeviceToHostSync(const OpKernelContext& ctx, const Tensor& device, Tensor* host) {
  if (device.TotalBytes() == 0) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(host->raw_data(), device.raw_data(),
                                                    device.TotalBytes(), cudaMemcpyDeviceToHost, s),
                                    "device-to-host copy"));
  return CudaStatus(cudaStreamSynchronize(s), "device-to-host copy (stream synchronize)");
}

absl::Status PrepareVarForUpdate(OpKernelContext& ctx, Var& var) {
  STRATA_RETURN_IF_ERROR(var.CheckInitialized());
  Tensor* value = var.mutable_value();
  if (value->RefCountIsOne()) return absl::OkStatus();
  const bool host = OnHost(ctx, value->dtype());
  if (!host) {
    // A copy made while recording a step would replay from a buffer the
    // variable no longer holds: refuse, and the step runs unrecorded.
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamIsCapturing(s, &capturing), "cudaStreamIsCapturing"));
    if (capturing != cudaStreamCaptureStatusNone) {
      return absl::FailedPreconditionError(absl::StrCat(
          var.DebugString(), " is still read elsewhere in the step when updated, so the update would copy it"));
    }
  }
  Allocator* alloc = host ? ctx.device()->host_allocator() : ctx.allocator();
  auto copy = Tensor::Allocate(alloc, value->dtype(), value->shape());
  if (!copy.ok()) return AnnotateStatus(copy.status(), absl::StrCat("copy of ", var.DebugString(), ": "));
  if (value->TotalBytes() > 0) {
    if (host) {
      std::memcpy(copy->raw_data(), value->raw_data(), value->TotalBytes());
    } else {
      STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
      STRATA_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(copy->raw_data(), value->raw_data(), value->TotalBytes(),
                                                        cudaMemcpyDeviceToDevice, s),
                                        "variable copy-on-write"));
    }
  }
  var.set_value(*std::move(copy));
  return absl::OkStatus();
}

absl::StatusOr<int32_t> HostScalarInt32(const Tensor& t, const char* what) {
  if (t.dtype() != DT_INT32 || t.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be an int32 scalar, got ",
                                                   DataTypeString(t.dtype()), " ",
                                                   t.shape().DebugString()));
  }
  return *t.data<int32_t>();
}

}  // namespace gpu
}  // namespace strata
