// The collective ops' kernels on CPU devices: CollectiveOpKernel
// (kernels/collective_op_kernel.h) for every T; the step's CollectiveExecutor
// moves the data.
#include "kernels/collective_op_kernel.h"
#include "kernels/kernel_registry.h"

namespace strata {
namespace {

STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceV2").Device(kDeviceCpu),
                       CollectiveKernel<CollectiveType::kAllReduce>);
STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveGatherV2").Device(kDeviceCpu),
                       CollectiveKernel<CollectiveType::kAllGather>);
STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveReduceScatterV2").Device(kDeviceCpu),
                       CollectiveKernel<CollectiveType::kReduceScatter>);
STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveBcastSendV2").Device(kDeviceCpu),
                       CollectiveKernel<CollectiveType::kBroadcastSend>);
STRATA_REGISTER_KERNEL(KernelBuilder("CollectiveBcastRecvV2").Device(kDeviceCpu),
                       CollectiveKernel<CollectiveType::kBroadcastRecv>);

}  // namespace
}  // namespace strata
