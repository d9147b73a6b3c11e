#include "runtime/placement.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/kernel_registry.h"

namespace strata {

namespace {

// Cached per device type: HasKernel takes the registry's lock and walks its
// candidates, and a graph asks about the same (op, type) many times.
class KernelIndex {
 public:
  bool Has(const Device* d, const Node* n) {
    auto key = std::make_pair(n->id(), d->device_type());
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const bool has = HasKernel(d->device_type(), n->def());
    cache_.emplace(std::move(key), has);
    return has;
  }

 private:
  absl::flat_hash_map<std::pair<int, std::string>, bool> cache_;
};

// A CPU device of the task that `requested` (a full name) belongs to, with a
// kernel for `n`, or nullptr.
Device* HostWithKernel(const DeviceMgr& devices, const DeviceName& requested, const Node* n,
                       KernelIndex* kernels) {
  for (Device* d : devices.devices()) {
    const DeviceName& name = d->parsed_name();
    if (name.type == "CPU" && name.job == requested.job && name.replica == requested.replica &&
        name.task == requested.task && kernels->Has(d, n)) {
      return d;
    }
  }
  return nullptr;
}

}  // namespace

absl::Status PlaceGraph(Graph* g, const DeviceMgr& devices, const PlacementOptions& opts) {
  Device* const default_device =
      opts.default_device != nullptr ? opts.default_device : devices.devices().front();
  STRATA_ASSIGN_OR_RETURN(std::vector<Node*> order, g->TopologicalSort());
  KernelIndex kernels;
  std::vector<Device*> placed(g->num_node_ids(), nullptr);

  // Rule 4: the default device, else the first device with a kernel.
  auto fallback = [&](Node* n) -> absl::StatusOr<Device*> {
    if (kernels.Has(default_device, n)) return default_device;
    for (Device* d : devices.devices()) {
      if (kernels.Has(d, n)) return d;
    }
    return absl::NotFoundError(absl::StrCat("node ", n->DebugString(),
                                            ": no device has a kernel for op ", n->type_string(),
                                            "; devices are: ", devices.DeviceListString()));
  };

  // Rule 1: explicit requests.
  for (Node* n : order) {
    const std::string& req = n->requested_device();
    if (req.empty()) continue;
    auto spec = DeviceName::Parse(req);
    if (!spec.ok()) {
      if (opts.allow_soft_placement) continue;
      return AnnotateStatus(spec.status(), absl::StrCat("node ", n->DebugString(), ": "));
    }
    std::vector<Device*> matching = devices.MatchingDevices(*spec);
    if (matching.empty()) {
      if (opts.allow_soft_placement) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", n->DebugString(), " requests device '", req,
          "', which does not exist; devices are: ", devices.DeviceListString()));
    }
    Device* chosen = nullptr;
    for (Device* d : matching) {
      if (d == default_device && kernels.Has(d, n)) chosen = d;
    }
    for (Device* d : matching) {
      if (chosen == nullptr && kernels.Has(d, n)) chosen = d;
    }
    if (chosen == nullptr && opts.host_fallback_without_kernel) {
      chosen = HostWithKernel(devices, matching.front()->parsed_name(), n, &kernels);
    }
    if (chosen == nullptr) {
      if (opts.allow_soft_placement) continue;
      return absl::InvalidArgumentError(absl::StrCat("node ", n->DebugString(), " requests device '",
                                                     req, "', but op ", n->type_string(),
                                                     " has no ", matching.front()->device_type(),
                                                     " kernel"));
    }
    placed[n->id()] = chosen;
  }

  // Rules 2 and 4, in topological order so that inputs are placed first;
  // _Arg nodes wait for their consumers (rule 3).
  for (Node* n : order) {
    if (placed[n->id()] != nullptr || n->IsOp("_Arg")) continue;
    for (int i = 0; i < n->num_inputs() && placed[n->id()] == nullptr; ++i) {
      const Edge* e = n->input_edge(i);
      Device* d = e == nullptr ? nullptr : placed[e->src->id()];
      if (d != nullptr && kernels.Has(d, n)) placed[n->id()] = d;
    }
    if (placed[n->id()] == nullptr) {
      STRATA_ASSIGN_OR_RETURN(placed[n->id()], fallback(n));
    }
  }
  for (Node* n : order) {
    if (placed[n->id()] != nullptr) continue;
    for (const Edge* e : n->out_edges()) {
      Device* d = placed[e->dst->id()];
      if (!e->IsControlEdge() && d != nullptr && kernels.Has(d, n)) {
        placed[n->id()] = d;
        break;
      }
    }
    if (placed[n->id()] == nullptr) {
      STRATA_ASSIGN_OR_RETURN(placed[n->id()], fallback(n));
    }
  }
  for (Node* n : order) n->set_assigned_device_name(placed[n->id()]->name());
  return absl::OkStatus();
}

}  // namespace strata
