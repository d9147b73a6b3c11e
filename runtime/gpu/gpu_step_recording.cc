#include "runtime/gpu/gpu_step_recording.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/blas_handle.h"
#include "runtime/gpu/cuda_status.h"
#include "runtime/gpu/gpu_device.h"
#include "runtime/recording_arena.h"

namespace strata {

namespace {

// What the recorded kernels see: the GPU device with the recording's stream,
// cuBLAS handle and arenas.
class RecordingDevice : public DeviceBase {
 public:
  RecordingDevice(GpuDevice* gpu, const GpuDeviceContext& ctx, Allocator* mem, Allocator* host)
      : gpu_(gpu), ctx_(ctx), mem_(mem), host_(host) {}
  const std::string& name() const override { return gpu_->name(); }
  const std::string& device_type() const override { return gpu_->device_type(); }
  Allocator* allocator() const override { return mem_; }
  Allocator* host_allocator() const override { return host_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return gpu_->eigen_cpu_device(); }
  ResourceMgr* resource_manager() const override { return gpu_->resource_manager(); }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }

 private:
  GpuDevice* const gpu_;
  const GpuDeviceContext ctx_;
  Allocator* const mem_;
  Allocator* const host_;
};

class GpuStepRecording : public StepRecording {
 public:
  explicit GpuStepRecording(GpuDevice* gpu) : gpu_(gpu) {}

  ~GpuStepRecording() override {
    cudaSetDevice(gpu_->ordinal());
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (joined_ != nullptr) cudaEventDestroy(joined_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    device_.reset();
    blas_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (mem_ != nullptr) mem_->Release();
    if (host_ != nullptr) host_->Release();
  }

  absl::Status Init() {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_->ordinal()), "cudaSetDevice"));
    STRATA_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "recording stream"));
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming), "event"));
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "event"));
    blas_ = std::make_unique<gpu::BlasHandle>();
    STRATA_RETURN_IF_ERROR(blas_->Init(gpu_->ordinal(), stream_));
    mem_ = RecordingArena::New(gpu_->allocator(), absl::StrCat(gpu_->name(), " recording"), /*reuse=*/true);
    host_ = RecordingArena::New(gpu_->host_allocator(), absl::StrCat(gpu_->name(), " recording (host)"),
                                /*reuse=*/false);
    GpuDeviceContext ctx;
    ctx.ordinal = gpu_->ordinal();
    ctx.stream = stream_;
    ctx.blas = blas_->handle();
    device_ = std::make_unique<RecordingDevice>(gpu_, ctx, mem_, host_);
    return absl::OkStatus();
  }

  DeviceBase* device() override { return device_.get(); }

  absl::Status Begin() override {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_->ordinal()), "cudaSetDevice"));
    // Nothing recorded runs now; each Replay joins the streams first.
    return CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed),
                      "cudaStreamBeginCapture");
  }

  absl::Status End() override {
    cudaGraph_t graph = nullptr;
    absl::Status s = CudaStatus(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    if (s.ok() && graph == nullptr) s = absl::InternalError("cudaStreamEndCapture gave no graph");
    if (s.ok()) s = CudaStatus(cudaGraphInstantiate(&exec_, graph, 0), "cudaGraphInstantiate");
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!s.ok()) cudaGetLastError();  // a capture error is not sticky; clear it
    return s;
  }

  absl::Status CopyIn(const Tensor& value, Tensor* buffer) override {
    if (value.TotalBytes() != buffer->TotalBytes()) {
      return absl::InternalError(absl::StrCat("recording input of ", value.TotalBytes(), " bytes into a buffer of ",
                                              buffer->TotalBytes()));
    }
    if (value.TotalBytes() == 0) return absl::OkStatus();
    if (LivesInHostMemory(gpu_->device_type(), value.dtype())) {
      // The last replay's copies may still read the buffer.
      if (launched_) STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(done_), "waiting for the last replay"));
      std::memcpy(buffer->raw_data(), value.raw_data(), value.TotalBytes());
      return absl::OkStatus();
    }
    return CudaStatus(cudaMemcpyAsync(buffer->raw_data(), value.raw_data(), value.TotalBytes(),
                                      cudaMemcpyDeviceToDevice, gpu_->compute_stream()),
                      "recording input copy");
  }

  absl::Status Replay() override {
    if (exec_ == nullptr) return absl::FailedPreconditionError("replay of a recording that was not made");
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_->ordinal()), "cudaSetDevice"));
    STRATA_RETURN_IF_ERROR(Join(stream_, gpu_->compute_stream()));
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"));
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
    launched_ = true;
    return CudaStatus(cudaStreamWaitEvent(gpu_->compute_stream(), done_, 0), "cudaStreamWaitEvent");
  }

  absl::StatusOr<Tensor> CopyOut(const Tensor& buffer) override {
    const bool host = LivesInHostMemory(gpu_->device_type(), buffer.dtype());
    STRATA_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(host ? gpu_->host_allocator() : gpu_->allocator(),
                                                         buffer.dtype(), buffer.shape()));
    if (buffer.TotalBytes() == 0) return out;
    if (host) {
      // A host-memory output is made while recording (shape arithmetic), the
      // same every step.
      std::memcpy(out.raw_data(), buffer.raw_data(), buffer.TotalBytes());
      return out;
    }
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(out.raw_data(), buffer.raw_data(), buffer.TotalBytes(),
                                                      cudaMemcpyDeviceToDevice, gpu_->compute_stream()),
                                      "recording output copy"));
    return out;
  }

 private:
  // `waiter` runs its later work after what `first` has enqueued so far.
  absl::Status Join(cudaStream_t waiter, cudaStream_t first) {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(joined_, first), "cudaEventRecord"));
    return CudaStatus(cudaStreamWaitEvent(waiter, joined_, 0), "cudaStreamWaitEvent");
  }

  GpuDevice* const gpu_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t joined_ = nullptr;
  cudaEvent_t done_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool launched_ = false;
  std::unique_ptr<gpu::BlasHandle> blas_;
  RecordingArena* mem_ = nullptr;   // released, not deleted
  RecordingArena* host_ = nullptr;
  std::unique_ptr<RecordingDevice> device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepRecording>> NewGpuStepRecording(GpuDevice* device) {
  auto rec = std::make_unique<GpuStepRecording>(device);
  STRATA_RETURN_IF_ERROR(rec->Init());
  return std::unique_ptr<StepRecording>(std::move(rec));
}

}  // namespace strata
