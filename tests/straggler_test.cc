// Stragglers named in the metrics: 2 trainer processes, each pinned to its
// own core; a CPU hog shares worker 1's core, so worker 0 waits for it in
// every step's all-reduces. The chief's log names worker 1 as the
// straggler, and each step's metrics line carries both workers' time in
// collectives; with the hog on the chief's core instead, the chief is
// named. (Without a hog this machine's two cores are not even enough for
// "nobody is named" to hold: the detector reports real imbalance, which
// the unit test covers.) The chief's case needs the CPU wait of every
// thread of its steps: its collectives' threads, not the loop's, lose the
// time slices, and both workers wait in collectives alike. Pinning needs 2 cores (the test
// skips with fewer); it runs alone (tag exclusive) since a busy machine is
// what it measures.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

constexpr char kTaskset[] = "/usr/bin/taskset";

// Runs 2 pinned workers (worker i on core i) of a compute-heavy MLP; returns
// the chief's stderr and metrics.
std::pair<std::string, std::string> RunPinnedPair(const std::string& name) {
  const std::string dir = TempDir(name);
  const std::string cluster = WorkerCluster(2);
  std::vector<Process> ps;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {
        "-c",
        absl::StrCat(i),
        Runfile("tools/trainer"),
        "--optimizer=sgd",
        "--hidden=1024",
        "--steps=150",
        "--global_batch_size=1024",
        // Every step a full batch: the 1438 digits would otherwise make
        // every other step a partial one of 414, too short for a hog's
        // time slices to land in most of them.
        "--drop_remainder",
        "--prefetch=0",
        "--intra_op_threads=1",
        "--strategy=multi_worker_mirrored",
        "--startup_timeout=60",
        absl::StrCat("--metrics_out=", dir, "/metrics.jsonl"),
        absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz"))};
    ps.push_back(SpawnProgram(kTaskset, args, absl::StrCat(dir, "/stderr_", i, ".txt"),
                              {JobTokenEnv(), absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                                                           ",\"task\":{\"type\":\"worker\","
                                                           "\"index\":",
                                                           i, "}}")}));
  }
  for (const Process& p : ps) {
    Exit e = Wait(p);
    EXPECT_EQ(e.code, 0) << Describe(e);
  }
  return {ReadFile(dir + "/stderr_0.txt"), ReadFile(dir + "/metrics.jsonl")};
}

class StragglerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || access(kTaskset, X_OK) != 0) {
      GTEST_SKIP() << "needs 2 cores and taskset (util-linux) to pin the workers";
    }
  }
};

// A hog on worker `slow`'s core: that worker, and not the other, is named.
void ExpectNamedWithHogOn(int slow) {
  Process hog =
      SpawnProgram(kTaskset, {"-c", absl::StrCat(slow), "/bin/sh", "-c", "while :; do :; done"},
                   TempDir(absl::StrCat("hog_", slow)) + "/stderr.txt");
  ASSERT_GT(hog.pid, 0);
  auto [err, metrics] = RunPinnedPair(absl::StrCat("hogged_", slow));
  kill(hog.pid, SIGKILL);
  Wait(hog);
  EXPECT_TRUE(absl::StrContains(
      err, absl::StrCat("straggler: /job:worker/replica:0/task:", slow, " holds the others up")))
      << err;
  EXPECT_FALSE(
      absl::StrContains(err, absl::StrCat("straggler: /job:worker/replica:0/task:", 1 - slow)))
      << err;
  EXPECT_TRUE(absl::StrContains(metrics, "\"collective_wait_sec\":[")) << metrics.substr(0, 2000);
}

TEST_F(StragglerTest, AWorkerSharingItsCoreWithAHogIsNamed) { ExpectNamedWithHogOn(1); }

// The same with the hog on the chief's core: the detector follows the
// load, not a worker's rank.
TEST_F(StragglerTest, TheChiefSharingItsCoreWithAHogIsNamed) { ExpectNamedWithHogOn(0); }

}  // namespace
}  // namespace testing
}  // namespace strata
