// GpuDevice: one CUDA GPU as a runtime Device of type "GPU".
//
// What it holds (created once, for the device's life):
//   - allocator(): a BfcAllocator over cudaMalloc on this GPU (bfc_allocator.h),
//     limited to Options::memory_limit_bytes (default: the free memory at
//     creation less a reserve for cuBLAS and NCCL);
//   - host_allocator(): a BfcAllocator over pinned host memory, for the
//     tensors that live in host memory on a GPU device (DT_INT32, DT_RESOURCE,
//     DT_STRING: kernels/device_base.h LivesInHostMemory) and for host copies
//     of device tensors, so copies to and from it are truly asynchronous;
//   - a compute stream (kernels enqueue on it and never synchronize), a
//     host-to-device and a device-to-host copy stream, ordered with events;
//   - a cuBLAS handle bound to the compute stream (gpu_context()->blas);
//   - eigen_cpu_device(): a small host thread pool, so the kernels of
//     host-memory dtypes (shape arithmetic) run on this device too;
//   - a callback thread that runs the `done` of each copy once the GPU has
//     finished it (CUDA host functions may not call CUDA themselves).
//
//   absl::StatusOr<std::unique_ptr<GpuDevice>> d = GpuDevice::Create(
//       DeviceName::Full("localhost", 0, 0, kDeviceGpu, 0), GpuDevice::Options());
//   Tensor dev((*d)->allocator(), DT_FLOAT, shape);      // device memory
//   Notification n;
//   (*d)->CopyHostToDevice(host, &dev, [&](absl::Status s) { n.Notify(); });
//   ... kernels on (*d)->compute_stream() see the copied data without waiting ...
//   STRATA_RETURN_IF_ERROR((*d)->Synchronize());
//
// Ordering: a host-to-device copy first waits (on the GPU, with an event) for
// the work already on the compute stream, because its destination may be a
// buffer that work has just freed; the compute stream then waits for the
// copy. A device-to-host copy waits for the compute stream, so it copies what
// the kernels wrote. Nothing blocks the host except Synchronize().
//
// Allocators are per GPU and per process, never destroyed: tensors (a fetched
// step output, a variable) may outlive the device object that made them.
//
// Only built with --config=cuda. Thread-safety: every method may be called
// concurrently. Ownership: the DeviceMgr owns the device; tensors passed to
// a copy are kept alive by the copy until its `done` has run.
#ifndef STRATA_RUNTIME_GPU_GPU_DEVICE_H_
#define STRATA_RUNTIME_GPU_GPU_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "graph/tensor.h"
#include "kernels/gpu/blas_handle.h"
#include "runtime/device.h"
#include "runtime/gpu/bfc_allocator.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

class GpuDevice : public Device {
 public:
  struct Options {
    // Device memory the allocator may reserve; 0: the free memory at
    // creation less kReservedBytes. The first device made for an ordinal in a
    // process fixes it.
    int64_t memory_limit_bytes = 0;
    // Host threads for kernels of host-memory dtypes.
    int host_threads = 2;
  };
  // Kept free for cuBLAS workspaces, NCCL buffers and the CUDA context.
  static constexpr int64_t kReservedBytes = int64_t{1} << 30;

  // `name` must be fully specified, of type GPU; its id is the CUDA ordinal.
  // FailedPrecondition naming the device when there is no such GPU ("no GPU:
  // cudaGetDeviceCount said ..."); InvalidArgument for a bad name or options.
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Create(const DeviceName& name,
                                                           const Options& options);
  ~GpuDevice() override;

  Allocator* allocator() const override { return allocator_; }
  Allocator* host_allocator() const override { return host_allocator_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return eigen_device_.get(); }
  const GpuDeviceContext* gpu_context() const override { return &context_; }

  int ordinal() const { return context_.ordinal; }
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t h2d_stream() const { return h2d_; }
  cudaStream_t d2h_stream() const { return d2h_; }
  // Device memory statistics, with how the BFC regions are cut up.
  BfcAllocator::Stats memory_stats() const { return allocator_->GetDetailedStats(); }

  // Enqueues a copy; `done` runs on the device's callback thread once the GPU
  // has finished it (or at once with the error if it could not be enqueued).
  // Source and destination must have the same dtype and byte size; the host
  // side may be any host memory (pinned from host_allocator() is fastest).
  void CopyHostToDevice(const Tensor& host, Tensor* device, StatusCallback done);
  void CopyDeviceToHost(const Tensor& device, Tensor* host, StatusCallback done);
  // On the compute stream, after the kernels already there.
  void CopyDeviceToDevice(const Tensor& src, Tensor* dst, StatusCallback done);
  // Blocking wrappers of the above: wait for the copy alone, not the device.
  absl::Status CopyHostToDeviceSync(const Tensor& host, Tensor* device);
  absl::Status CopyDeviceToHostSync(const Tensor& device, Tensor* host);

  // Runs `fn` on the callback thread once everything enqueued on `stream` so
  // far has finished.
  absl::Status ThenRun(cudaStream_t stream, std::function<void()> fn);

  // Waits for the compute and copy streams; the first asynchronous CUDA error
  // (a failed kernel) comes back here, naming the device.
  absl::Status Synchronize();

  // Device overrides: the runtime's copies (rendezvous) and step-end sync.
  void CopyDeviceTensorToHost(const Tensor& src, Tensor* dst, StatusCallback done) override {
    CopyDeviceToHost(src, dst, std::move(done));
  }
  void CopyHostTensorToDevice(const Tensor& src, Tensor* dst, StatusCallback done) override {
    CopyHostToDevice(src, dst, std::move(done));
  }
  absl::Status Sync() override { return Synchronize(); }
  // Whole-step CUDA graphs (runtime/gpu/gpu_step_recording.h).
  bool CanRecordSteps() const override { return true; }
  absl::StatusOr<std::unique_ptr<StepRecording>> NewStepRecording() override;

 private:
  GpuDevice(const DeviceName& name, int host_threads);
  absl::Status Init(const Options& options);
  // `first` waits on the GPU for the work on `after` so far.
  absl::Status StreamWait(cudaStream_t first, cudaStream_t after);
  absl::Status CheckCopy(const Tensor& src, const Tensor* dst, const char* what) const;
  void CallbackLoop();
  void Enqueue(std::function<void()> fn);
  static void CUDART_CB HostFunc(void* arg);

  GpuDeviceContext context_;
  BfcAllocator* allocator_ = nullptr;       // process-wide, never destroyed
  BfcAllocator* host_allocator_ = nullptr;  // process-wide, never destroyed
  std::unique_ptr<gpu::BlasHandle> blas_;  // bound to compute_
  cudaStream_t compute_ = nullptr;
  cudaStream_t h2d_ = nullptr;
  cudaStream_t d2h_ = nullptr;
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
  std::unique_ptr<Eigen::ThreadPoolDevice> eigen_device_;

  Mutex cb_mu_;
  std::deque<std::function<void()>> callbacks_ ABSL_GUARDED_BY(cb_mu_);
  bool stopping_ ABSL_GUARDED_BY(cb_mu_) = false;
  int pending_host_funcs_ ABSL_GUARDED_BY(cb_mu_) = 0;
  std::thread callback_thread_;
};

// Every GPU device `opts` asks for (DeviceOptions::num_gpus): -1 every local
// GPU (none is fine), n > 0 exactly GPU:0 .. GPU:n-1, failing with
// FailedPrecondition ("requested /device:GPU:1 but this machine has 1 GPU",
// "requested /device:GPU:0 but this machine has no GPU (cudaGetDeviceCount
// said ...)"). Linking //runtime/gpu:gpu_device registers it with
// CreateDeviceMgr (runtime/device.h).
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateGpuDevices(const DeviceOptions& opts);

}  // namespace strata

#endif  // STRATA_RUNTIME_GPU_GPU_DEVICE_H_
