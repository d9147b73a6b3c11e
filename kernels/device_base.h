// DeviceBase: what a kernel sees of the device it runs on. runtime/ implements
// it (CPU, virtual CPU, GPU devices); kernels depend only on this interface.
//
// Thread-safety: every method may be called concurrently by kernels.
// Ownership: the runtime owns devices; they outlive every kernel and step.
#ifndef STRATA_KERNELS_DEVICE_BASE_H_
#define STRATA_KERNELS_DEVICE_BASE_H_

#include <string>

#include "absl/status/status.h"

#include "graph/allocator.h"
#include "graph/types.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace strata {

inline constexpr char kDeviceCpu[] = "CPU";
inline constexpr char kDeviceGpu[] = "GPU";

class ResourceMgr;

// What a GPU kernel needs from its device. The handles are opaque here so that
// kernels/ needs no CUDA headers; GPU code casts them (cudaStream_t,
// cublasHandle_t). Kernels enqueue work on `stream` and return without
// synchronizing: everything on one device is ordered by that stream.
//
// Memory rule (as in TensorFlow): on a GPU device, numeric tensors live in
// device memory, except DT_INT32 (shapes, axes, indices), DT_RESOURCE
// (variable handles) and DT_STRING, which live in host memory, so shape
// arithmetic and resource lookups never need a device round trip
// (LivesInHostMemory below).
struct GpuDeviceContext {
  int ordinal = -1;        // CUDA device ordinal
  void* stream = nullptr;  // cudaStream_t: the compute stream
  void* blas = nullptr;    // cublasHandle_t bound to `stream`
};

// True where a tensor of `dtype` produced on a device of `device_type` lives in
// host memory: always on CPU devices; for DT_INT32, DT_RESOURCE and DT_STRING
// on GPU devices.
inline bool LivesInHostMemory(const std::string& device_type, DataType dtype) {
  if (device_type != kDeviceGpu) return true;
  return dtype == DT_INT32 || dtype == DT_RESOURCE || dtype == DT_STRING;
}

class DeviceBase {
 public:
  virtual ~DeviceBase() = default;
  // Full name: "/job:localhost/replica:0/task:0/device:CPU:0".
  virtual const std::string& name() const = 0;
  // "CPU" or "GPU": the key kernels are registered under.
  virtual const std::string& device_type() const = 0;
  // Where the device's tensors live.
  virtual Allocator* allocator() const = 0;
  // Intra-op parallelism for CPU kernels (Eigen's thread pool device); never null
  // on CPU devices.
  virtual const Eigen::ThreadPoolDevice* eigen_cpu_device() const = 0;
  // Per-device state that outlives steps (variables); nullptr if the device has none.
  virtual ResourceMgr* resource_manager() const { return nullptr; }
  // Non-null only on GPU devices.
  virtual const GpuDeviceContext* gpu_context() const { return nullptr; }
  // Where this device keeps tensors that live in host memory (see
  // LivesInHostMemory); the device allocator itself on CPU devices.
  virtual Allocator* host_allocator() const { return allocator(); }
  // Waits for the work enqueued on the device (a GPU's streams) and returns
  // its first asynchronous error; OK at once on devices that run kernels
  // synchronously (CPUs).
  virtual absl::Status Sync() { return absl::OkStatus(); }
};

}  // namespace strata

#endif  // STRATA_KERNELS_DEVICE_BASE_H_
