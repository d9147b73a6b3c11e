// GpuDevice on a real GPU; without one, only the "no GPU" errors are checked
// and the rest skips.
#include "runtime/gpu/gpu_device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/gpu/gpu_info.h"

namespace strata {
namespace {

DeviceName Gpu(int i) { return DeviceName::Full("localhost", 0, 0, kDeviceGpu, i); }

TEST(GpuDeviceTest, MissingGpuIsAClearError) {
  const GpuCount c = CountGpus();
  auto d = GpuDevice::Create(Gpu(c.count), GpuDevice::Options());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find(absl::StrCat("requested ", Gpu(c.count).ToString())),
            std::string::npos)
      << d.status();
  if (c.count == 0) {
    EXPECT_NE(d.status().message().find("this machine has no GPU"), std::string::npos) << d.status();
  }
  DeviceOptions opts;
  opts.intra_op_threads_per_device = 1;
  opts.num_gpus = c.count + 1;
  auto mgr = CreateDeviceMgr(opts);
  EXPECT_EQ(mgr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mgr.status().message().find(absl::StrCat("requested /device:GPU:", c.count)),
            std::string::npos)
      << mgr.status();
  opts.num_gpus = -1;  // every local GPU: none is fine
  mgr = CreateDeviceMgr(opts);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  EXPECT_EQ(static_cast<int>((*mgr)->devices().size()), 1 + c.count);
}

class OnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuCount c = CountGpus();
    if (c.count == 0) GTEST_SKIP() << "no GPU: cudaGetDeviceCount said " << c.why_none;
    auto d = GpuDevice::Create(Gpu(0), GpuDevice::Options());
    ASSERT_TRUE(d.ok()) << d.status();
    dev_ = *std::move(d);
  }
  std::unique_ptr<GpuDevice> dev_;
};

TEST_F(OnGpu, ContextAndAllocators) {
  const GpuDeviceContext* ctx = dev_->gpu_context();
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(ctx->ordinal, 0);
  EXPECT_EQ(ctx->stream, static_cast<void*>(dev_->compute_stream()));
  EXPECT_NE(ctx->blas, nullptr);
  EXPECT_NE(dev_->allocator(), dev_->host_allocator());
  EXPECT_NE(dev_->eigen_cpu_device(), nullptr);
  EXPECT_EQ(dev_->device_type(), "GPU");
  Tensor t(dev_->allocator(), DT_FLOAT, TensorShape{1000});
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, t.raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  Tensor h(dev_->host_allocator(), DT_INT32, TensorShape{4});
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h.raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "host-memory tensors are pinned";
  h.data<int32_t>()[0] = 7;  // readable from the host
  EXPECT_GE(dev_->memory_stats().base.bytes_in_use, 4000);
}

TEST_F(OnGpu, CopiesRoundTripThroughDeviceMemory) {
  const int n = 1 << 20;
  Tensor host(DT_FLOAT, TensorShape{n});
  for (int i = 0; i < n; ++i) host.data<float>()[i] = static_cast<float>(i % 977);
  Tensor a(dev_->allocator(), DT_FLOAT, TensorShape{n});
  Tensor b(dev_->allocator(), DT_FLOAT, TensorShape{n});
  Tensor back(dev_->host_allocator(), DT_FLOAT, TensorShape{n});
  ASSERT_TRUE(dev_->CopyHostToDeviceSync(host, &a).ok());
  Notification n1;
  absl::Status d2d;
  dev_->CopyDeviceToDevice(a, &b, [&](absl::Status s) {
    d2d = s;
    n1.Notify();
  });
  n1.WaitForNotification();
  ASSERT_TRUE(d2d.ok()) << d2d;
  ASSERT_TRUE(dev_->CopyDeviceToHostSync(b, &back).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(back.data<float>()[i], host.data<float>()[i]) << i;
  ASSERT_TRUE(dev_->Synchronize().ok());
}

TEST_F(OnGpu, MismatchedCopyIsInvalidArgument) {
  Tensor host(DT_FLOAT, TensorShape{4});
  Tensor dev(dev_->allocator(), DT_FLOAT, TensorShape{5});
  absl::Status s = dev_->CopyHostToDeviceSync(host, &dev);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[5]"), std::string::npos) << s;
}

TEST_F(OnGpu, OutOfDeviceMemoryIsResourceExhaustedNamingTheSize) {
  auto t = Tensor::Allocate(dev_->allocator(), DT_FLOAT, TensorShape{int64_t{1} << 40});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(t.status().message().find("4398046511104 bytes"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("gpu_0_bfc"), std::string::npos) << t.status();
}

TEST_F(OnGpu, CublasRunsOnTheComputeStream) {
  // C = A * B with A = all 1, B = all 2 (k = 64): every C entry is 128.
  const int m = 32, k = 64, nn = 16;
  Tensor ha(DT_FLOAT, TensorShape{m, k}), hb(DT_FLOAT, TensorShape{k, nn});
  std::fill_n(ha.data<float>(), m * k, 1.0f);
  std::fill_n(hb.data<float>(), k * nn, 2.0f);
  Tensor da(dev_->allocator(), DT_FLOAT, ha.shape()), db(dev_->allocator(), DT_FLOAT, hb.shape());
  Tensor dc(dev_->allocator(), DT_FLOAT, TensorShape{m, nn});
  ASSERT_TRUE(dev_->CopyHostToDeviceSync(ha, &da).ok());
  ASSERT_TRUE(dev_->CopyHostToDeviceSync(hb, &db).ok());
  const float one = 1.0f, zero = 0.0f;
  auto blas = static_cast<cublasHandle_t>(dev_->gpu_context()->blas);
  // Row-major C = A B is column-major C^T = B^T A^T.
  ASSERT_EQ(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, nn, m, k, &one, db.data<float>(), nn,
                        da.data<float>(), k, &zero, dc.data<float>(), nn),
            CUBLAS_STATUS_SUCCESS);
  Tensor hc(DT_FLOAT, dc.shape());
  ASSERT_TRUE(dev_->CopyDeviceToHostSync(dc, &hc).ok());
  for (int i = 0; i < m * nn; ++i) ASSERT_EQ(hc.data<float>()[i], 128.0f) << i;
}

}  // namespace
}  // namespace strata
