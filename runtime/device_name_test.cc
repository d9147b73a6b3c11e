#include "runtime/device_name.h"

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(DeviceNameTest, ParsesAFullName) {
  auto n = DeviceName::Parse("/job:worker/replica:0/task:1/device:CPU:0");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->IsFullySpecified());
  EXPECT_EQ(n->job, "worker");
  EXPECT_EQ(n->replica, 0);
  EXPECT_EQ(n->task, 1);
  EXPECT_EQ(n->type, "CPU");
  EXPECT_EQ(n->id, 0);
  EXPECT_EQ(n->ToString(), "/job:worker/replica:0/task:1/device:CPU:0");
}

TEST(DeviceNameTest, ParsesLegacyAndPartialForms) {
  auto cpu = DeviceName::Parse("/cpu:0");
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->has_job);
  EXPECT_TRUE(cpu->has_type && cpu->has_id);
  EXPECT_EQ(cpu->type, "CPU");
  EXPECT_EQ(cpu->ToString(), "/device:CPU:0");

  auto gpu = DeviceName::Parse("/gpu:3");
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(gpu->type, "GPU");
  EXPECT_EQ(gpu->id, 3);

  auto dev = DeviceName::Parse("/device:GPU:1");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->ToString(), "/device:GPU:1");

  auto any_gpu = DeviceName::Parse("/device:GPU:*");
  ASSERT_TRUE(any_gpu.ok());
  EXPECT_TRUE(any_gpu->has_type);
  EXPECT_FALSE(any_gpu->has_id);
  EXPECT_EQ(any_gpu->ToString(), "/device:GPU:*");

  auto task = DeviceName::Parse("/job:worker/task:2");
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->ToString(), "/job:worker/task:2");
  EXPECT_FALSE(task->has_type);

  auto lower = DeviceName::Parse("/device:cpu:1");
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->type, "CPU");

  // Components in another order are accepted, as TensorFlow does.
  auto reordered = DeviceName::Parse("/device:CPU:0/job:w/task:1");
  ASSERT_TRUE(reordered.ok());
  EXPECT_EQ(reordered->ToString(), "/job:w/task:1/device:CPU:0");
}

TEST(DeviceNameTest, EmptyStringMatchesEverything) {
  auto any = DeviceName::Parse("");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->Matches(DeviceName::Full("localhost", 0, 0, "CPU", 3)));
  EXPECT_EQ(any->ToString(), "");
}

TEST(DeviceNameTest, PartialSpecMatching) {
  const DeviceName cpu0 = DeviceName::Full("localhost", 0, 0, "CPU", 0);
  const DeviceName cpu1 = DeviceName::Full("localhost", 0, 0, "CPU", 1);
  const DeviceName w_gpu1 = DeviceName::Full("worker", 0, 1, "GPU", 1);
  auto spec = [](const char* s) { return *DeviceName::Parse(s); };
  EXPECT_TRUE(spec("/cpu:0").Matches(cpu0));
  EXPECT_FALSE(spec("/cpu:0").Matches(cpu1));
  EXPECT_TRUE(spec("/device:CPU:*").Matches(cpu1));
  EXPECT_FALSE(spec("/device:CPU:*").Matches(w_gpu1));
  EXPECT_TRUE(spec("/job:worker/task:1").Matches(w_gpu1));
  EXPECT_FALSE(spec("/job:worker/task:0").Matches(w_gpu1));
  EXPECT_FALSE(spec("/job:localhost").Matches(w_gpu1));
  EXPECT_TRUE(spec("/job:localhost/replica:0/task:0/device:CPU:1").Matches(cpu1));
  // A specified component does not match one the other name leaves open.
  EXPECT_FALSE(spec("/cpu:0").Matches(spec("/device:CPU:*")));
}

TEST(DeviceNameTest, MergeFillsUnspecifiedComponents) {
  DeviceName n = *DeviceName::Parse("/gpu:1");
  n.MergeFrom(DeviceName::Full("worker", 0, 2, "CPU", 0));
  EXPECT_EQ(n.ToString(), "/job:worker/replica:0/task:2/device:GPU:1");
  DeviceName any_cpu = *DeviceName::Parse("/device:CPU:*");
  any_cpu.MergeFrom(DeviceName::Full("localhost", 0, 0, "CPU", 3));
  EXPECT_EQ(any_cpu.ToString(), "/job:localhost/replica:0/task:0/device:CPU:3");
}

TEST(DeviceNameTest, GarbageIsInvalidArgument) {
  for (const char* bad : {"cpu:0", "/", "/job:", "/job:1abc", "/replica:x", "/task:-1",
                          "/device:CPU:x", "/device::0", "/cpu:", "/foo:1", "/job:a/job:b",
                          "/job:a//task:0", "/device:CPU:0/", "/gpu:0/cpu:1", "/task"}) {
    auto n = DeviceName::Parse(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(n.status().message().find(bad), std::string::npos) << n.status();
  }
}

TEST(DeviceNameTest, RoundTripsThroughToString) {
  for (const char* s : {"/job:worker/replica:0/task:1/device:CPU:0", "/job:ps/task:0",
                        "/device:GPU:*", "/replica:2"}) {
    auto n = DeviceName::Parse(s);
    ASSERT_TRUE(n.ok()) << s;
    EXPECT_EQ(n->ToString(), s);
    EXPECT_EQ(*DeviceName::Parse(n->ToString()), *n);
  }
}

}  // namespace
}  // namespace strata
