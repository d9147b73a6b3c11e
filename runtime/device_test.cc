#include "runtime/device.h"

#include "absl/strings/str_cat.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(DeviceTest, OneCpuDeviceByDefault) {
  auto mgr = CreateCpuDeviceMgr(DeviceOptions());
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  ASSERT_EQ((*mgr)->devices().size(), 1u);
  Device* d = (*mgr)->devices()[0];
  EXPECT_EQ(d->name(), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(d->device_type(), "CPU");
  EXPECT_NE(d->eigen_cpu_device(), nullptr);
  EXPECT_NE(d->incarnation(), 0u);
}

TEST(DeviceTest, VirtualCpuDevicesHaveSeparateAllocators) {
  DeviceOptions opts;
  opts.num_cpu_devices = 3;
  opts.intra_op_threads_per_device = 1;
  auto mgr = CreateCpuDeviceMgr(opts);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  const auto& devs = (*mgr)->devices();
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[2]->name(), "/job:localhost/replica:0/task:0/device:CPU:2");
  EXPECT_NE(devs[0]->allocator(), devs[1]->allocator());
  EXPECT_NE(devs[0]->incarnation(), devs[1]->incarnation());
  {
    Tensor t(devs[1]->allocator(), DT_FLOAT, TensorShape{256});
    EXPECT_EQ(devs[1]->allocator()->GetStats().bytes_in_use, 1024);
    EXPECT_EQ(devs[0]->allocator()->GetStats().bytes_in_use, 0);
  }
  EXPECT_EQ(devs[1]->allocator()->GetStats().bytes_in_use, 0);
  EXPECT_EQ(devs[1]->allocator()->GetStats().peak_bytes_in_use, 1024);
}

TEST(DeviceTest, LookupByFullAndPartialNames) {
  DeviceOptions opts;
  opts.num_cpu_devices = 2;
  opts.intra_op_threads_per_device = 1;
  auto mgr = std::move(CreateCpuDeviceMgr(opts)).value();
  auto d1 = mgr->LookupDevice("/cpu:1");
  ASSERT_TRUE(d1.ok());
  EXPECT_EQ((*d1)->parsed_name().id, 1);
  auto full = mgr->LookupDevice("/job:localhost/replica:0/task:0/device:CPU:0");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(*full, mgr->devices()[0]);
  auto any = mgr->LookupDevice("/device:CPU:*");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(*any, mgr->devices()[0]);
  EXPECT_EQ(mgr->MatchingDevices(*DeviceName::Parse("/device:CPU:*")).size(), 2u);

  auto gpu = mgr->LookupDevice("/gpu:0");
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(gpu.status().message().find("CPU:1"), std::string::npos) << gpu.status();
  EXPECT_EQ(mgr->LookupDevice("cpu0").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceTest, BadOptionsAreRejected) {
  DeviceOptions opts;
  opts.num_cpu_devices = 0;
  EXPECT_EQ(CreateCpuDeviceMgr(opts).status().code(), absl::StatusCode::kInvalidArgument);
  opts.num_cpu_devices = 1;
  opts.intra_op_threads_per_device = -2;
  EXPECT_EQ(CreateCpuDeviceMgr(opts).status().code(), absl::StatusCode::kInvalidArgument);
  opts.intra_op_threads_per_device = 1;
  opts.job = "9bad";
  EXPECT_EQ(CreateCpuDeviceMgr(opts).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpuDevice::Create(*DeviceName::Parse("/cpu:0"), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceTest, MemoryLimitIsPerDevice) {
  DeviceOptions opts;
  opts.intra_op_threads_per_device = 1;
  opts.cpu_memory_limit_bytes = 1000;
  auto mgr = std::move(CreateCpuDeviceMgr(opts)).value();
  auto big = Tensor::Allocate(mgr->devices()[0]->allocator(), DT_FLOAT, TensorShape{1000});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
}


TEST(DeviceTest, NoGpusUnlessAsked) {
  DeviceOptions opts;
  opts.intra_op_threads_per_device = 1;
  EXPECT_EQ(opts.num_gpus, 0);
  auto mgr = CreateDeviceMgr(opts);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  EXPECT_EQ((*mgr)->devices().size(), 1u);
}

TEST(DeviceTest, GpusInABinaryWithoutCudaAreAClearError) {
  RegisterGpuDeviceFactory(nullptr);
  DeviceOptions opts;
  opts.intra_op_threads_per_device = 1;
  opts.num_gpus = 1;
  auto mgr = CreateDeviceMgr(opts);
  EXPECT_EQ(mgr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mgr.status().message().find("requested /device:GPU:0"), std::string::npos)
      << mgr.status();
  EXPECT_NE(mgr.status().message().find("--config=cuda"), std::string::npos) << mgr.status();
  // "Every local GPU" is none here, which is fine.
  opts.num_gpus = -1;
  mgr = CreateDeviceMgr(opts);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  EXPECT_EQ((*mgr)->devices().size(), 1u);
  opts.num_gpus = -2;
  EXPECT_EQ(CreateDeviceMgr(opts).status().code(), absl::StatusCode::kInvalidArgument);
}

// Stands in for a GPU: the device manager only names and orders devices.
class FakeGpu : public Device {
 public:
  explicit FakeGpu(const DeviceName& n) : Device(n) {}
  Allocator* allocator() const override { return CpuAllocator(); }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
};

absl::StatusOr<std::vector<std::unique_ptr<Device>>> TwoFakeGpus(const DeviceOptions& opts) {
  const int n = opts.num_gpus == -1 ? 2 : opts.num_gpus;
  if (n > 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("requested /device:GPU:", n - 1, " but this machine has 2 GPUs"));
  }
  std::vector<std::unique_ptr<Device>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<FakeGpu>(
        DeviceName::Full(opts.job, opts.replica, opts.task, kDeviceGpu, i)));
  }
  return out;
}

TEST(DeviceTest, RegisteredGpuDevicesFollowTheCpus) {
  RegisterGpuDeviceFactory(&TwoFakeGpus);
  DeviceOptions opts;
  opts.intra_op_threads_per_device = 1;
  opts.num_gpus = -1;
  opts.job = "worker";
  auto mgr = CreateDeviceMgr(opts);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  const auto& devs = (*mgr)->devices();
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[0]->device_type(), "CPU");
  EXPECT_EQ(devs[1]->name(), "/job:worker/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(devs[2]->name(), "/job:worker/replica:0/task:0/device:GPU:1");
  auto gpu1 = (*mgr)->LookupDevice("/gpu:1");
  ASSERT_TRUE(gpu1.ok()) << gpu1.status();
  EXPECT_EQ(*gpu1, devs[2]);

  opts.num_gpus = 3;
  auto too_many = CreateDeviceMgr(opts);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(too_many.status().message().find("GPU:2"), std::string::npos) << too_many.status();
  RegisterGpuDeviceFactory(nullptr);
}

}  // namespace
}  // namespace strata
