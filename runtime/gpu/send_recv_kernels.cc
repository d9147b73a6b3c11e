// _Send and _Recv for GPU partitions: the device-neutral SendOp and RecvOp
// (kernels/send_recv_ops.h). The rendezvous (runtime/local_rendezvous.h, given
// the devices) copies a value between host and device memory on the devices'
// copy streams. No CUDA here, so the session's CPU/GPU path is also tested
// with a stand-in GPU device (session_gpu_path_test).
#include "kernels/kernel_registry.h"
#include "kernels/send_recv_ops.h"

namespace strata {
namespace {

STRATA_REGISTER_KERNEL(KernelBuilder("_Send").Device(kDeviceGpu), SendOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_Recv").Device(kDeviceGpu), RecvOp);

}  // namespace
}  // namespace strata
