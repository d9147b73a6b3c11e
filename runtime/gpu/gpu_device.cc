#include "runtime/gpu/gpu_device.h"


#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/eigen_views.h"
#include "runtime/gpu/cuda_status.h"
#include "runtime/gpu/gpu_info.h"
#include "runtime/gpu/gpu_step_recording.h"

namespace strata {

namespace {

// cudaMalloc on one GPU. Regions are large and few, so setting the device
// per call costs nothing that matters.
class GpuSubAllocator : public SubAllocator {
 public:
  explicit GpuSubAllocator(int ordinal) : ordinal_(ordinal) {}
  void* Alloc(size_t bytes) override {
    if (cudaSetDevice(ordinal_) != cudaSuccess) return nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();  // an out-of-memory error is not sticky; clear it
      return nullptr;
    }
    return p;
  }
  void Free(void* p, size_t) override {
    cudaSetDevice(ordinal_);
    cudaFree(p);
  }

 private:
  const int ordinal_;
};

// Pinned host memory: copies from and to it run asynchronously with the host.
class PinnedSubAllocator : public SubAllocator {
 public:
  void* Alloc(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void Free(void* p, size_t) override { cudaFreeHost(p); }
};

struct ProcessAllocators {
  BfcAllocator* device = nullptr;
  BfcAllocator* host = nullptr;
};

// One pair per ordinal for the whole process, never destroyed: tensors made
// by a device may outlive it and must still be able to give their buffers
// back.
ProcessAllocators GetProcessAllocators(int ordinal, size_t device_limit) {
  static Mutex* mu = new Mutex;
  static auto* table = new std::map<int, ProcessAllocators>;
  MutexLock l(mu);
  ProcessAllocators& a = (*table)[ordinal];
  if (a.device == nullptr) {
    BfcAllocator::Options dev;
    dev.bytes_limit = device_limit;
    dev.initial_region_bytes = size_t{64} << 20;
    a.device = new BfcAllocator(std::make_unique<GpuSubAllocator>(ordinal),
                                absl::StrCat("gpu_", ordinal, "_bfc"), dev);
    BfcAllocator::Options host;
    host.initial_region_bytes = size_t{8} << 20;
    a.host = new BfcAllocator(std::make_unique<PinnedSubAllocator>(),
                              absl::StrCat("gpu_", ordinal, "_pinned_host_bfc"), host);
  }
  return a;
}

}  // namespace

GpuDevice::GpuDevice(const DeviceName& name, int host_threads)
    : Device(name),
      pool_(std::make_unique<Eigen::ThreadPool>(host_threads)),
      eigen_device_(std::make_unique<Eigen::ThreadPoolDevice>(pool_.get(), host_threads)) {
  context_.ordinal = name.id;
}

absl::StatusOr<std::unique_ptr<GpuDevice>> GpuDevice::Create(const DeviceName& name,
                                                             const Options& options) {
  if (!name.IsFullySpecified() || name.type != kDeviceGpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a GPU device needs a full name of type GPU, got '", name.ToString(), "'"));
  }
  if (options.host_threads < 1 || options.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device ", name.ToString(), ": host_threads ",
                                                   options.host_threads, ", memory_limit_bytes ",
                                                   options.memory_limit_bytes));
  }
  const GpuCount count = CountGpus();
  if (count.count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("requested ", name.ToString(),
                     " but this machine has no GPU (cudaGetDeviceCount said ", count.why_none,
                     ")"));
  }
  if (name.id >= count.count) {
    return absl::FailedPreconditionError(absl::StrCat("requested ", name.ToString(),
                                                      " but this machine has ", count.count,
                                                      count.count == 1 ? " GPU" : " GPUs"));
  }
  std::unique_ptr<GpuDevice> d(new GpuDevice(name, options.host_threads));
  absl::Status s = d->Init(options);
  if (!s.ok()) return AnnotateStatus(s, absl::StrCat(name.ToString(), ": "));
  return d;
}

absl::Status GpuDevice::Init(const Options& options) {
  const int ord = context_.ordinal;
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ord), "cudaSetDevice"));
  int64_t limit = options.memory_limit_bytes;
  if (limit == 0) {
    size_t free_bytes = 0, total = 0;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
    limit = std::max<int64_t>(static_cast<int64_t>(free_bytes) - kReservedBytes,
                              static_cast<int64_t>(free_bytes) / 2);
  }
  ProcessAllocators a = GetProcessAllocators(ord, static_cast<size_t>(limit));
  allocator_ = a.device;
  host_allocator_ = a.host;
  // Non-blocking streams: no implicit ordering with the legacy default
  // stream, which other libraries in the process might use.
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking),
                                    "cudaStreamCreate (compute)"));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking),
                                    "cudaStreamCreate (host to device)"));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking),
                                    "cudaStreamCreate (device to host)"));
  blas_ = std::make_unique<gpu::BlasHandle>();
  STRATA_RETURN_IF_ERROR(blas_->Init(ord, compute_));
  context_.blas = blas_->handle();
  context_.stream = compute_;
  callback_thread_ = std::thread([this] { CallbackLoop(); });
  return absl::OkStatus();
}

GpuDevice::~GpuDevice() {
  DestroyResources();
  if (callback_thread_.joinable()) {
    // Work still queued on the GPU holds host functions that point here.
    Synchronize().IgnoreError();
    {
      MutexLock l(&cb_mu_);
      cb_mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cb_mu_) {
        return pending_host_funcs_ == 0 && callbacks_.empty();
      });
      stopping_ = true;
    }
    callback_thread_.join();
  }
  cudaSetDevice(context_.ordinal);
  blas_.reset();  // before its stream
  for (cudaStream_t s : {compute_, h2d_, d2h_}) {
    if (s != nullptr) cudaStreamDestroy(s);
  }
}

void GpuDevice::CallbackLoop() {
  for (;;) {
    std::function<void()> fn;
    {
      MutexLock l(&cb_mu_);
      cb_mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cb_mu_) {
        return stopping_ || !callbacks_.empty();
      });
      if (callbacks_.empty()) return;
      fn = std::move(callbacks_.front());
      callbacks_.pop_front();
    }
    fn();
  }
}

void GpuDevice::Enqueue(std::function<void()> fn) {
  MutexLock l(&cb_mu_);
  callbacks_.push_back(std::move(fn));
}

namespace {
struct HostFuncArg {
  GpuDevice* device;
  std::function<void()> fn;
};
}  // namespace

void CUDART_CB GpuDevice::HostFunc(void* arg) {
  // Runs on a CUDA thread, where CUDA calls are forbidden: hand over to the
  // callback thread.
  auto* a = static_cast<HostFuncArg*>(arg);
  GpuDevice* d = a->device;
  MutexLock l(&d->cb_mu_);
  d->callbacks_.push_back(std::move(a->fn));
  --d->pending_host_funcs_;
  delete a;
}

absl::Status GpuDevice::ThenRun(cudaStream_t stream, std::function<void()> fn) {
  auto* arg = new HostFuncArg{this, std::move(fn)};
  {
    MutexLock l(&cb_mu_);
    ++pending_host_funcs_;
  }
  cudaError_t err = cudaLaunchHostFunc(stream, &GpuDevice::HostFunc, arg);
  if (err != cudaSuccess) {
    {
      MutexLock l(&cb_mu_);
      --pending_host_funcs_;
    }
    delete arg;
    return CudaStatus(err, absl::StrCat(name(), ": cudaLaunchHostFunc"));
  }
  return absl::OkStatus();
}

absl::Status GpuDevice::StreamWait(cudaStream_t first, cudaStream_t after) {
  cudaEvent_t ev;
  STRATA_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate"));
  absl::Status s = CudaStatus(cudaEventRecord(ev, first), "cudaEventRecord");
  if (s.ok()) s = CudaStatus(cudaStreamWaitEvent(after, ev, 0), "cudaStreamWaitEvent");
  // Destroying a recorded event is fine: its resources go when it completes.
  cudaEventDestroy(ev);
  return s;
}

namespace {
// Never DebugString: that would read device memory from the host.
std::string Describe(const Tensor* t) {
  if (t == nullptr || !t->IsInitialized()) return "an empty tensor";
  return absl::StrCat(DataTypeString(t->dtype()), " ", t->shape().DebugString());
}
}  // namespace

absl::Status GpuDevice::CheckCopy(const Tensor& src, const Tensor* dst, const char* what) const {
  if (dst == nullptr || !src.IsInitialized() || !dst->IsInitialized() ||
      src.dtype() != dst->dtype() || src.TotalBytes() != dst->TotalBytes()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", what,
                                                   " needs two tensors of one dtype and size, got ",
                                                   Describe(&src), " and ", Describe(dst)));
  }
  return absl::OkStatus();
}

void GpuDevice::CopyHostToDevice(const Tensor& host, Tensor* device, StatusCallback done) {
  absl::Status s = CheckCopy(host, device, "CopyHostToDevice");
  if (s.ok()) s = CudaStatus(cudaSetDevice(ordinal()), "cudaSetDevice");
  // The destination may be a buffer that compute work enqueued earlier has
  // just freed: the copy waits for that work.
  if (s.ok()) s = StreamWait(compute_, h2d_);
  if (s.ok() && host.TotalBytes() > 0) {
    s = CudaStatus(cudaMemcpyAsync(device->raw_data(), host.raw_data(), host.TotalBytes(),
                                   cudaMemcpyHostToDevice, h2d_),
                   "cudaMemcpyAsync host to device");
  }
  if (s.ok()) s = StreamWait(h2d_, compute_);
  if (s.ok()) s = ThenRun(h2d_, [host, done] { done(absl::OkStatus()); });
  if (!s.ok()) done(AnnotateStatus(s, absl::StrCat(name(), ": ")));
}

void GpuDevice::CopyDeviceToHost(const Tensor& device, Tensor* host, StatusCallback done) {
  absl::Status s = CheckCopy(device, host, "CopyDeviceToHost");
  if (s.ok()) s = CudaStatus(cudaSetDevice(ordinal()), "cudaSetDevice");
  // The kernels that write the source run on the compute stream.
  if (s.ok()) s = StreamWait(compute_, d2h_);
  if (s.ok() && device.TotalBytes() > 0) {
    s = CudaStatus(cudaMemcpyAsync(host->raw_data(), device.raw_data(), device.TotalBytes(),
                                   cudaMemcpyDeviceToHost, d2h_),
                   "cudaMemcpyAsync device to host");
  }
  // The source stays referenced until the copy is over, so its buffer cannot
  // be handed to a kernel that would overwrite it mid-copy.
  if (s.ok()) s = ThenRun(d2h_, [device, done] { done(absl::OkStatus()); });
  if (!s.ok()) done(AnnotateStatus(s, absl::StrCat(name(), ": ")));
}

void GpuDevice::CopyDeviceToDevice(const Tensor& src, Tensor* dst, StatusCallback done) {
  absl::Status s = CheckCopy(src, dst, "CopyDeviceToDevice");
  if (s.ok()) s = CudaStatus(cudaSetDevice(ordinal()), "cudaSetDevice");
  if (s.ok() && src.TotalBytes() > 0) {
    s = CudaStatus(cudaMemcpyAsync(dst->raw_data(), src.raw_data(), src.TotalBytes(),
                                   cudaMemcpyDeviceToDevice, compute_),
                   "cudaMemcpyAsync device to device");
  }
  if (s.ok()) s = ThenRun(compute_, [src, done] { done(absl::OkStatus()); });
  if (!s.ok()) done(AnnotateStatus(s, absl::StrCat(name(), ": ")));
}

namespace {
absl::Status WaitFor(const std::function<void(GpuDevice::StatusCallback)>& start) {
  Notification n;
  absl::Status status;
  start([&](absl::Status s) {
    status = std::move(s);
    n.Notify();
  });
  n.WaitForNotification();
  return status;
}
}  // namespace

absl::Status GpuDevice::CopyHostToDeviceSync(const Tensor& host, Tensor* device) {
  return WaitFor([&](StatusCallback done) { CopyHostToDevice(host, device, std::move(done)); });
}

absl::Status GpuDevice::CopyDeviceToHostSync(const Tensor& device, Tensor* host) {
  return WaitFor([&](StatusCallback done) { CopyDeviceToHost(device, host, std::move(done)); });
}

absl::Status GpuDevice::Synchronize() {
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal()), "cudaSetDevice"));
  for (cudaStream_t s : {compute_, h2d_, d2h_}) {
    if (s == nullptr) continue;
    absl::Status st = CudaStatus(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (!st.ok()) return AnnotateStatus(st, absl::StrCat(name(), ": "));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateGpuDevices(const DeviceOptions& opts) {
  std::vector<std::unique_ptr<Device>> out;
  if (opts.num_gpus == 0) return out;
  if (opts.num_gpus < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_gpus is ", opts.num_gpus, "; -1 (every GPU), 0 or a count"));
  }
  const GpuCount count = CountGpus();
  int n = opts.num_gpus;
  if (n == -1) {
    n = count.count;
  } else if (count.count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "requested /device:GPU:0 but this machine has no GPU (cudaGetDeviceCount said ",
        count.why_none, ")"));
  } else if (n > count.count) {
    return absl::FailedPreconditionError(absl::StrCat("requested /device:GPU:", n - 1,
                                                      " but this machine has ", count.count,
                                                      count.count == 1 ? " GPU" : " GPUs"));
  }
  GpuDevice::Options gopts;
  gopts.memory_limit_bytes = opts.gpu_memory_limit_bytes;
  for (int i = 0; i < n; ++i) {
    STRATA_ASSIGN_OR_RETURN(
        std::unique_ptr<GpuDevice> d,
        GpuDevice::Create(DeviceName::Full(opts.job, opts.replica, opts.task, kDeviceGpu, i), gopts));
    out.push_back(std::move(d));
  }
  return out;
}

namespace {
// Linking this library (alwayslink) lets CreateDeviceMgr make GPU devices.
[[maybe_unused]] const bool registered = [] {
  RegisterGpuDeviceFactory(&CreateGpuDevices);
  return true;
}();
}  // namespace

absl::StatusOr<std::unique_ptr<StepRecording>> GpuDevice::NewStepRecording() {
  return NewGpuStepRecording(this);
}

}  // namespace strata
