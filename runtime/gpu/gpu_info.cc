#include "runtime/gpu/gpu_info.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/gpu/cuda_status.h"

namespace strata {

GpuCount CountGpus() {
  GpuCount out;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // The runtime reports a missing driver or device as an error; for
    // discovery that simply means no GPU. Clear it so later calls on this
    // thread do not see it as theirs.
    cudaGetLastError();
    out.why_none = absl::StrCat(cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
    return out;
  }
  out.count = n;
  if (n == 0) out.why_none = "0 devices";
  return out;
}

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  std::vector<GpuInfo> out;
  const GpuCount c = CountGpus();
  if (c.count == 0) return out;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  for (int i = 0; i < c.count; ++i) {
    GpuInfo g;
    g.ordinal = i;
    cudaDeviceProp prop;
    absl::Status s = CudaStatus(cudaGetDeviceProperties(&prop, i),
                                absl::StrCat("cudaGetDeviceProperties(", i, ")"));
    if (!s.ok()) return s;
    g.name = prop.name;
    g.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.compute_major = prop.major;
    g.compute_minor = prop.minor;
    g.multiprocessors = prop.multiProcessorCount;
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) g.pci_bus_id = bus;
    // Free memory needs the device's context; making it current creates it
    // (once per process, as any use of the GPU would).
    s = CudaStatus(cudaSetDevice(i), absl::StrCat("cudaSetDevice(", i, ")"));
    if (!s.ok()) return s;
    size_t free_bytes = 0, total = 0;
    s = CudaStatus(cudaMemGetInfo(&free_bytes, &total), absl::StrCat("cudaMemGetInfo on GPU ", i));
    if (!s.ok()) return s;
    g.free_bytes = static_cast<int64_t>(free_bytes);
    out.push_back(std::move(g));
  }
  cudaSetDevice(previous);
  return out;
}

absl::Status RequireGpus(int n) {
  const GpuCount c = CountGpus();
  if (c.count == 0 && n > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no GPU: cudaGetDeviceCount said ", c.why_none));
  }
  if (c.count < n) {
    return absl::FailedPreconditionError(
        absl::StrCat(n, " GPUs needed, this machine has ", c.count));
  }
  return absl::OkStatus();
}

}  // namespace strata
