// Devices: the places a graph partition runs. A Device implements the kernels'
// view (kernels/device_base.h): a full name, a type, an allocator that keeps
// statistics, and Eigen's intra-op thread pool. A DeviceMgr owns the devices
// of one process and finds them by full or partial name.
//
// Each device has a ResourceMgr for its variables, which persist across steps
// and sessions that share the DeviceMgr.
//
// One CPU device, or N virtual CPU devices that simulate an N-device machine
// (each with its own allocator and intra-op pool, so per-device memory stats
// are separate and the partitions of a Mirrored step run side by side):
//
//   DeviceOptions opts;
//   opts.num_cpu_devices = 2;
//   opts.intra_op_threads_per_device = 1;
//   absl::StatusOr<std::unique_ptr<DeviceMgr>> mgr = CreateCpuDeviceMgr(opts);
//   Device* cpu1 = *(*mgr)->LookupDevice("/cpu:1");
//   cpu1->name();                       // "/job:localhost/replica:0/task:0/device:CPU:1"
//   cpu1->allocator()->GetStats().peak_bytes_in_use;
//
// GPU devices follow the CPUs when DeviceOptions::num_gpus asks for them (a
// --config=cuda build linking //runtime/gpu:gpu_device):
//
//   opts.num_gpus = -1;                 // every local GPU, none is fine
//   Device* gpu0 = *(*mgr)->LookupDevice("/gpu:0");
//
// Thread-safety: Device and DeviceMgr methods may be called concurrently.
// Ownership: the DeviceMgr owns its devices; they live as long as it, which
// must outlive every session, executor and tensor that uses them.
#ifndef STRATA_RUNTIME_DEVICE_H_
#define STRATA_RUNTIME_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"
#include "kernels/device_base.h"
#include "kernels/resource_mgr.h"
#include "runtime/device_name.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

// A device's recording of one partition's work, replayed step after step
// (whole-step CUDA graphs on a GPU; runtime/step_graph.h drives it). Made by
// Device::NewStepRecording for one partition and one set of input shapes.
//
//   rec->device()      kernels of the recorded partition are built for this:
//                      the device, with a stream and allocators of the
//                      recording's own (its memory lives as long as it);
//   rec->Begin()       from here the work those kernels enqueue is recorded,
//                      not run;
//   rec->End()         stops recording; an error says why the work could not
//                      be recorded (a kernel synchronised with the host ...),
//                      and the recording is then unusable;
//   rec->CopyIn(v, &b) copies a step's value `v` (made on the device) into
//                      the recording's input buffer `b`, before the replay;
//   rec->Replay()      runs the recorded work once, after the work already
//                      enqueued on the device and before the work enqueued
//                      there later;
//   rec->CopyOut(b)    a copy of output buffer `b` in the device's own
//                      memory, which later replays do not touch.
//
// Thread-safety: one caller at a time. Ownership: the recording owns its
// stream, its buffers' memory and the recorded work; destroying it waits for
// its last replay. Tensors from its allocators that outlive it stay valid.
class StepRecording {
 public:
  virtual ~StepRecording() = default;
  virtual DeviceBase* device() = 0;
  virtual absl::Status Begin() = 0;
  virtual absl::Status End() = 0;
  virtual absl::Status CopyIn(const Tensor& value, Tensor* buffer) = 0;
  virtual absl::Status Replay() = 0;
  virtual absl::StatusOr<Tensor> CopyOut(const Tensor& buffer) = 0;
};

class Device : public DeviceBase {
 public:
  ~Device() override;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return parsed_name_.type; }
  const DeviceName& parsed_name() const { return parsed_name_; }
  // A random number fixed for this device object's life: a Send/Recv key
  // names it, so a restarted device never matches a stale peer's key.
  uint64_t incarnation() const { return incarnation_; }
  // The device's variables and other state that outlives steps (kernels/
  // resource_mgr.h); it lives as long as the device.
  ResourceMgr* resource_manager() const override { return resource_mgr_.get(); }

  using StatusCallback = std::function<void(absl::Status)>;
  // Copies between this device's own memory and host memory, for tensors
  // that do not live in host memory here (LivesInHostMemory is false): only
  // devices with memory of their own (GPUs) override them; on others they
  // report Unimplemented. Asynchronous: `done` runs once `dst` may be used (on
  // this device, or on the host); both tensors are allocated by the caller,
  // of one dtype and size, and stay referenced until `done`.
  virtual void CopyDeviceTensorToHost(const Tensor& src, Tensor* dst, StatusCallback done);
  virtual void CopyHostTensorToDevice(const Tensor& src, Tensor* dst, StatusCallback done);

  // Whether this device records partitions for replay (GPUs: CUDA graphs),
  // and a new recording; Unimplemented on devices that do not.
  virtual bool CanRecordSteps() const { return false; }
  // Whether this process runs the device's kernels (false: a RemoteDevice).
  virtual bool local() const { return true; }
  virtual absl::StatusOr<std::unique_ptr<StepRecording>> NewStepRecording();

 protected:
  explicit Device(const DeviceName& name);
  // Subclasses call this first in their destructor: resources hold tensors
  // allocated from the subclass's allocator, which must outlive them.
  void DestroyResources();

 private:
  const DeviceName parsed_name_;
  const std::string name_;
  const uint64_t incarnation_;
  std::unique_ptr<ResourceMgr> resource_mgr_;
};

// A device of another task: a name (and type, for placement's kernel
// lookups) that nodes can be placed on, never run on here (it has no
// allocator or threads). local() is false.
class RemoteDevice : public Device {
 public:
  explicit RemoteDevice(const DeviceName& name) : Device(name) {}
  ~RemoteDevice() override { DestroyResources(); }
  Allocator* allocator() const override { return nullptr; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  bool local() const override { return false; }
};

// A host CPU device (also each virtual CPU device): its own tracking
// allocator and an Eigen thread pool of `intra_op_threads` threads.
class CpuDevice : public Device {
 public:
  // InvalidArgument if `name` is not fully specified or not of type CPU, or
  // `intra_op_threads` < 1.
  static absl::StatusOr<std::unique_ptr<CpuDevice>> Create(const DeviceName& name,
                                                           int intra_op_threads,
                                                           int64_t memory_limit_bytes = 0);
  ~CpuDevice() override;

  Allocator* allocator() const override { return allocator_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return eigen_device_.get(); }
  int intra_op_threads() const { return intra_op_threads_; }

 private:
  CpuDevice(const DeviceName& name, int intra_op_threads, int64_t memory_limit_bytes);
  const int intra_op_threads_;
  Allocator* const allocator_;  // persistent: tensors may outlive the device
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
  std::unique_ptr<Eigen::ThreadPoolDevice> eigen_device_;
};

// Whether `dtype` tensors made on `src` must be copied before `dst` can use
// them: when either side keeps them outside host memory (a GPU's float
// tensors) and the devices differ.
bool NeedsCopy(const Device& src, const Device& dst, DataType dtype);

// `value`, produced on `src`, as `dst` needs it: a device-to-host,
// host-to-device or device-to-host-to-device copy (on the devices' copy
// streams), or `value` itself when NeedsCopy is false. `done` gets the tensor
// once it may be used on `dst`, possibly on another thread; the error names
// both devices.
void CopyTensorBetweenDevices(Device* src, Device* dst, const Tensor& value,
                              std::function<void(absl::Status, Tensor)> done);

class DeviceMgr {
 public:
  // InvalidArgument if `devices` is empty or two devices share a name.
  static absl::StatusOr<std::unique_ptr<DeviceMgr>> Create(
      std::vector<std::unique_ptr<Device>> devices);
  // `local`'s devices (not owned; `local` must outlive the result) and a
  // RemoteDevice for each full name in `remote` (devices of other tasks, for
  // placing and partitioning a step that spans tasks), ordered by their
  // task's index in `tasks` ("/job:j/replica:r/task:t"), each task's in the
  // order given: every task then sees the same order. InvalidArgument for a
  // name that is not full, names a task of `local` or one not in `tasks`,
  // or is given twice.
  static absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateWithRemote(
      const DeviceMgr& local, const std::vector<std::string>& remote,
      const std::vector<std::string>& tasks);

  // In creation order; the first is the default device.
  const std::vector<Device*>& devices() const { return raw_; }
  // The device with this full name, or the first matching a partial one
  // ("/cpu:1", "/device:CPU:*"). InvalidArgument for a malformed name;
  // NotFound naming it and listing the devices if none matches.
  absl::StatusOr<Device*> LookupDevice(absl::string_view name) const;
  // Every device `spec` matches, in creation order.
  std::vector<Device*> MatchingDevices(const DeviceName& spec) const;
  // The full names, comma-separated, for error messages.
  std::string DeviceListString() const;

 private:
  explicit DeviceMgr(std::vector<std::unique_ptr<Device>> devices);
  DeviceMgr(std::vector<Device*> order, std::vector<std::unique_ptr<Device>> owned);
  std::vector<std::unique_ptr<Device>> owned_;
  std::vector<Device*> raw_;
};

struct DeviceOptions {
  std::string job = "localhost";
  int replica = 0;
  int task = 0;
  // CPU:0 .. CPU:n-1, each a separate device (virtual devices when n > 1).
  int num_cpu_devices = 1;
  // Eigen threads per device; 0 picks hardware concurrency / num_cpu_devices
  // (at least 1).
  int intra_op_threads_per_device = 0;
  // Per-device allocator limit; 0 for none.
  int64_t cpu_memory_limit_bytes = 0;
  // GPU:0 .. GPU:n-1 after the CPU devices: -1 every local GPU (none is
  // fine), 0 none, n > 0 exactly n (an error if the machine has fewer).
  // GPUs need a binary built with --config=cuda that links
  // //runtime/gpu:gpu_device (docs/gpu.md).
  int num_gpus = 0;
  // Device memory each GPU's allocator may reserve; 0: its free memory less
  // a reserve (runtime/gpu/gpu_device.h).
  int64_t gpu_memory_limit_bytes = 0;
};

// The devices `opts` describes: the CPU devices, then the GPUs. Errors:
// InvalidArgument for a CPU count < 1, a negative thread count or a bad job
// name; FailedPrecondition when GPUs are requested that are not there
// ("requested /device:GPU:0 but this machine has no GPU ...") or the binary
// has no GPU support ("... built without CUDA").
absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateDeviceMgr(const DeviceOptions& opts);
// The same (the name predates GPUs).
absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateCpuDeviceMgr(const DeviceOptions& opts);

// How GPU devices reach CreateDeviceMgr without runtime/ depending on CUDA:
// runtime/gpu/gpu_device.cc registers its factory when linked. The factory
// gets the options (num_gpus != 0) and returns the GPU devices, in ordinal
// order. Registering replaces any earlier factory; nullptr removes it.
using GpuDeviceFactory =
    absl::StatusOr<std::vector<std::unique_ptr<Device>>> (*)(const DeviceOptions& opts);
void RegisterGpuDeviceFactory(GpuDeviceFactory factory);

}  // namespace strata

#endif  // STRATA_RUNTIME_DEVICE_H_
