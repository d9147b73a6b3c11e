// GPU discovery through the CUDA runtime: how many GPUs this process can use,
// and for each its name, memory and compute capability. A machine without a
// GPU (no driver, no device) has an empty list, not an error; code that needs
// a GPU asks RequireGpus for a Status that says why there is none.
//
//   absl::StatusOr<std::vector<GpuInfo>> gpus = ListGpus();
//   for (const GpuInfo& g : *gpus) printf("%d %s %lld\n", g.ordinal, g.name.c_str(), g.total_bytes);
//   STRATA_RETURN_IF_ERROR(RequireGpus(2));   // FailedPrecondition: "no GPU: cudaGetDeviceCount said ..."
//
// Only built with --config=cuda (the default build has no CUDA).
// Thread-safety: every function may be called concurrently; ListGpus briefly
// makes each GPU current on the calling thread and restores the previous one.
// Ownership: plain values.
#ifndef STRATA_RUNTIME_GPU_GPU_INFO_H_
#define STRATA_RUNTIME_GPU_GPU_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata {

struct GpuInfo {
  int ordinal = -1;              // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int64_t total_bytes = 0;       // device memory
  int64_t free_bytes = 0;        // free when asked
  int compute_major = 0;         // compute capability, e.g. 9.0
  int compute_minor = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;        // "0000:65:00.0"
};

// How many GPUs the CUDA runtime sees, and if none, why (the runtime's own
// words, e.g. "cudaErrorNoDevice (no CUDA-capable device is detected)").
struct GpuCount {
  int count = 0;
  std::string why_none;  // empty when count > 0
};
GpuCount CountGpus();

// Every GPU, by ordinal; empty where there is none. Internal if the runtime
// fails on a GPU it has just counted.
absl::StatusOr<std::vector<GpuInfo>> ListGpus();

// OK if at least `n` GPUs are present; otherwise FailedPrecondition, e.g.
// "no GPU: cudaGetDeviceCount said cudaErrorNoDevice (...)" or "2 GPUs
// needed, this machine has 1".
absl::Status RequireGpus(int n);

}  // namespace strata

#endif  // STRATA_RUNTIME_GPU_GPU_INFO_H_
