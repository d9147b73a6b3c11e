#include "strategy/strategy_devices.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"

namespace strata {
namespace distribute {
namespace {

constexpr char kCpu0[] = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr char kCpu1[] = "/job:localhost/replica:0/task:0/device:CPU:1";
constexpr char kGpu0[] = "/job:localhost/replica:0/task:0/device:GPU:0";

DeviceOptions Cpus(int n) {
  DeviceOptions o;
  o.num_cpu_devices = n;
  o.intra_op_threads_per_device = 1;
  return o;
}

// Whether this process can make a GPU device (a --config=cuda build on a
// machine with a GPU).
bool HaveGpu() {
  DeviceOptions o = Cpus(1);
  o.num_gpus = 1;
  return CreateDeviceMgr(o).ok();
}

TEST(StrategyDevicesTest, GpuNames) {
  EXPECT_TRUE(AllGpus({"/gpu:0", "/device:GPU:1", kGpu0}));
  EXPECT_FALSE(AllGpus({"/gpu:0", "/cpu:0"}));
  EXPECT_FALSE(AllGpus({}));
  EXPECT_TRUE(AnyGpu({"/cpu:0", "/gpu:3"}));
  EXPECT_FALSE(AnyGpu({"/cpu:0", kCpu1, "not a device"}));
  EXPECT_TRUE(CheckNotMixed("S", {"/cpu:0", "/cpu:1"}).ok());
  EXPECT_TRUE(CheckNotMixed("S", {"/gpu:0", "/gpu:1"}).ok());
  absl::Status mixed = CheckNotMixed("MirroredStrategy", {kCpu0, kGpu0});
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(mixed.message(), "MirroredStrategy")) << mixed;
  EXPECT_TRUE(absl::StrContains(mixed.message(), kGpu0)) << mixed;
}

TEST(StrategyDevicesTest, CpuSpecsMakeNoDevices) {
  absl::StatusOr<PreparedDevices> p = PrepareDevices({"/cpu:1", "/cpu:0"}, Cpus(2), true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->devices, (std::vector<std::string>{kCpu1, kCpu0}));
  EXPECT_EQ(p->device_mgr, nullptr);
  EXPECT_EQ(p->options.num_gpus, 0);
}

TEST(StrategyDevicesTest, ResolutionErrorsNameTheSpec) {
  for (const std::vector<std::string>& specs :
       std::vector<std::vector<std::string>>{{"/cpu:7"}, {"/cpu:0", "/device:CPU:0"}, {"/cpu:*"}}) {
    absl::StatusOr<PreparedDevices> p = PrepareDevices(specs, Cpus(2), false);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
    EXPECT_TRUE(absl::StrContains(p.status().message(), specs.back())) << p.status();
  }
}

TEST(StrategyDevicesTest, DefaultIsEveryGpuElseTheFirstCpu) {
  absl::StatusOr<PreparedDevices> p = PrepareDevices({}, Cpus(2), /*default_to_gpus=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  if (HaveGpu()) {
    ASSERT_FALSE(p->devices.empty());
    EXPECT_TRUE(AllGpus(p->devices));
    EXPECT_NE(p->device_mgr, nullptr);
    EXPECT_EQ(p->options.num_gpus, -1);
  } else {
    EXPECT_EQ(p->devices, std::vector<std::string>{kCpu0});
    EXPECT_EQ(p->device_mgr, nullptr);  // the CPU path, as before GPUs
    EXPECT_EQ(p->options.num_gpus, 0);
  }
  absl::StatusOr<PreparedDevices> cpu = PrepareDevices({}, Cpus(2), /*default_to_gpus=*/false);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->devices, std::vector<std::string>{kCpu0});
}

TEST(StrategyDevicesTest, MissingGpuIsAnErrorNamingIt) {
  const int have = HaveGpu() ? 1 : 0;
  // An ordinal past any lent machine's GPUs, and /gpu:0 where there is none.
  std::vector<std::string> asks = {"/gpu:63"};
  if (have == 0) asks.push_back("/gpu:0");
  for (const std::string& ask : asks) {
    for (int num_gpus : {0, -1}) {
      DeviceOptions machine = Cpus(1);
      machine.num_gpus = num_gpus;
      absl::StatusOr<PreparedDevices> p = PrepareDevices({ask}, machine, false);
      ASSERT_FALSE(p.ok()) << ask;
      EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
      EXPECT_TRUE(absl::StrContains(p.status().message(), absl::StrCat("unknown device '", ask, "'")))
          << p.status();
      // The reason: no GPU, or a build without CUDA.
      EXPECT_TRUE(absl::StrContains(p.status().message(), "GPU")) << p.status();
    }
  }
}

TEST(StrategyDevicesTest, StrategiesOnAGpuThatIsNotThere) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a GPU (strategy_gpu_test covers it)";
  absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> one = OneDeviceStrategy::Create("/gpu:0", Cpus(1));
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(one.status().message(), "unknown device '/gpu:0'")) << one.status();
#if STRATA_WITH_CUDA
  EXPECT_TRUE(absl::StrContains(one.status().message(), "no GPU")) << one.status();
#else
  EXPECT_TRUE(absl::StrContains(one.status().message(), "without CUDA")) << one.status();
#endif

  absl::StatusOr<std::unique_ptr<MirroredStrategy>> two =
      MirroredStrategy::Create({"/gpu:0", "/gpu:1"}, Cpus(1));
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(two.status().message(), "unknown device '/gpu:1'")) << two.status();

  // The default still trains on the CPU, with the session's own devices.
  absl::StatusOr<std::unique_ptr<MirroredStrategy>> d = MirroredStrategy::Create({}, Cpus(2));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->devices(), std::vector<std::string>{kCpu0});
  EXPECT_EQ((*d)->device_mgr(), nullptr);
  EXPECT_EQ((*d)->session_options().device_mgr, nullptr);
  EXPECT_EQ((*d)->session_options().collective_executor, nullptr);
}

TEST(StrategyDevicesTest, GpuCollectivesNeedGpuDevices) {
  absl::StatusOr<std::unique_ptr<DeviceMgr>> mgr = CreateDeviceMgr(Cpus(1));
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  absl::StatusOr<GpuCollectives> nccl = MakeGpuCollectives(**mgr, {kCpu0}, {});
  ASSERT_FALSE(nccl.ok());
#if STRATA_WITH_CUDA
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kInvalidArgument) << nccl.status();
  EXPECT_TRUE(absl::StrContains(nccl.status().message(), "not a GPU")) << nccl.status();
#else
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition) << nccl.status();
  EXPECT_TRUE(absl::StrContains(nccl.status().message(), "without CUDA")) << nccl.status();
#endif
  EXPECT_TRUE(absl::StrContains(nccl.status().message(), kCpu0)) << nccl.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
