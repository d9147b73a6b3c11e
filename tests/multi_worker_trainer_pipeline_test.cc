// End to end: the trainer's pipeline across real worker processes on
// loopback (--strategy=multi_worker_mirrored --pipeline_stages=S): the mesh's
// devices are every worker's CPU devices in worker order, one graph whose
// steps every worker runs together.
//
// - 2 workers x 1 device, 2 stages (stage 1 on worker 1), 4 micro-batches:
//   interrupted at step 60 and resumed, the last step's loss and the test
//   loss end as a one-device run's (1e-5), every tensor of the checkpoint
//   to rounding.
// - 2 workers x 2 devices as 2 stages x 2 replicas (replica 1 on worker 1),
//   GPipe: the same test loss as one device.
// - Worker 1 (stage 1) killed mid-run: worker 0 exits non-zero naming it.
// - Worker 1 alone told to stop (SIGTERM): both stop after one step, saved.
// - A stage count that the cluster's devices do not divide: every worker
//   exits naming the flag and the devices.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> Join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kCommon = {"--hidden=32,32",   "--global_batch_size=32",
                                          "--drop_remainder", "--intra_op_threads=1",
                                          "--optimizer=sgd",  "--learning_rate=0.1"};

// A one-device run of `steps` with checkpoints and metrics under `dir`.
void RunOneDevice(const std::string& dir, int steps) {
  Exit e = RunTrainer(Join(kCommon, {absl::StrCat("--steps=", steps), "--checkpoint_dir=" + dir,
                                     "--metrics_out=" + dir + "/m.jsonl"}),
                      "pipeline_one_device");
  ASSERT_EQ(e.code, 0) << Describe(e);
}

TEST(MultiWorkerTrainerPipelineTest, StagesOnTwoWorkersTrainAsOneDeviceAndResume) {
  const std::string one = TempDir("pipeline_one");
  RunOneDevice(one, 100);
  const std::string dir = TempDir("pipeline_cluster");
  const std::vector<std::string> flags =
      Join(kCommon, {"--pipeline_stages=2", "--micro_batches=4", "--save_every_steps=20",
                     "--checkpoint_dir=" + dir});
  std::vector<Exit> exits = RunTrainerCluster(2, "pipeline_first", Join(flags, {"--steps=60"}));
  for (int w = 0; w < 2; ++w)
    ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  // Stage 1 is worker 1's.
  EXPECT_TRUE(
      absl::StrContains(exits[0].err, "layer 2 on /job:worker/replica:0/task:1/device:CPU:0"))
      << exits[0].err;
  exits = RunTrainerCluster(2, "pipeline_second",
                            Join(flags, {"--steps=100", "--metrics_out=" + dir + "/m.jsonl"}));
  for (int w = 0; w < 2; ++w)
    ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  EXPECT_TRUE(absl::StrContains(exits[0].err, "resumed from")) << exits[0].err;
  for (const char* key : {"loss", "test_loss"}) {
    const double a = FinalMetric(one + "/m.jsonl", key);
    ASSERT_GT(a, 0) << key;
    EXPECT_NEAR(FinalMetric(dir + "/m.jsonl", key), a, 1e-5) << key;
  }
  // Every weight and the step counter, to rounding (the micro-batches'
  // gradients are summed in another order: 1e-8 apart on an element of
  // 5e-4, relative 2e-5 of it).
  EXPECT_LE(ExpectCloseTensors(one + "/ckpt-100", dir + "/ckpt-100", 1e-4), 1e-4);
  EXPECT_LE(ExpectCloseTensors(dir + "/ckpt-100", one + "/ckpt-100", 1e-4), 1e-4);
}

TEST(MultiWorkerTrainerPipelineTest, AMeshOfTwoReplicasOverTwoWorkersTrainsAsOneDevice) {
  const std::string one = TempDir("mesh_one");
  RunOneDevice(one, 60);
  const std::string dir = TempDir("mesh_cluster");
  std::vector<Exit> exits =
      RunTrainerCluster(2, "mesh",
                        Join(kCommon, {"--num_cpu_devices=2", "--pipeline_stages=2",
                                       "--micro_batches=2", "--pipeline_schedule=gpipe",
                                       "--steps=60", "--metrics_out=" + dir + "/m.jsonl"}));
  for (int w = 0; w < 2; ++w)
    ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  EXPECT_TRUE(absl::StrContains(exits[0].err, "x 2 replicas")) << exits[0].err;
  const double want = FinalMetric(one + "/m.jsonl", "test_loss");
  ASSERT_GT(want, 0);
  EXPECT_NEAR(FinalMetric(dir + "/m.jsonl", "test_loss"), want, 1e-5);
}

TEST(MultiWorkerTrainerPipelineTest, AKilledStageEndsTheOtherWorkerNamingIt) {
  const std::string ckpt = TempDir("pipeline_kill_ckpt");
  const std::string dir = TempDir("pipeline_kill");
  const std::string cluster = WorkerCluster(2);
  std::vector<Process> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(Spawn(Join(kCommon, {"--strategy=multi_worker_mirrored", "--pipeline_stages=2",
                                         "--micro_batches=2", "--steps=1000000",
                                         "--save_every_steps=20", "--checkpoint_dir=" + ckpt,
                                         "--heartbeat_timeout=2", "--startup_timeout=60"}),
                          absl::StrCat(dir, "/stderr_", i, ".txt"),
                          {absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                                        ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}")}));
  }
  ASSERT_TRUE(WaitForCheckpoint(ckpt, 20));
  const auto lost_at = Clock::now();
  ASSERT_EQ(kill(tasks[1].pid, SIGKILL), 0);
  Exit e = Wait(tasks[0]);
  const double seconds = std::chrono::duration<double>(Clock::now() - lost_at).count();
  EXPECT_NE(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "/job:worker/replica:0/task:1")) << Describe(e);
  // A hang detector, not a speed measurement (room for a loaded machine).
  EXPECT_LT(seconds, 2 + 30);
  Wait(tasks[1]);
}

// A preemption notice (SIGTERM) to worker 1 alone: each worker's flag is
// fed on its own device, so both stop after the same step, the chief saves
// it, and both exit 0 (the chief alone would have read only its own flag).
TEST(MultiWorkerTrainerPipelineTest, ANoticeToOneWorkerStopsEveryWorkerAtASavedStep) {
  const std::string ckpt = TempDir("pipeline_term_ckpt");
  const std::string dir = TempDir("pipeline_term");
  const std::string cluster = WorkerCluster(2);
  constexpr int kSteps = 30000;
  std::vector<Process> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(
        Spawn(Join(kCommon, {"--strategy=multi_worker_mirrored", "--pipeline_stages=2",
                             "--micro_batches=2", absl::StrCat("--steps=", kSteps),
                             "--checkpoint_dir=" + ckpt, "--metrics_out=" + dir + "/m.jsonl",
                             "--heartbeat_timeout=5", "--startup_timeout=60"}),
              absl::StrCat(dir, "/stderr_", i, ".txt"),
              {absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                            ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}")}));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (LastStep(dir + "/m.jsonl") < 200 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(kill(tasks[1].pid, SIGTERM), 0);
  Exit chief = Wait(tasks[0]);
  Exit other = Wait(tasks[1]);
  ASSERT_EQ(chief.code, 0) << Describe(chief);
  ASSERT_EQ(other.code, 0) << Describe(other);
  EXPECT_TRUE(absl::StrContains(chief.err, "preempted: saving at step")) << chief.err;
  const int64_t step = static_cast<int64_t>(FinalMetric(dir + "/m.jsonl", "step"));
  ASSERT_GE(step, 200);
  ASSERT_LT(step, kSteps) << "the run went on to its end";
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(ckpt, "/ckpt-", step, ".index"))) << step;
}

TEST(MultiWorkerTrainerPipelineTest, StagesTheClustersDevicesDoNotDivideAreNamed) {
  std::vector<Exit> exits = RunTrainerCluster(
      2, "pipeline_bad", Join(kCommon, {"--hidden=32,32,32", "--pipeline_stages=3", "--steps=5"}));
  for (int w = 0; w < 2; ++w) {
    EXPECT_NE(exits[w].code, 0) << Describe(exits[w]);
    EXPECT_TRUE(
        absl::StrContains(exits[w].err,
                          "--pipeline_stages=3: 2 workers x 1 CPU devices (--num_cpu_devices) "
                          "are 2 devices"))
        << "worker " << w << " " << Describe(exits[w]);
  }
}

}  // namespace
}  // namespace testing
}  // namespace strata
