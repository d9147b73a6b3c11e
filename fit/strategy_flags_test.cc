// The shared strategy flags: parsing, validation naming the flag, and the
// strategy each setting makes (in process; the multi-worker start-up is
// covered by the trainer's cluster tests, which now go through it).
#include "fit/strategy_flags.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace strata {
namespace fit {
namespace {

TEST(StrategyFlagsTest, ParseDeviceList) {
  EXPECT_EQ(*ParseDeviceList(""), std::vector<std::string>{});
  EXPECT_EQ(*ParseDeviceList("/cpu:0,/device:CPU:1"), (std::vector<std::string>{"/cpu:0", "/device:CPU:1"}));
  absl::StatusOr<std::vector<std::string>> bad = ParseDeviceList("/cpu:0,");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "--devices=/cpu:0,")) << bad.status();
}

TEST(StrategyFlagsTest, ConfigFromFlags) {
  absl::SetFlag(&FLAGS_strategy, "mirrored");
  absl::SetFlag(&FLAGS_devices, "/cpu:0,/cpu:1");
  absl::SetFlag(&FLAGS_num_cpu_devices, 2);
  absl::SetFlag(&FLAGS_heartbeat_timeout, 3.5);
  absl::StatusOr<StrategyConfig> c = StrategyConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->strategy, "mirrored");
  EXPECT_EQ(c->devices, (std::vector<std::string>{"/cpu:0", "/cpu:1"}));
  EXPECT_EQ(c->num_cpu_devices, 2);
  EXPECT_EQ(c->heartbeat_timeout_seconds, 3.5);
  EXPECT_EQ(c->collective_transport, "auto");  // untouched flags keep their defaults
  absl::SetFlag(&FLAGS_devices, ",");
  EXPECT_EQ(StrategyConfigFromFlags().status().code(), absl::StatusCode::kInvalidArgument);
  absl::SetFlag(&FLAGS_strategy, "one_device");
  absl::SetFlag(&FLAGS_devices, "");
  absl::SetFlag(&FLAGS_num_cpu_devices, 0);
  absl::SetFlag(&FLAGS_heartbeat_timeout, 10);
}

TEST(StrategyFlagsTest, EachBadSettingNamesItsFlag) {
  struct Case {
    void (*mutate)(StrategyConfig*);
    const char* flag;
  };
  const Case cases[] = {
      {[](StrategyConfig* c) { c->strategy = "central_storage"; }, "--strategy"},
      {[](StrategyConfig* c) { c->max_staleness = -2; }, "--max_staleness"},
      {[](StrategyConfig* c) { c->num_cpu_devices = -1; }, "--num_cpu_devices"},
      {[](StrategyConfig* c) { c->num_cpu_devices = kMaxCpuDevices + 1; }, "--num_cpu_devices"},
      {[](StrategyConfig* c) { c->devices = {"/cpu:0", "/cpu:1"}; }, "--devices"},
      {[](StrategyConfig* c) { c->gradient_bucket_bytes = -2; }, "--gradient_bucket_bytes"},
      {[](StrategyConfig* c) { c->heartbeat_timeout_seconds = 0; }, "--heartbeat_timeout"},
      {[](StrategyConfig* c) { c->startup_timeout_seconds = -1; }, "--startup_timeout"},
      {[](StrategyConfig* c) { c->collective_transport = "udp"; }, "--collective_transport"},
      {[](StrategyConfig* c) { c->intra_op_threads = -1; }, "--intra_op_threads"},
      {[](StrategyConfig* c) { c->inter_op_threads = -1; }, "--inter_op_threads"},
  };
  for (const Case& k : cases) {
    StrategyConfig c;
    k.mutate(&c);
    absl::Status s = ValidateStrategyConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.flag;
    EXPECT_TRUE(absl::StartsWith(s.message(), k.flag)) << s;
    EXPECT_EQ(MakeStrategy(c).status().code(), absl::StatusCode::kInvalidArgument) << k.flag;
  }
  EXPECT_TRUE(ValidateStrategyConfig(StrategyConfig{}).ok());
}

TEST(StrategyFlagsTest, MakesTheStrategyTheSettingsDescribe) {
  StrategyConfig one;
  one.intra_op_threads = 1;
  auto s = MakeStrategy(one);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->num_replicas_in_sync(), 1);

  StrategyConfig mirrored;
  mirrored.strategy = "mirrored";
  mirrored.num_cpu_devices = 3;
  mirrored.intra_op_threads = 1;
  s = MakeStrategy(mirrored);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->num_replicas_in_sync(), 3);
  EXPECT_EQ(NumCpuDevices(mirrored), 3);

  mirrored.num_cpu_devices = 0;
  mirrored.devices = {"/cpu:0", "/cpu:1"};
  EXPECT_EQ(NumCpuDevices(mirrored), 2);
  s = MakeStrategy(mirrored);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->num_replicas_in_sync(), 2);

  StrategyConfig missing;
  missing.strategy = "mirrored";
  missing.num_cpu_devices = 2;
  missing.devices = {"/cpu:0", "/cpu:5"};
  s = MakeStrategy(missing);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--devices=/cpu:0,/cpu:5")) << s.status();
}

TEST(StrategyFlagsTest, ABadClusterNamesTheFieldBeforeAnyNetworkTraffic) {
  StrategyConfig c;
  c.strategy = "multi_worker_mirrored";
  c.cluster_spec = "{\"worker\": [\"127.0.0.1:1\"]}";
  c.task_type = "worker";
  c.task_index = "7";
  absl::StatusOr<std::unique_ptr<distribute::Strategy>> s = MakeStrategy(c);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--cluster_spec.worker")) << s.status();
}

}  // namespace
}  // namespace fit
}  // namespace strata
