#include "runtime/device.h"

#include <algorithm>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "base/status.h"
#include "kernels/eigen_views.h"

namespace strata {

namespace {

uint64_t NewIncarnation() {
  // Process-wide generator: seeded from the OS once; zero is kept for "no
  // incarnation" in keys that do not carry one.
  static absl::BitGen* gen = new absl::BitGen;
  static Mutex mu;
  MutexLock l(&mu);
  uint64_t v = 0;
  while (v == 0) v = absl::Uniform<uint64_t>(*gen);
  return v;
}

}  // namespace

Device::Device(const DeviceName& name)
    : parsed_name_(name),
      name_(name.ToString()),
      incarnation_(NewIncarnation()),
      resource_mgr_(std::make_unique<ResourceMgr>(name_)) {}

Device::~Device() = default;

void Device::DestroyResources() { resource_mgr_.reset(); }

void Device::CopyDeviceTensorToHost(const Tensor&, Tensor*, StatusCallback done) {
  done(absl::UnimplementedError(absl::StrCat(name(), " has no memory of its own to copy from")));
}

void Device::CopyHostTensorToDevice(const Tensor&, Tensor*, StatusCallback done) {
  done(absl::UnimplementedError(absl::StrCat(name(), " has no memory of its own to copy to")));
}

absl::StatusOr<std::unique_ptr<StepRecording>> Device::NewStepRecording() {
  return absl::UnimplementedError(absl::StrCat(name(), " does not record steps"));
}

bool NeedsCopy(const Device& src, const Device& dst, DataType dtype) {
  if (&src == &dst) return false;
  return !LivesInHostMemory(src.device_type(), dtype) ||
         !LivesInHostMemory(dst.device_type(), dtype);
}

void CopyTensorBetweenDevices(Device* src, Device* dst, const Tensor& value,
                              std::function<void(absl::Status, Tensor)> done) {
  if (!NeedsCopy(*src, *dst, value.dtype())) {
    done(absl::OkStatus(), value);
    return;
  }
  auto fail = [src, dst](const absl::Status& s) {
    return AnnotateStatus(s, absl::StrCat("copying a tensor from ", src->name(), " to ",
                                          dst->name(), ": "));
  };
  const bool src_host = LivesInHostMemory(src->device_type(), value.dtype());
  const bool dst_host = LivesInHostMemory(dst->device_type(), value.dtype());
  // Host to device: into the destination's memory.
  auto to_dst = [dst, fail, done](const Tensor& host) {
    auto out = Tensor::Allocate(dst->allocator(), host.dtype(), host.shape());
    if (!out.ok()) {
      done(fail(out.status()), Tensor());
      return;
    }
    auto holder = std::make_shared<Tensor>(*std::move(out));
    dst->CopyHostTensorToDevice(host, holder.get(), [holder, fail, done](absl::Status s) {
      if (!s.ok()) {
        done(fail(s), Tensor());
      } else {
        done(absl::OkStatus(), std::move(*holder));
      }
    });
  };
  if (src_host) {
    to_dst(value);
    return;
  }
  // Device to host: into the source's host allocator (pinned on a GPU, so the
  // copy does not stage through a bounce buffer).
  auto host = Tensor::Allocate(src->host_allocator(), value.dtype(), value.shape());
  if (!host.ok()) {
    done(fail(host.status()), Tensor());
    return;
  }
  auto holder = std::make_shared<Tensor>(*std::move(host));
  src->CopyDeviceTensorToHost(
      value, holder.get(), [holder, dst_host, to_dst, fail, done](absl::Status s) {
        if (!s.ok()) {
          done(fail(s), Tensor());
        } else if (dst_host) {
          done(absl::OkStatus(), std::move(*holder));
        } else {
          to_dst(*holder);  // device to device through host memory
        }
      });
}

absl::StatusOr<std::unique_ptr<CpuDevice>> CpuDevice::Create(const DeviceName& name,
                                                             int intra_op_threads,
                                                             int64_t memory_limit_bytes) {
  if (!name.IsFullySpecified() || name.type != kDeviceCpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a CPU device needs a full name of type CPU, got '", name.ToString(), "'"));
  }
  if (intra_op_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("device ", name.ToString(), ": ",
                                                   intra_op_threads, " intra-op threads"));
  }
  return std::unique_ptr<CpuDevice>(new CpuDevice(name, intra_op_threads, memory_limit_bytes));
}

CpuDevice::CpuDevice(const DeviceName& name, int intra_op_threads, int64_t memory_limit_bytes)
    : Device(name),
      intra_op_threads_(intra_op_threads),
      allocator_(NewPersistentCpuAllocator(absl::StrCat("cpu_", name.id, "_task_", name.task),
                                           memory_limit_bytes)),
      pool_(std::make_unique<Eigen::ThreadPool>(intra_op_threads)),
      eigen_device_(std::make_unique<Eigen::ThreadPoolDevice>(pool_.get(), intra_op_threads)) {}

CpuDevice::~CpuDevice() { DestroyResources(); }

DeviceMgr::DeviceMgr(std::vector<std::unique_ptr<Device>> devices) : owned_(std::move(devices)) {
  for (const auto& d : owned_) raw_.push_back(d.get());
}

absl::StatusOr<std::unique_ptr<DeviceMgr>> DeviceMgr::Create(
    std::vector<std::unique_ptr<Device>> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("a DeviceMgr needs at least one device");
  absl::flat_hash_set<std::string> names;
  for (const auto& d : devices) {
    if (d == nullptr) return absl::InvalidArgumentError("null device");
    if (!names.insert(d->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("two devices named ", d->name()));
    }
  }
  return std::unique_ptr<DeviceMgr>(new DeviceMgr(std::move(devices)));
}

DeviceMgr::DeviceMgr(std::vector<Device*> order, std::vector<std::unique_ptr<Device>> owned)
    : owned_(std::move(owned)), raw_(std::move(order)) {}

absl::StatusOr<std::unique_ptr<DeviceMgr>> DeviceMgr::CreateWithRemote(
    const DeviceMgr& local, const std::vector<std::string>& remote,
    const std::vector<std::string>& tasks) {
  auto task_index = [&tasks](const DeviceName& n) -> int {
    const std::string t = absl::StrCat("/job:", n.job, "/replica:", n.replica, "/task:", n.task);
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i] == t) return static_cast<int>(i);
    }
    return -1;
  };
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<int> local_tasks;
  std::vector<std::pair<int, Device*>> order;
  for (Device* d : local.devices()) {
    names.insert(d->name());
    const int t = task_index(d->parsed_name());
    if (t < 0) return absl::InvalidArgumentError(absl::StrCat(d->name(), " is on none of the tasks"));
    local_tasks.insert(t);
    order.emplace_back(t, d);
  }
  std::vector<std::unique_ptr<Device>> owned;
  for (const std::string& r : remote) {
    STRATA_ASSIGN_OR_RETURN(DeviceName n, DeviceName::Parse(r));
    if (!n.IsFullySpecified()) {
      return absl::InvalidArgumentError(absl::StrCat("remote device '", r, "' is not a full name"));
    }
    const int t = task_index(n);
    if (t < 0) {
      return absl::InvalidArgumentError(absl::StrCat("remote device '", r, "' is on none of the tasks"));
    }
    if (local_tasks.contains(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("remote device '", r, "' belongs to this process's task"));
    }
    auto d = std::make_unique<RemoteDevice>(n);
    if (!names.insert(d->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("two devices named ", d->name()));
    }
    order.emplace_back(t, d.get());
    owned.push_back(std::move(d));
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Device*> raw;
  for (const auto& [t, d] : order) raw.push_back(d);
  return std::unique_ptr<DeviceMgr>(new DeviceMgr(std::move(raw), std::move(owned)));
}

std::vector<Device*> DeviceMgr::MatchingDevices(const DeviceName& spec) const {
  std::vector<Device*> out;
  for (Device* d : raw_) {
    if (spec.Matches(d->parsed_name())) out.push_back(d);
  }
  return out;
}

absl::StatusOr<Device*> DeviceMgr::LookupDevice(absl::string_view name) const {
  for (Device* d : raw_) {
    if (d->name() == name) return d;
  }
  auto spec = DeviceName::Parse(name);
  if (!spec.ok()) return spec.status();
  std::vector<Device*> m = MatchingDevices(*spec);
  if (m.empty()) {
    return absl::NotFoundError(absl::StrCat("no device matches '", name,
                                            "'; devices are: ", DeviceListString()));
  }
  return m.front();
}

std::string DeviceMgr::DeviceListString() const {
  return absl::StrJoin(raw_, ", ", [](std::string* out, const Device* d) { out->append(d->name()); });
}

namespace {

Mutex gpu_factory_mu;
GpuDeviceFactory gpu_factory ABSL_GUARDED_BY(gpu_factory_mu) = nullptr;

}  // namespace

void RegisterGpuDeviceFactory(GpuDeviceFactory factory) {
  MutexLock l(&gpu_factory_mu);
  gpu_factory = factory;
}

absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateCpuDeviceMgr(const DeviceOptions& opts) {
  return CreateDeviceMgr(opts);
}

absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateDeviceMgr(const DeviceOptions& opts) {
  if (opts.num_cpu_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_cpu_devices is ", opts.num_cpu_devices, "; need at least 1"));
  }
  if (opts.intra_op_threads_per_device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "intra_op_threads_per_device is ", opts.intra_op_threads_per_device, "; need >= 0"));
  }
  if (opts.replica < 0 || opts.task < 0) {
    return absl::InvalidArgumentError("replica and task must be >= 0");
  }
  auto job = DeviceName::Parse(absl::StrCat("/job:", opts.job));
  if (!job.ok()) return job.status();
  int threads = opts.intra_op_threads_per_device;
  if (threads == 0) {
    const int hw = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, hw / opts.num_cpu_devices);
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < opts.num_cpu_devices; ++i) {
    auto d = CpuDevice::Create(DeviceName::Full(opts.job, opts.replica, opts.task, kDeviceCpu, i),
                               threads, opts.cpu_memory_limit_bytes);
    if (!d.ok()) return d.status();
    devices.push_back(*std::move(d));
  }
  if (opts.num_gpus < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_gpus is ", opts.num_gpus, "; need -1 (every local GPU), 0 (none) or a count"));
  }
  if (opts.num_gpus != 0) {
    GpuDeviceFactory factory;
    {
      MutexLock l(&gpu_factory_mu);
      factory = gpu_factory;
    }
    if (factory == nullptr) {
      if (opts.num_gpus > 0) {
        return absl::FailedPreconditionError(
            "requested /device:GPU:0 but this binary was built without CUDA (GPUs need a "
            "--config=cuda build that links //runtime/gpu:gpu_device)");
      }
    } else {
      auto gpus = factory(opts);
      if (!gpus.ok()) return gpus.status();
      for (auto& g : *gpus) devices.push_back(std::move(g));
    }
  }
  return DeviceMgr::Create(std::move(devices));
}

}  // namespace strata
