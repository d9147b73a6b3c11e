// The collective ops' kernels on GPU devices: the CPU's CollectiveOpKernel
// (kernels/collective_op_kernel.h), same attrs, inputs and validation; the
// step's CollectiveExecutor on GPU devices is NcclCollectiveExecutor
// (runtime/collective/nccl/), which moves the device buffers with NCCL. The
// int32 key inputs live in host memory on a GPU device (kernels/device_base.h
// LivesInHostMemory), so the kernel reads them directly; the data tensor is in
// device memory and only handed on.
//
// Registered for T in {float, half, double, int64}: int32 tensors live in
// host memory on GPU devices, and NCCL has no bool, so those collectives stay
// on CPU devices. CollectiveBcastRecvV2 is registered for Tshape = int32 only:
// an int64 shape would live in device memory, out of the kernel's reach.
#include "kernels/collective_op_kernel.h"
#include "kernels/device_base.h"
#include "kernels/kernel_registry.h"

namespace strata {
namespace {

#define STRATA_REGISTER_GPU_COLLECTIVES(T)                                     \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceV2")                   \
                             .Device(kDeviceGpu)                               \
                             .TypeConstraint("T", T),                          \
                         CollectiveKernel<CollectiveType::kAllReduce>);        \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveGatherV2")                   \
                             .Device(kDeviceGpu)                               \
                             .TypeConstraint("T", T),                          \
                         CollectiveKernel<CollectiveType::kAllGather>);        \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceScatterV2")            \
                             .Device(kDeviceGpu)                               \
                             .TypeConstraint("T", T),                          \
                         CollectiveKernel<CollectiveType::kReduceScatter>);    \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveBcastSendV2")                \
                             .Device(kDeviceGpu)                               \
                             .TypeConstraint("T", T),                          \
                         CollectiveKernel<CollectiveType::kBroadcastSend>);    \
  STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveBcastRecvV2")                \
                             .Device(kDeviceGpu)                               \
                             .TypeConstraint("T", T)                           \
                             .TypeConstraint("Tshape", DT_INT32),              \
                         CollectiveKernel<CollectiveType::kBroadcastRecv>)

STRATA_REGISTER_GPU_COLLECTIVES(DT_FLOAT);
STRATA_REGISTER_GPU_COLLECTIVES(DT_HALF);
STRATA_REGISTER_GPU_COLLECTIVES(DT_DOUBLE);
STRATA_REGISTER_GPU_COLLECTIVES(DT_INT64);

} // namespace
} // namespace strata
