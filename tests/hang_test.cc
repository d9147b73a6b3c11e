// Hangs named by default, end to end with real trainer processes: a rank
// stuck before a collective (--hang_at_step: it sleeps after that step, its
// heartbeats going on, as a rank stuck in its input pipeline or a deadlock
// does) is named by the chief with its step and the collective it has not
// started within heartbeat timeout + 5 s, in 20 runs out of 20; SIGUSR1 on
// a healthy cluster dumps that task's flight recorder and gets a diagnosis
// without disturbing training; workers whose collectives differ (a model-code
// bug) fail at once naming both.
#include <signal.h>

#include <algorithm>
#include <chrono>
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

constexpr double kHeartbeatSeconds = 2;

std::vector<std::string> Flags(int steps) {
  return {"--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", steps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--strategy=multi_worker_mirrored",
          "--startup_timeout=60",
          absl::StrCat("--heartbeat_timeout=", kHeartbeatSeconds)};
}

// Starts extra.size() workers of a fresh cluster; worker i gets extra[i].
std::vector<Process> StartPair(const std::string& dir, int steps,
                               const std::vector<std::vector<std::string>>& extra) {
  const int n = static_cast<int>(extra.size());
  const std::string cluster = WorkerCluster(n);
  std::vector<Process> out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> args = Flags(steps);
    args.insert(args.end(), extra[i].begin(), extra[i].end());
    out.push_back(Spawn(args, absl::StrCat(dir, "/stderr_", i, ".txt"),
                        {absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                                      ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}")}));
  }
  return out;
}

// Polls until `path` contains `text`; the time it was first seen, or
// nullopt after `timeout`.
std::optional<Clock::time_point> WaitForText(const std::string& path, const std::string& text,
                                             std::chrono::milliseconds timeout) {
  const Clock::time_point end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (absl::StrContains(ReadFile(path), text)) return Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

void KillAll(const std::vector<Process>& ps) {
  for (const Process& p : ps) {
    if (p.pid > 0) kill(p.pid, SIGKILL);
  }
  for (const Process& p : ps) Wait(p);
}

TEST(HangTest, AStuckRankIsNamedWithItsStepAndCollectiveInTwentyRunsOfTwenty) {
  const std::chrono::milliseconds limit(static_cast<int>((kHeartbeatSeconds + 5) * 1000));
  std::vector<double> latencies;
  for (int run = 0; run < 20; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    const std::string dir = TempDir(absl::StrCat("stuck_", run));
    const int hang = 3 + run % 3;  // steps 3..5
    std::vector<Process> ps = StartPair(dir, 100000, {{}, {absl::StrCat("--hang_at_step=", hang)}});
    const std::string chief_err = dir + "/stderr_0.txt";
    const std::string stuck_err = dir + "/stderr_1.txt";
    std::optional<Clock::time_point> stuck =
        WaitForText(stuck_err, "hanging after step", std::chrono::seconds(60));
    ASSERT_TRUE(stuck.has_value()) << ReadFile(stuck_err);
    const std::string named = absl::StrCat("behind: /job:worker/replica:0/task:1 at step ", hang,
                                           " has not started all-reduce");
    std::optional<Clock::time_point> seen = WaitForText(chief_err, named, limit);
    const std::string chief = ReadFile(chief_err);
    KillAll(ps);
    ASSERT_TRUE(seen.has_value()) << "not named within " << limit.count() << " ms:\n" << chief;
    latencies.push_back(std::chrono::duration<double>(*seen - *stuck).count());
    // The collective it has not started is the next step's.
    EXPECT_TRUE(absl::StrContains(chief, absl::StrCat(") of step ", hang + 1, ", which 1 task")))
        << chief;
    EXPECT_TRUE(absl::StrContains(chief, "it is in \"hanging (--hang_at_step)\"")) << chief;
    EXPECT_TRUE(absl::StrContains(chief, "waiting: /job:worker/replica:0/task:0")) << chief;
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf("stuck rank named after %.2f s (median), %.2f s (worst) of 20 runs; limit %.1f s\n",
              latencies[latencies.size() / 2], latencies.back(), kHeartbeatSeconds + 5);
}

TEST(HangTest, SigusrOneDumpsTheRecorderAndGetsADiagnosisWithoutStoppingTraining) {
  const std::string dir = TempDir("sigusr1");
  std::vector<Process> ps = StartPair(dir, 1000000, {{}, {}});
  const std::string chief_err = dir + "/stderr_0.txt";
  const std::string other_err = dir + "/stderr_1.txt";
  ASSERT_TRUE(WaitForText(other_err, "input sharding", std::chrono::seconds(60)).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // training
  ASSERT_EQ(kill(ps[1].pid, SIGUSR1), 0);
  const bool dumped =
      WaitForText(other_err, "strata: SIGUSR1: flight recorder of /job:worker/replica:0/task:1",
                  std::chrono::seconds(10))
          .has_value();
  const bool diagnosed = WaitForText(chief_err,
                                     "hang diagnosis #1, requested by "
                                     "/job:worker/replica:0/task:1 (SIGUSR1",
                                     std::chrono::seconds(10))
                             .has_value();
  // Both still train: no error.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string chief = ReadFile(chief_err), other = ReadFile(other_err);
  KillAll(ps);
  EXPECT_TRUE(dumped) << other;
  EXPECT_TRUE(diagnosed) << chief;
  EXPECT_FALSE(absl::StrContains(chief, "error")) << chief;
  EXPECT_FALSE(absl::StrContains(other, "error")) << other;
}

// A lost task (SIGKILL): every survivor dumps its recorder and the chief
// prints one diagnosis of the cluster's error, naming the task that did not
// answer and what each survivor was doing, within heartbeat timeout + 5 s.
TEST(HangTest, ALostTaskGetsOneDiagnosisFromTheChiefOfEverySurvivor) {
  const std::string dir = TempDir("lost");
  std::vector<Process> ps = StartPair(dir, 1000000, {{}, {}, {}});
  const std::string chief_err = dir + "/stderr_0.txt";
  ASSERT_TRUE(WaitForText(dir + "/stderr_2.txt", "input sharding", std::chrono::seconds(60)).has_value())
      << ReadFile(dir + "/stderr_2.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // training
  ASSERT_EQ(kill(ps[2].pid, SIGKILL), 0);
  const Clock::time_point killed = Clock::now();
  std::vector<Exit> exits;
  for (const Process& p : ps) exits.push_back(Wait(p));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  const std::string chief = ReadFile(chief_err), other = ReadFile(dir + "/stderr_1.txt");
  EXPECT_NE(exits[0].code, 0) << chief;
  EXPECT_NE(exits[1].code, 0) << other;
  EXPECT_LT(seconds, kHeartbeatSeconds + 5) << chief;
  EXPECT_TRUE(absl::StrContains(other, "strata: /job:worker/replica:0/task:1 at the cluster's error: "))
      << other;
  EXPECT_TRUE(absl::StrContains(chief, "hang diagnosis #1, requested by the cluster's error (")) << chief;
  EXPECT_TRUE(absl::StrContains(chief, "no answer: /job:worker/replica:0/task:2 (no answer within"))
      << chief;
  // The survivors answered: each is named with its step.
  for (const char* task : {"task:0 at step ", "task:1 at step "}) {
    EXPECT_TRUE(absl::StrContains(chief, absl::StrCat("/job:worker/replica:0/", task))) << chief;
  }
  std::printf("lost task: survivors exited %.2f s after the kill, the chief's diagnosis printed\n", seconds);
}

// A model-code bug: the workers build different models (another hidden
// layer on worker 1), so their collectives differ. They fail at once with
// an error naming both workers and what each has, never a hang.
TEST(HangTest, WorkersIssuingDifferentCollectivesFailNamingBoth) {
  const std::string dir = TempDir("mismatch");
  std::vector<Process> ps = StartPair(dir, 100, {{"--hidden=32"}, {"--hidden=32,32"}});
  const auto start = Clock::now();
  std::vector<Exit> exits;
  for (const Process& p : ps) exits.push_back(Wait(p));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(exits[i].code, 0) << "worker " << i << " " << Describe(exits[i]);
    EXPECT_TRUE(absl::StrContains(exits[i].err, "the workers disagree on this collective"))
        << exits[i].err;
    EXPECT_TRUE(absl::StrContains(exits[i].err, "worker /job:worker/replica:0/task:0 has"))
        << exits[i].err;
    EXPECT_TRUE(absl::StrContains(exits[i].err, "worker /job:worker/replica:0/task:1 has"))
        << exits[i].err;
  }
  // Well before any timeout (the heartbeat's is 2 s, a collective's 60 s).
  EXPECT_LT(seconds, 30);
}

}  // namespace
}  // namespace testing
}  // namespace strata
