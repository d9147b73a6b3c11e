#include "kernels/gpu/testing/test_gpu_device.h"

#include <cuda_runtime.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

// Plain cudaMalloc/cudaFree: tests want every allocation checked by
// compute-sanitizer and visible in the stats, not cached.
class CudaMallocAllocator : public Allocator {
 public:
  explicit CudaMallocAllocator(int ordinal) : ordinal_(ordinal) {}
  std::string Name() const override { return absl::StrCat("test_gpu_", ordinal_); }
  void* AllocateRaw(size_t /*alignment*/, size_t bytes) override {
    void* p = nullptr;
    // cudaMalloc aligns to 256 bytes, more than any kernel needs. A 0-byte
    // request still gets a distinct pointer so tensors stay initialized.
    if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls are clean
      return nullptr;
    }
    ++num_allocs_;
    const int64_t in_use = bytes_in_use_ += static_cast<int64_t>(bytes);
    int64_t peak = peak_.load();
    while (in_use > peak && !peak_.compare_exchange_weak(peak, in_use)) {
    }
    int64_t largest = largest_.load();
    while (static_cast<int64_t>(bytes) > largest &&
           !largest_.compare_exchange_weak(largest, static_cast<int64_t>(bytes))) {
    }
    return p;
  }
  void DeallocateRaw(void* ptr, size_t bytes) override {
    // cudaFree waits for the device, so no kernel still reads the buffer.
    cudaFree(ptr);
    bytes_in_use_ -= static_cast<int64_t>(bytes);
  }
  AllocatorStats GetStats() const override {
    AllocatorStats s;
    s.num_allocs = num_allocs_.load();
    s.bytes_in_use = bytes_in_use_.load();
    s.peak_bytes_in_use = peak_.load();
    s.largest_alloc_size = largest_.load();
    return s;
  }

 private:
  const int ordinal_;
  std::atomic<int64_t> num_allocs_{0}, bytes_in_use_{0}, peak_{0}, largest_{0};
};

}  // namespace

bool GpuAvailable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = err != cudaSuccess ? absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(err))
                                : "cudaGetDeviceCount found 0 GPUs";
    }
    cudaGetLastError();
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<TestGpuDevice>> TestGpuDevice::Create(int ordinal) {
  std::unique_ptr<TestGpuDevice> d(new TestGpuDevice());
  auto fail = [&](const char* what, const std::string& msg) {
    return absl::FailedPreconditionError(absl::StrCat("TestGpuDevice GPU:", ordinal, ": ", what, ": ", msg));
  };
  cudaError_t err = cudaSetDevice(ordinal);
  if (err != cudaSuccess) return fail("cudaSetDevice", cudaGetErrorString(err));
  cudaStream_t stream = nullptr;
  err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) return fail("cudaStreamCreate", cudaGetErrorString(err));
  d->context_.ordinal = ordinal;
  d->context_.stream = stream;
  d->blas_ = std::make_unique<gpu::BlasHandle>();
  if (absl::Status s = d->blas_->Init(ordinal, stream); !s.ok()) return fail("cuBLAS", std::string(s.message()));
  d->context_.blas = d->blas_->handle();
  d->name_ = absl::StrCat("/job:localhost/replica:0/task:0/device:GPU:", ordinal);
  d->allocator_ = std::make_unique<CudaMallocAllocator>(ordinal);
  d->host_allocator_ = std::make_unique<TrackingCpuAllocator>(absl::StrCat("test_gpu_host_", ordinal));
  d->pool_ = std::make_unique<Eigen::ThreadPool>(1);
  d->eigen_device_ = std::make_unique<Eigen::ThreadPoolDevice>(d->pool_.get(), 1);
  d->resource_mgr_ = std::make_unique<ResourceMgr>(d->name_);
  return d;
}

TestGpuDevice::~TestGpuDevice() {
  // Variables hold device buffers: free them while the context is alive.
  resource_mgr_.reset();
  if (context_.stream != nullptr) cudaStreamSynchronize(static_cast<cudaStream_t>(context_.stream));
  blas_.reset();  // before its stream
  if (context_.stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(context_.stream));
}

absl::Status TestGpuDevice::Synchronize() const {
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(context_.stream));
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(name_, ": ", cudaGetErrorString(err)));
}

absl::StatusOr<Tensor> ToDevice(TestGpuDevice* dev, const Tensor& t) {
  if (LivesInHostMemory(kDeviceGpu, t.dtype())) return t;
  STRATA_ASSIGN_OR_RETURN(Tensor d, Tensor::Allocate(dev->allocator(), t.dtype(), t.shape()));
  if (t.TotalBytes() > 0) {
    // On the device's own (non-blocking) stream: a plain cudaMemcpy runs on
    // the legacy stream, which does not order against it.
    cudaStream_t s = static_cast<cudaStream_t>(dev->gpu_context()->stream);
    cudaError_t err = cudaMemcpyAsync(d.raw_data(), t.raw_data(), t.TotalBytes(), cudaMemcpyHostToDevice, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) return absl::InternalError(absl::StrCat("ToDevice: ", cudaGetErrorString(err)));
  }
  return d;
}

absl::StatusOr<Tensor> ToHost(TestGpuDevice* dev, const Tensor& t) {
  STRATA_RETURN_IF_ERROR(dev->Synchronize());
  if (LivesInHostMemory(kDeviceGpu, t.dtype())) return t;
  Tensor h(t.dtype(), t.shape());
  if (t.TotalBytes() > 0) {
    cudaStream_t s = static_cast<cudaStream_t>(dev->gpu_context()->stream);
    cudaError_t err = cudaMemcpyAsync(h.raw_data(), t.raw_data(), t.TotalBytes(), cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) return absl::InternalError(absl::StrCat("ToHost: ", cudaGetErrorString(err)));
  }
  return h;
}

absl::StatusOr<std::vector<Tensor>> RunOnGpu(TestGpuDevice* dev, const std::string& op,
                                             const std::vector<Tensor>& inputs,
                                             const std::map<std::string, AttrValue>& attrs) {
  std::vector<Tensor> dev_inputs;
  for (const Tensor& t : inputs) {
    STRATA_ASSIGN_OR_RETURN(Tensor d, ToDevice(dev, t));
    dev_inputs.push_back(std::move(d));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunKernel(dev, op, dev_inputs, attrs));
  std::vector<Tensor> host;
  for (const Tensor& t : out) {
    STRATA_ASSIGN_OR_RETURN(Tensor h, ToHost(dev, t));
    host.push_back(std::move(h));
  }
  STRATA_RETURN_IF_ERROR(dev->Synchronize());
  return host;
}

}  // namespace strata
