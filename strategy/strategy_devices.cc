#include "strategy/strategy_devices.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "runtime/device_name.h"

#if STRATA_WITH_CUDA
#include "runtime/collective/nccl/nccl_collective_executor.h"
#endif

namespace strata {
namespace distribute {

namespace {

bool IsGpu(const std::string& name) {
  absl::StatusOr<DeviceName> n = DeviceName::Parse(name);
  return n.ok() && n->has_type && n->type == kDeviceGpu;
}

std::vector<std::string> CpuNames(const DeviceOptions& machine) {
  std::vector<std::string> out;
  for (int i = 0; i < machine.num_cpu_devices; ++i) {
    out.push_back(DeviceName::Full(machine.job, machine.replica, machine.task, kDeviceCpu, i).ToString());
  }
  return out;
}

}  // namespace

bool AllGpus(const std::vector<std::string>& devices) {
  return !devices.empty() && std::all_of(devices.begin(), devices.end(), IsGpu);
}

bool AnyGpu(const std::vector<std::string>& devices) {
  return std::any_of(devices.begin(), devices.end(), IsGpu);
}

absl::Status CheckNotMixed(const std::string& who, const std::vector<std::string>& devices) {
  if (!AnyGpu(devices) || AllGpus(devices)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      who, ": the replicas' devices mix GPUs and other devices (", absl::StrJoin(devices, ", "),
      "); give only GPUs (their gradients are all-reduced with NCCL) or only CPUs"));
}

absl::StatusOr<std::vector<std::string>> ResolveDeviceSpecs(const std::vector<std::string>& specs,
                                                            const std::vector<std::string>& local) {
  std::vector<DeviceName> parsed_local;
  for (const std::string& d : local) {
    STRATA_ASSIGN_OR_RETURN(DeviceName n, DeviceName::Parse(d));
    parsed_local.push_back(n);
  }
  const std::string listing = absl::StrJoin(local, ", ");
  std::vector<std::string> out;
  absl::flat_hash_map<std::string, std::string> spec_of;  // full name -> the spec naming it
  for (const std::string& spec : specs) {
    absl::StatusOr<DeviceName> n = DeviceName::Parse(spec);
    if (!n.ok()) return AnnotateStatus(n.status(), "strategy devices: ");
    if (!n->has_type || !n->has_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy devices: '", spec, "' does not name one device (give a type and an id, e.g. "
          "\"/cpu:0\" or \"/device:GPU:1\")"));
    }
    std::vector<std::string> matches;
    for (size_t i = 0; i < local.size(); ++i) {
      if (n->Matches(parsed_local[i])) matches.push_back(local[i]);
    }
    if (matches.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy devices: unknown device '", spec,
                                                     "'; this machine has ", listing));
    }
    if (matches.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("strategy devices: '", spec, "' matches ",
                                                     matches.size(), " devices (",
                                                     absl::StrJoin(matches, ", "), "); name one"));
    }
    auto [it, inserted] = spec_of.emplace(matches[0], spec);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("strategy devices: '", spec, "' and '",
                                                     it->second, "' are the same device ",
                                                     matches[0]));
    }
    out.push_back(matches[0]);
  }
  return out;
}

absl::StatusOr<PreparedDevices> PrepareDevices(const std::vector<std::string>& specs_in,
                                               const DeviceOptions& machine, bool default_to_gpus) {
  PreparedDevices out;
  out.options = machine;
  std::vector<std::string> specs = specs_in;
  // The GPUs the specs name (malformed specs are left to the resolution).
  int max_gpu = -1;
  std::string max_gpu_spec;  // the spec of the highest ordinal named
  for (const std::string& spec : specs) {
    absl::StatusOr<DeviceName> n = DeviceName::Parse(spec);
    if (!n.ok() || !n->has_type || n->type != kDeviceGpu) continue;
    if (n->has_id && n->id > max_gpu) {
      max_gpu = n->id;
      max_gpu_spec = spec;
    }
  }
  // A GPU that is not there is an unknown device, as a CPU would be, with
  // the runtime's reason (no GPU, too few, a build without CUDA).
  auto missing_gpu = [&](const absl::Status& why) {
    return absl::InvalidArgumentError(absl::StrCat("strategy devices: unknown device '",
                                                   max_gpu_spec, "': ", why.message()));
  };
  // Only the GPUs named are made when the machine does not say: a GPU costs
  // a context and memory. Without specs the default may be every GPU.
  if (out.options.num_gpus == 0 && max_gpu >= 0) out.options.num_gpus = max_gpu + 1;
  if (out.options.num_gpus == 0 && specs.empty() && default_to_gpus) out.options.num_gpus = -1;
  if (out.options.num_gpus == 0) {
    // The CPU-only path: names from the options, no devices made here.
    if (specs.empty()) specs = {"/cpu:0"};
    STRATA_ASSIGN_OR_RETURN(out.devices, ResolveDeviceSpecs(specs, CpuNames(out.options)));
    return out;
  }

  absl::StatusOr<std::unique_ptr<DeviceMgr>> mgr = CreateDeviceMgr(out.options);
  if (!mgr.ok()) {
    if (max_gpu >= 0 && mgr.status().code() == absl::StatusCode::kFailedPrecondition) {
      return missing_gpu(mgr.status());
    }
    return AnnotateStatus(mgr.status(), "strategy devices: ");
  }
  std::vector<std::string> local, gpus;
  for (const Device* d : (*mgr)->devices()) {
    local.push_back(d->name());
    if (d->device_type() == kDeviceGpu) gpus.push_back(d->name());
  }
  if (out.options.num_gpus == -1 && max_gpu >= static_cast<int>(gpus.size())) {
    // num_gpus was -1 and the machine has too few: ask for exactly the
    // ordinals named, for the runtime's reason (no GPU, no CUDA, fewer).
    DeviceOptions exact = out.options;
    exact.num_gpus = max_gpu + 1;
    absl::Status why = CreateDeviceMgr(exact).status();
    if (why.ok()) {
      why = absl::FailedPreconditionError(absl::StrCat("this machine has ", gpus.size(), " GPUs"));
    }
    return missing_gpu(why);
  }
  if (specs.empty()) {
    specs = gpus.empty() ? std::vector<std::string>{"/cpu:0"} : gpus;
  }
  STRATA_ASSIGN_OR_RETURN(out.devices, ResolveDeviceSpecs(specs, local));
  if (gpus.empty()) {
    // No GPU after all (the default on a machine without one): the CPU path.
    out.options.num_gpus = 0;
    return out;
  }
  out.device_mgr = *std::move(mgr);
  return out;
}

absl::StatusOr<GpuCollectives> MakeGpuCollectives(const DeviceMgr& device_mgr,
                                                  const std::vector<std::string>& devices,
                                                  GpuCollectiveOptions options) {
#if STRATA_WITH_CUDA
  NcclCollectiveExecutorOptions o;
  for (const std::string& name : devices) {
    STRATA_ASSIGN_OR_RETURN(Device * d, device_mgr.LookupDevice(name));
    if (d->device_type() != kDeviceGpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL collectives: ", name, " is not a GPU device"));
    }
    o.devices.push_back(d);
  }
  o.worker_rank = options.worker_rank;
  o.num_workers = options.num_workers;
  o.worker_names = std::move(options.worker_names);
  o.store = options.store;
  o.key_prefix = std::move(options.key_prefix);
  o.on_fatal_error = std::move(options.on_fatal_error);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<NcclCollectiveExecutor> executor,
                          NcclCollectiveExecutor::Create(std::move(o)));
  GpuCollectives out;
  NcclCollectiveExecutor* raw = executor.get();
  out.abort = [raw](const absl::Status& s) { raw->Abort(s); };
  out.executor = std::move(executor);
  return out;
#else
  (void)device_mgr;
  (void)options;
  return absl::FailedPreconditionError(absl::StrCat(
      "collectives over GPU devices (", absl::StrJoin(devices, ", "),
      ") need NCCL, and this binary was built without CUDA (build with --config=cuda)"));
#endif
}

}  // namespace distribute
}  // namespace strata
