// DeviceBase: what a kernel sees of the device it runs on. runtime/ implements
// it (CPU, virtual CPU, GPU devices); kernels depend only on this interface.
//
// Thread-safety: every method may be called concurrently by kernels.
// Ownership: the runtime owns devices; they outlive every kernel and step.
#ifndef STRATA_KERNELS_DEVICE_BASE_H_
#define STRATA_KERNELS_DEVICE_BASE_H_

#include <string>

#include "graph/allocator.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace strata {

inline constexpr char kDeviceCpu[] = "CPU";
inline constexpr char kDeviceGpu[] = "GPU";

class ResourceMgr;

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
};

}  // namespace strata

#endif  // STRATA_KERNELS_DEVICE_BASE_H_
