#include "kernels/kernel_registry.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"

namespace strata {

namespace {

struct Entry {
  KernelDef def;
  KernelFactory factory;
};

struct Registry {
  Mutex mu;
  // (op, device type) -> candidates
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> kernels ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* const r = new Registry;
  return *r;
}

bool Matches(const KernelDef& k, const ::tensorflow::NodeDef& def) {
  for (const auto& [attr, dt] : k.type_constraints) {
    auto it = def.attr().find(attr);
    if (it == def.attr().end() || it->second.value_case() != AttrValue::kType ||
        it->second.type() != dt) {
      return false;
    }
  }
  return true;
}

const Entry* Find(Registry& r, const std::string& device_type, const ::tensorflow::NodeDef& def)
    ABSL_SHARED_LOCKS_REQUIRED(r.mu) {
  auto it = r.kernels.find({def.op(), device_type});
  if (it == r.kernels.end()) return nullptr;
  for (const Entry& e : it->second) {
    if (Matches(e.def, def)) return &e;
  }
  return nullptr;
}

}  // namespace

void RegisterKernel(const KernelDef& def, KernelFactory factory) {
  Registry& r = GetRegistry();
  MutexLock l(&r.mu);
  r.kernels[{def.op, def.device_type}].push_back(Entry{def, std::move(factory)});
}

absl::StatusOr<std::unique_ptr<OpKernel>> CreateOpKernel(DeviceBase* device,
                                                         const ::tensorflow::NodeDef& def,
                                                         const OpDef& op,
                                                         const std::vector<DataType>& input_types,
                                                         const std::vector<DataType>& output_types) {
  Registry& r = GetRegistry();
  KernelFactory factory;
  {
    ReaderMutexLock l(&r.mu);
    const Entry* e = Find(r, device->device_type(), def);
    if (e != nullptr) factory = e->factory;
  }
  if (!factory) {
    std::vector<std::string> types;
    for (const auto& kv : def.attr()) {
      if (kv.second.value_case() == AttrValue::kType) {
        types.push_back(absl::StrCat(kv.first, "=", DataTypeString(kv.second.type())));
      }
    }
    return absl::NotFoundError(absl::StrCat("node '", def.name(), "': no ", device->device_type(),
                                            " kernel for op ", def.op(),
                                            types.empty() ? "" : " with ",
                                            absl::StrJoin(types, ", ")));
  }
  OpKernelConstruction c(device, def, op, input_types, output_types);
  std::unique_ptr<OpKernel> k = factory(c);
  if (!c.status().ok()) {
    return absl::Status(c.status().code(), absl::StrCat("node '", def.name(), "' (op ", def.op(),
                                                        "): ", c.status().message()));
  }
  return k;
}

bool HasKernel(const std::string& device_type, const ::tensorflow::NodeDef& def) {
  Registry& r = GetRegistry();
  ReaderMutexLock l(&r.mu);
  return Find(r, device_type, def) != nullptr;
}

std::vector<KernelDef> RegisteredKernels() {
  Registry& r = GetRegistry();
  ReaderMutexLock l(&r.mu);
  std::vector<KernelDef> out;
  for (const auto& kv : r.kernels) {
    for (const Entry& e : kv.second) out.push_back(e.def);
  }
  return out;
}

}  // namespace strata
