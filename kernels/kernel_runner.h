// Runs one kernel outside any graph or executor, for kernel tests and
// constant folding: build the NodeDef from an op name, attrs and input
// tensors, create the registered kernel for the device, call Compute.
//
//   StandaloneCpuDevice dev(/*intra_op_threads=*/2);
//   absl::StatusOr<std::vector<Tensor>> out =
//       RunKernel(&dev, "MatMul", {a, b}, {{"transpose_b", MakeAttr(true)}});
//
// Type attrs the inputs imply (T, N) are filled in as the builder does.
// Thread-safety: RunKernel may be called concurrently; a StandaloneCpuDevice
// is safe to share.
#ifndef STRATA_KERNELS_KERNEL_RUNNER_H_
#define STRATA_KERNELS_KERNEL_RUNNER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "kernels/device_base.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

// A CPU device with its own allocator and intra-op thread pool, for kernels
// run outside a session.
class StandaloneCpuDevice : public DeviceBase {
 public:
  explicit StandaloneCpuDevice(int intra_op_threads = 1);
  ~StandaloneCpuDevice() override;
  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  Allocator* allocator() const override { return allocator_.get(); }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return eigen_device_.get(); }

 private:
  const std::string name_ = "/job:localhost/replica:0/task:0/device:CPU:0";
  const std::string type_ = kDeviceCpu;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
  std::unique_ptr<Eigen::ThreadPoolDevice> eigen_device_;
};

// Runs `op` once on `device`. Errors from attr validation, kernel lookup,
// construction or Compute come back as the Status.
absl::StatusOr<std::vector<Tensor>> RunKernel(DeviceBase* device, const std::string& op,
                                              const std::vector<Tensor>& inputs,
                                              const std::map<std::string, AttrValue>& attrs = {});

// Like RunKernel, with the inputs given as lists per input argument (for ops
// with list inputs such as AddN, ConcatV2, Pack).
absl::StatusOr<std::vector<Tensor>> RunKernelWithListInputs(
    DeviceBase* device, const std::string& op, const std::vector<std::vector<Tensor>>& inputs,
    const std::map<std::string, AttrValue>& attrs = {});

}  // namespace strata

#endif  // STRATA_KERNELS_KERNEL_RUNNER_H_
