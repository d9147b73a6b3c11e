// Pipeline stages on other workers, as real processes (tests/pipeline_worker:
// 4 stages, 2 per worker, MultiWorkerMirroredStrategy with
// steps_span_workers): the weights equal the same pipeline in one process,
// a model over a process's memory limit trains where data parallelism
// fails, and a stage's worker killed mid-run ends the other naming it.
#include <signal.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "fit/testing/cluster_runner.h"
#include "gtest/gtest.h"

namespace strata {
namespace testing {
namespace {

std::string Worker() { return Runfile("tests/pipeline_worker"); }

std::map<std::string, std::vector<double>> ReadWeights(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string name;
    l >> name;
    double v;
    while (l >> v) out[name].push_back(v);
  }
  return out;
}

TEST(MultiWorkerPipelineTest, StagesOnTwoWorkersEndOnOneProcesssWeights) {
  const std::string dir = TempDir("pipeline_weights");
  // GPipe between the workers over TCP, 1F1B over shared memory.
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    SCOPED_TRACE(schedule);
    const std::string transport = schedule == "gpipe" ? "tcp" : "shm";
    const std::vector<std::string> args = {"--steps=60", "--micro_batches=4",
                                           "--schedule=" + schedule};
    Process one = SpawnProgram(
        Worker(),
        [&] {
          std::vector<std::string> a = args;
          a.push_back("--weights_out=" + dir + "/one_" + schedule);
          return a;
        }(),
        dir + "/one_" + schedule + ".stderr");
    WorkerExit e = Wait(one);
    ASSERT_EQ(e.code, 0) << Describe(e);

    ClusterOptions o;
    o.program = Worker();
    o.num_workers = 2;
    o.args = args;
    o.args.push_back("--weights_out=" + dir + "/two_" + schedule);
    o.args.push_back("--transport=" + transport);
    auto cluster = ClusterRunner::Start(o);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    std::vector<WorkerExit> ends = (*cluster)->Join(absl::Seconds(120));
    for (const WorkerExit& w : ends) ASSERT_EQ(w.code, 0) << Describe(w);
    // Every step's loss reached both workers.
    EXPECT_TRUE(absl::StrContains(ends[1].out, "step 59 loss")) << Describe(ends[1]);

    auto want = ReadWeights(dir + "/one_" + schedule);
    auto got = ReadWeights(dir + "/two_" + schedule);
    ASSERT_EQ(want.size(), 8u);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (const auto& [name, values] : want) {
      ASSERT_EQ(got[name].size(), values.size()) << name;
      for (size_t k = 0; k < values.size(); ++k) {
        worst = std::max(worst, std::abs(got[name][k] - values[k]));
      }
    }
    EXPECT_LT(worst, 1e-5);
  }
}

class KilledStage : public ::testing::TestWithParam<std::string> {};

// Under a memory limit per process (each device's allocator 20 MB), an
// MLP 12-1024x5-5 (16.9 MB of weights) trains as 4 stages over the 2
// workers, each holding one 4 MiB layer, where data parallelism (every
// device a whole replica) fails with ResourceExhausted at its first
// allocation past the limit (tools/bench/pipeline_memory.py is the same on
// simulated hosts).
TEST(MultiWorkerPipelineTest, AModelOverAProcesssMemoryTrainsInStagesWhereDataParallelFails) {
  const std::vector<std::string> common = {"--steps=5", "--hidden=1024", "--hidden_layers=5",
                                           "--memory_limit_mb=40", "--transport=tcp"};
  for (bool data_parallel : {false, true}) {
    SCOPED_TRACE(data_parallel ? "data parallel" : "pipelined");
    ClusterOptions o;
    o.program = Worker();
    o.num_workers = 2;
    o.args = common;
    if (data_parallel) {
      o.args.push_back("--data_parallel");
    } else {
      for (const char* a : {"--stage_starts=0,2,3,4", "--micro_batches=4"}) o.args.push_back(a);
    }
    auto cluster = ClusterRunner::Start(o);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    std::vector<WorkerExit> ends = (*cluster)->Join(absl::Seconds(120));
    for (const WorkerExit& w : ends) {
      EXPECT_FALSE(w.timed_out) << Describe(w);
      if (data_parallel) {
        EXPECT_EQ(w.code, 1) << Describe(w);
        EXPECT_TRUE(absl::StrContains(w.err, "RESOURCE_EXHAUSTED")) << Describe(w);
        EXPECT_TRUE(absl::StrContains(w.err, "out of memory allocating tensor float [1024,1024]"))
            << Describe(w);
      } else {
        EXPECT_EQ(w.code, 0) << Describe(w);
        EXPECT_TRUE(absl::StrContains(w.out, "step 4 loss")) << Describe(w);
      }
    }
  }
}

TEST_P(KilledStage, AStagesWorkerKilledEndsTheOtherNamingIt) {
  ClusterOptions o;
  o.program = Worker();
  o.num_workers = 2;
  o.args = {"--steps=1000000", "--micro_batches=4", "--step_sleep_ms=5",
            "--transport=" + GetParam()};
  auto cluster = ClusterRunner::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ClusterRunner& c = **cluster;
  // Both stages past step 20 (either may report a step first).
  ASSERT_TRUE(c.WaitUntil(FileContains(c.StdoutPath(1), "step 20 "), absl::Seconds(60)).ok());
  ASSERT_TRUE(c.WaitUntil(FileContains(c.StdoutPath(0), "step 20 "), absl::Seconds(60)).ok());
  ASSERT_TRUE(c.Signal(1, SIGKILL).ok());
  const absl::Time killed = absl::Now();
  std::vector<WorkerExit> ends = c.Join(absl::Seconds(60));
  const absl::Duration took = absl::Now() - killed;
  EXPECT_EQ(ends[1].signal, SIGKILL);
  EXPECT_TRUE(absl::StrContains(ends[0].out, "step 20 ")) << Describe(ends[0]);
  EXPECT_FALSE(ends[0].timed_out) << Describe(ends[0]);
  EXPECT_NE(ends[0].code, 0) << Describe(ends[0]);
  EXPECT_TRUE(absl::StrContains(ends[0].err, "/job:worker/replica:0/task:1")) << Describe(ends[0]);
  // Within the heartbeat timeout (3 s) and 5 s more.
  EXPECT_LT(took, absl::Seconds(8)) << Describe(ends[0]);
}

INSTANTIATE_TEST_SUITE_P(Transports, KilledStage, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace testing
}  // namespace strata
