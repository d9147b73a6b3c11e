// TestGpuDevice: a DeviceBase of type "GPU" for kernel tests, the GPU
// counterpart of StandaloneCpuDevice (kernels/kernel_runner.h). It owns a
// cudaMalloc/cudaFree allocator with statistics, a compute stream with a
// cuBLAS handle bound to it, a host allocator for the tensors that live in
// host memory on GPU devices (int32, resource handles), a 1-thread Eigen host
// device and a ResourceMgr (for variable and optimizer kernels).
//
//   if (!GpuAvailable()) GTEST_SKIP() << "no GPU";
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TestGpuDevice> dev, TestGpuDevice::Create());
//   absl::StatusOr<std::vector<Tensor>> out = RunOnGpu(dev.get(), "Relu", {x});  // host tensors
//
// RunOnGpu copies each input whose dtype lives in device memory to the
// device, runs the kernel, waits for the stream and copies device outputs
// back: its inputs and outputs are ordinary host tensors.
//
// Thread-safety: one test thread at a time per device (the stream is shared).
// Ownership: the device owns its stream, handle and allocators; tensors it
// allocated must be released before it is destroyed.
#ifndef STRATA_KERNELS_GPU_TESTING_TEST_GPU_DEVICE_H_
#define STRATA_KERNELS_GPU_TESTING_TEST_GPU_DEVICE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/allocator.h"
#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "kernels/device_base.h"
#include "kernels/gpu/blas_handle.h"
#include "kernels/resource_mgr.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

// True if cudaGetDeviceCount finds at least one GPU; `why` (optional) gets
// CUDA's answer otherwise.
bool GpuAvailable(std::string* why = nullptr);

class TestGpuDevice : public DeviceBase {
 public:
  // FailedPrecondition naming CUDA's error when GPU `ordinal` cannot be used.
  static absl::StatusOr<std::unique_ptr<TestGpuDevice>> Create(int ordinal = 0);
  ~TestGpuDevice() override;

  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  Allocator* allocator() const override { return allocator_.get(); }
  Allocator* host_allocator() const override { return host_allocator_.get(); }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return eigen_device_.get(); }
  ResourceMgr* resource_manager() const override { return resource_mgr_.get(); }
  const GpuDeviceContext* gpu_context() const override { return &context_; }

  // Waits for everything enqueued on the stream; Internal with CUDA's error.
  absl::Status Synchronize() const;

 private:
  TestGpuDevice() = default;

  std::string name_;
  const std::string type_ = kDeviceGpu;
  GpuDeviceContext context_;
  std::unique_ptr<gpu::BlasHandle> blas_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Allocator> host_allocator_;
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
  std::unique_ptr<Eigen::ThreadPoolDevice> eigen_device_;
  std::unique_ptr<ResourceMgr> resource_mgr_;
};

// A device-memory copy of host tensor `t` (or `t` itself where its dtype
// lives in host memory on GPU devices).
absl::StatusOr<Tensor> ToDevice(TestGpuDevice* dev, const Tensor& t);
// A host copy of `t` (after waiting for the stream), or `t` itself where it
// already is in host memory.
absl::StatusOr<Tensor> ToHost(TestGpuDevice* dev, const Tensor& t);

// RunKernel on the GPU device with host tensors in and out (see above).
absl::StatusOr<std::vector<Tensor>> RunOnGpu(TestGpuDevice* dev, const std::string& op,
                                             const std::vector<Tensor>& inputs,
                                             const std::map<std::string, AttrValue>& attrs = {});

}  // namespace strata

#endif  // STRATA_KERNELS_GPU_TESTING_TEST_GPU_DEVICE_H_
