// NcclCollectiveExecutor on a real GPU with one participant (a one-GPU
// machine can run no more): all-reduce, all-gather and broadcast of device
// tensors through the executor, read back; an aborted executor's collective
// fails with the abort's error. Skips without a GPU.
#include <cuda_runtime.h>

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/collective/nccl/nccl_collective_executor.h"

namespace strata {
namespace {

class CudaMallocAllocator : public Allocator {
 public:
  std::string Name() const override { return "cudaMalloc"; }
  void* AllocateRaw(size_t, size_t bytes) override {
    void* p = nullptr;
    return cudaMalloc(&p, bytes == 0 ? 1 : bytes) == cudaSuccess ? p : nullptr;
  }
  void DeallocateRaw(void* p, size_t) override { cudaFree(p); }
  AllocatorStats GetStats() const override { return {}; }
};

class TestGpu : public DeviceBase {
 public:
  TestGpu() {
    cudaSetDevice(0);
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ctx_.ordinal = 0;
    ctx_.stream = s;
  }
  ~TestGpu() override { cudaStreamDestroy(static_cast<cudaStream_t>(ctx_.stream)); }
  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  Allocator* allocator() const override { return &allocator_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }

  Tensor Upload(const std::vector<float>& v) {
    Tensor t(&allocator_, DT_FLOAT, TensorShape({static_cast<int64_t>(v.size())}));
    EXPECT_EQ(cudaMemcpy(t.raw_data(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    return t;
  }
  static std::vector<float> Download(const Tensor& t) {
    std::vector<float> v(t.NumElements());
    EXPECT_EQ(cudaMemcpy(v.data(), t.raw_data(), v.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }

 private:
  const std::string name_ = "/job:localhost/replica:0/task:0/device:GPU:0";
  const std::string type_ = kDeviceGpu;
  mutable CudaMallocAllocator allocator_;
  GpuDeviceContext ctx_;
};

bool HaveGpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

TEST(NcclCollectiveExecutorGpuTest, OneParticipantEndToEnd) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA GPU on this machine: NCCL tests need one";
  TestGpu gpu;
  NcclCollectiveExecutorOptions o;
  o.devices = {&gpu};
  auto ce = NcclCollectiveExecutor::Create(std::move(o));
  ASSERT_TRUE(ce.ok()) << ce.status();
  const std::vector<float> in = {1, -2, 3.5f, 8};
  CollectiveParams p;
  p.group_size = 1;
  p.group_key = 1;
  p.device = gpu.name();
  p.dtype = DT_FLOAT;
  p.shape = TensorShape({4});
  for (CollectiveType type : {CollectiveType::kAllReduce, CollectiveType::kAllGather,
                              CollectiveType::kBroadcastSend}) {
    p.type = type;
    ++p.instance_key;
    p.final_op = type == CollectiveType::kAllReduce ? FinalOp::kDiv : FinalOp::kId;
    auto out = (*ce)->Execute(p, gpu.Upload(in), gpu.allocator(), nullptr);
    ASSERT_TRUE(out.ok()) << CollectiveTypeName(type) << ": " << out.status();
    EXPECT_EQ(TestGpu::Download(*out), in) << CollectiveTypeName(type);
  }
  EXPECT_TRUE((*ce)->fatal_error().ok());

  // Reduce-scatter over one rank: its whole input, divided by 1.
  p.type = CollectiveType::kReduceScatter;
  ++p.instance_key;
  p.final_op = FinalOp::kDiv;
  auto scattered = (*ce)->Execute(p, gpu.Upload(in), gpu.allocator(), nullptr);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  EXPECT_EQ(TestGpu::Download(*scattered), in);

  (*ce)->Abort(absl::UnavailableError("task 1 lost"));
  ++p.instance_key;
  auto out = (*ce)->Execute(p, gpu.Upload(in), gpu.allocator(), nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "task 1 lost")) << out.status();
}

}  // namespace
}  // namespace strata
