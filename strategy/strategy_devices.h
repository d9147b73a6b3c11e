// PrepareDevices: the devices of this process that a strategy trains on, GPUs
// included, and the NCCL collective executor for strategies whose replicas
// are GPUs. Used by the strategies' Create functions; a user never calls it.
//
//   DeviceOptions machine;                                // num_gpus 0: none unless named
//   STRATA_ASSIGN_OR_RETURN(PreparedDevices local,
//       PrepareDevices({"/gpu:0", "/gpu:1"}, machine, /*default_to_gpus=*/true));
//   local.devices;       // {".../device:GPU:0", ".../device:GPU:1"}
//   local.device_mgr;    // CPU:0, GPU:0, GPU:1: made here because GPUs are involved
//   STRATA_ASSIGN_OR_RETURN(GpuCollectives nccl, MakeGpuCollectives(*local.device_mgr,
//                                                                 local.devices, {}));
//
// CPU-only machines take the path they always took: no DeviceMgr is made
// (each session makes its own devices from the options). With GPUs the
// strategy owns the devices and its sessions share them
// (Strategy::session_options()), because the NCCL executor must use the very
// device objects (their compute streams) that run the step's kernels.
//
// GPU devices exist only in a --config=cuda build (//runtime/gpu:gpu_device,
// linked by //strategy under that config); asking for one elsewhere, or on a
// machine without one, is InvalidArgument naming the device spec and why.
//
// Thread-safety: plain functions; call from one thread per strategy.
// Ownership: the returned DeviceMgr and executor belong to the caller; the
// executor borrows the DeviceMgr's devices (destroy it first).
#ifndef STRATA_STRATEGY_STRATEGY_DEVICES_H_
#define STRATA_STRATEGY_STRATEGY_DEVICES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/collective.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/device.h"

namespace strata {
namespace distribute {

struct PreparedDevices {
  // The machine as given, with num_gpus set when a spec names a GPU (to
  // the highest ordinal named + 1) or when the default devices are GPUs.
  DeviceOptions options;
  // The specs resolved to full device names, in replica order.
  std::vector<std::string> devices;
  // The process's devices when GPUs are in play; nullptr on a CPU-only
  // machine (sessions then make their own devices from `options`).
  std::unique_ptr<DeviceMgr> device_mgr;
};

// Resolves `specs` ("/cpu:0", "/gpu:1", full names) against the machine:
// each must name exactly one device, none twice. Empty `specs`: every local
// GPU when `default_to_gpus` and there is one (a --config=cuda build on a
// machine with GPUs), else the first CPU. Errors: InvalidArgument naming an
// unknown, ambiguous, malformed or repeated device; a GPU that is not there
// is an unknown device too, with the reason ("strategy devices: unknown
// device '/gpu:0': requested /device:GPU:0 but this machine has no GPU
// (cudaGetDeviceCount said ...)", or "... built without CUDA").
absl::StatusOr<PreparedDevices> PrepareDevices(const std::vector<std::string>& specs,
                                               const DeviceOptions& machine, bool default_to_gpus);

// `specs` resolved against the full names `local` (the resolution rules and
// InvalidArgument errors above).
absl::StatusOr<std::vector<std::string>> ResolveDeviceSpecs(const std::vector<std::string>& specs,
                                                            const std::vector<std::string>& local);

// Whether every name (full or partial) names a GPU device; false for none.
bool AllGpus(const std::vector<std::string>& devices);
// Whether any name names a GPU device.
bool AnyGpu(const std::vector<std::string>& devices);

// InvalidArgument naming the devices when `devices` mixes GPUs and other
// devices: their collectives would meet CPU tensors and GPU tensors in one
// executor. `who` starts the message ("MirroredStrategy").
absl::Status CheckNotMixed(const std::string& who, const std::vector<std::string>& devices);

struct GpuCollectiveOptions {
  // This process among the workers (one worker: the defaults).
  int worker_rank = 0;
  int num_workers = 1;
  std::vector<std::string> worker_names;  // by rank, for errors
  // Carries the NCCL unique ids between workers (needed with several).
  KeyValueStore* store = nullptr;
  // Unique per run against one store (its keys are insert-once).
  std::string key_prefix = "nccl";
  // Called once with the error that broke the executor.
  std::function<void(const absl::Status&)> on_fatal_error;
};

struct GpuCollectives {
  std::unique_ptr<CollectiveExecutor> executor;
  // Breaks the executor from outside (the cluster lost a task): every NCCL
  // communicator is aborted and collectives fail with the status.
  std::function<void(const absl::Status&)> abort;
};

// An NcclCollectiveExecutor (runtime/collective/nccl/) over the GPU devices
// `devices` of `device_mgr`. FailedPrecondition in a binary built without
// CUDA; InvalidArgument for a device that is not a GPU of `device_mgr`.
// Touches no GPU: NCCL communicators are made by the first collective.
absl::StatusOr<GpuCollectives> MakeGpuCollectives(const DeviceMgr& device_mgr,
                                                  const std::vector<std::string>& devices,
                                                  GpuCollectiveOptions options);

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_STRATEGY_DEVICES_H_
