// Glue shared by the GPU OpKernels (the .cc files of kernels/gpu): CUDA errors
// as Status, the device's stream and cuBLAS handle, outputs placed in the
// memory their dtype lives in on a GPU device (LivesInHostMemory), and the
// few host<->device copies kernels need.
//
//   STRATA_ASSIGN_OR_RETURN(cudaStream_t s, gpu::Stream(ctx));
//   Tensor* out;
//   STRATA_RETURN_IF_ERROR(gpu::AllocateOutput(ctx, 0, shape, &out));  // host for int32
//   STRATA_RETURN_IF_ERROR(gpu::CudaStatus(LaunchSomething(..., s), "Relu"));
//
// Kernels enqueue on the device's compute stream and return without
// synchronizing. The one exception is a result that must land in host memory
// from device memory (an int32 output computed from device data, such as
// ArgMax with output_type int32 or Cast to int32): CopyDeviceToHostSync waits
// for the stream, because the host tensor is read by the next op at once.
//
// Thread-safety: stateless functions. Ownership: none kept.
#ifndef STRATA_KERNELS_GPU_GPU_UTIL_H_
#define STRATA_KERNELS_GPU_GPU_UTIL_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "kernels/gpu/elem_type.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace gpu {

// OK for cudaSuccess, else Internal naming `what` and CUDA's message.
absl::Status CudaStatus(cudaError_t err, const char* what);

// The compute stream of the kernel's device; FailedPrecondition if the device
// is not a GPU device.
absl::StatusOr<cudaStream_t> Stream(const OpKernelContext& ctx);
absl::StatusOr<const GpuDeviceContext*> Context(const OpKernelContext& ctx);

// The element type of `dt` for launchers; InvalidArgument naming the op for
// a dtype GPU kernels do not handle.
absl::StatusOr<ElemType> ToElemType(DataType dt);

// True where the kernel's tensors of `dt` live in host memory on its device.
bool OnHost(const OpKernelContext& ctx, DataType dt);

// Output `i` in the memory its dtype lives in (the host allocator for int32
// on a GPU device, else the device allocator).
absl::Status AllocateOutput(OpKernelContext& ctx, int i, const TensorShape& shape, Tensor** out);
// A temporary of `dt` in device memory (even for int32).
absl::Status AllocateDeviceTemp(OpKernelContext& ctx, DataType dt, const TensorShape& shape,
                                Tensor* out);

// Enqueues a copy of `host` into the device tensor `device` (same byte size).
// The host bytes are staged before this returns (a pinned source is first
// copied to pageable memory), so `host` may be released or reused afterwards;
// while the stream is being captured, a pinned source is read at replay.
absl::Status CopyHostToDevice(const OpKernelContext& ctx, const Tensor& host, Tensor* device);
// Copies `device` into host tensor `host` and waits for the stream.
absl::Status CopyDeviceToHostSync(const OpKernelContext& ctx, const Tensor& device, Tensor* host);

// Makes `var`'s value buffer the variable's alone so the caller may update
// it in place: a no-op when nobody else holds it (the usual training step),
// else a stream-ordered copy into a fresh buffer of the kernel's device (host
// memory for dtypes that live there). Call with var.mu() held exclusively.
// FailedPrecondition if uninitialized; ResourceExhausted if the copy cannot
// be allocated.
absl::Status PrepareVarForUpdate(OpKernelContext& ctx, Var& var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu());

// The host scalar value of an int32 host tensor `t`, or InvalidArgument naming
// `what`.
absl::StatusOr<int32_t> HostScalarInt32(const Tensor& t, const char* what);

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_GPU_UTIL_H_
