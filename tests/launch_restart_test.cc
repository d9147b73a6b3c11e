// tools/launch across nodes and with restarts, end to end with the real
// trainer: two launchers, one per "node" (--nnodes=2, --node_rank, a
// rendezvous endpoint on loopback), train the weights one launcher's
// cluster trains; with --max_restarts, a worker killed mid-run makes every
// node restart its tasks, which resume from the newest checkpoint and end
// on exactly (bitwise) the weights of an uninterrupted run; past the
// restarts the launchers give up, naming the failure.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

constexpr int kSteps = 6000;

std::vector<std::string> TrainFlags(const std::string& ckpt) {
  return {Runfile("tools/trainer"),
          "--strategy=multi_worker_mirrored",
          "--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", kSteps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--heartbeat_timeout=3",
          "--startup_timeout=60",
          "--save_every_steps=500",
          absl::StrCat("--checkpoint_dir=", ckpt),
          absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz"))};
}

// Two launchers of a 2-node job (one worker each) meeting at `port`.
std::vector<Process> StartNodes(const std::string& dir, const std::string& ckpt, int port,
                                int max_restarts, const std::string& marker) {
  std::vector<Process> out;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> args = {"--nnodes=2",
                                     absl::StrCat("--node_rank=", node),
                                     "--num_workers=1",
                                     absl::StrCat("--rdzv_endpoint=127.0.0.1:", port),
                                     absl::StrCat("--max_restarts=", max_restarts),
                                     "--grace_period=2s",
                                     "--"};
    for (const std::string& f : TrainFlags(ckpt)) args.push_back(f);
    out.push_back(SpawnProgram(Runfile("tools/launch"), args,
                               absl::StrCat(dir, "/launcher_", node, ".txt"),
                               {JobTokenEnv(), "STRATA_TEST_MARKER=" + marker}));
  }
  return out;
}

// The pid of the process whose environment has every one of `vars`; -1.
int FindProcess(const std::vector<std::string>& vars) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string env = std::string(1, '\0') + ss.str();
    bool all = true;
    for (const std::string& v : vars) {
      all = all && env.find(std::string(1, '\0') + v + std::string(1, '\0')) != std::string::npos;
    }
    if (all) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

TEST(LaunchRestartTest, TwoNodesTrainAndAKilledWorkerIsRestartedToTheSameWeights) {
  const std::string straight_dir = TempDir("straight");
  const std::string straight = TempDir("straight_ckpt");
  std::vector<Process> a = StartNodes(straight_dir, straight, FreePortPair(), 0, "straight");
  for (const Process& p : a) {
    Exit e = Wait(p);
    ASSERT_EQ(e.code, 0) << Describe(e);
  }

  const std::string dir = TempDir("restarted");
  const std::string ckpt = TempDir("restarted_ckpt");
  const std::string marker = absl::StrCat("restart-", getpid());
  std::vector<Process> b = StartNodes(dir, ckpt, FreePortPair(), 2, marker);
  ASSERT_TRUE(WaitForCheckpoint(ckpt, 1000));
  const int victim = FindProcess(
      {"STRATA_TASK=worker:1", "STRATA_RESTART_COUNT=0", "STRATA_TEST_MARKER=" + marker});
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  std::vector<Exit> ends;
  for (const Process& p : b) ends.push_back(Wait(p));
  for (size_t i = 0; i < ends.size(); ++i) {
    EXPECT_EQ(ends[i].code, 0) << "launcher " << i << " " << Describe(ends[i]);
    EXPECT_TRUE(absl::StrContains(ends[i].err, "restarting every task (restart 1 of 2)"))
        << ends[i].err;
  }
  if (HasFailure()) return;
  int compared = 0;
  ExpectSameTensors(absl::StrCat(straight, "/ckpt-", kSteps), absl::StrCat(ckpt, "/ckpt-", kSteps),
                    &compared);
  EXPECT_GT(compared, 4);
}

// Polls `path` until it contains `text`, up to `seconds`.
bool WaitForText(const std::string& path, const std::string& text, double seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (absl::StrContains(ReadFile(path), text)) return true;
    usleep(10000);
  }
  return false;
}

// An elastic job (--nnodes=1:2): node B is lost for good (its launcher
// killed): after the last call node A goes on alone from the newest
// checkpoint; node C comes and waits; when A's worker fails, the next
// round has A and C, which resume from the newest checkpoint (the last
// run's metrics start past step 0); the run ends on the weights one
// process trains, to float tolerance: 1e-2 of max(|w|, 1e-3), since over
// 20000 steps even an uninterrupted 2-worker run drifts 1.8e-3 from one
// process (its sums are added in another order).
TEST(LaunchRestartTest, AnElasticJobDropsALostNodeAndAdmitsANewOneAtTheNextRestart) {
  constexpr int kElasticSteps = 20000;
  const std::string one = TempDir("elastic_one");
  {
    std::vector<std::string> flags = TrainFlags(one);
    flags.erase(flags.begin(), flags.begin() + 2);  // the program; one_device
    for (std::string& f : flags) {
      if (absl::StartsWith(f, "--steps=")) f = absl::StrCat("--steps=", kElasticSteps);
      if (absl::StartsWith(f, "--save_every_steps=")) f = "--save_every_steps=1000";
    }
    Exit e = Wait(SpawnProgram(Runfile("tools/trainer"), flags, TempDir("elastic_one_log") + "/e"));
    ASSERT_EQ(e.code, 0) << Describe(e);
  }
  const std::string dir = TempDir("elastic");
  const std::string ckpt = TempDir("elastic_ckpt");
  const std::string marker = absl::StrCat("elastic-", getpid());
  const int port = FreePortPair();
  auto start = [&](const std::string& name) {
    std::vector<std::string> args = {"--nnodes=1:2",
                                     "--num_workers=1",
                                     absl::StrCat("--rdzv_endpoint=127.0.0.1:", port),
                                     "--max_restarts=3",
                                     "--rdzv_last_call=2s",
                                     "--grace_period=2s",
                                     "--"};
    for (std::string f : TrainFlags(ckpt)) {
      if (absl::StartsWith(f, "--steps=")) f = absl::StrCat("--steps=", kElasticSteps);
      if (absl::StartsWith(f, "--save_every_steps=")) f = "--save_every_steps=1000";
      args.push_back(f);
    }
    args.push_back(absl::StrCat("--metrics_out=", dir, "/metrics.jsonl"));
    return SpawnProgram(Runfile("tools/launch"), args, absl::StrCat(dir, "/", name, ".txt"),
                        {JobTokenEnv(), "STRATA_TEST_MARKER=" + marker});
  };
  Process a = start("a");  // hosts the rendezvous: it binds the endpoint first
  ASSERT_TRUE(WaitForText(a.stderr_path, "hosting the rendezvous", 30)) << ReadFile(a.stderr_path);
  Process b = start("b");
  ASSERT_TRUE(WaitForCheckpoint(ckpt, 1000));
  ASSERT_TRUE(WaitForText(b.stderr_path, "round 0: node 1 of 2", 1)) << ReadFile(b.stderr_path);
  kill(b.pid, SIGKILL);  // node B lost for good (its worker dies with it)
  Wait(b);
  ASSERT_TRUE(WaitForText(a.stderr_path, "round 1: node 0 of 1, ranks 0..0 of 1", 60))
      << ReadFile(a.stderr_path);
  Process c = start("c");  // a node comes (back): it waits for the next round
  usleep(500000);
  const int worker = FindProcess(
      {"STRATA_TASK=worker:0", "STRATA_RESTART_COUNT=1", "STRATA_TEST_MARKER=" + marker});
  ASSERT_GT(worker, 0);
  kill(worker, SIGKILL);
  Exit ea = Wait(a);
  Exit ec = Wait(c);
  EXPECT_EQ(ea.code, 0) << Describe(ea);
  EXPECT_EQ(ec.code, 0) << Describe(ec);
  EXPECT_TRUE(absl::StrContains(ea.err, "round 2: node 0 of 2")) << ea.err;
  EXPECT_TRUE(absl::StrContains(ec.err, "round 2: node 1 of 2, ranks 1..1 of 2")) << ec.err;
  if (HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(absl::StrCat(one, "/ckpt-", kElasticSteps),
                               absl::StrCat(ckpt, "/ckpt-", kElasticSteps), 1e-2),
            0);
  // The last run resumed: its final metrics line starts past step 0.
  const std::string metrics = ReadFile(dir + "/metrics.jsonl");
  const size_t final_line = metrics.rfind("{\"final\":true");
  ASSERT_NE(final_line, std::string::npos) << metrics.substr(0, 2000);
  EXPECT_TRUE(absl::StrContains(metrics.substr(final_line), "\"start_step\":"))
      << metrics.substr(final_line);
  EXPECT_FALSE(absl::StrContains(metrics.substr(final_line), "\"start_step\":0,"))
      << metrics.substr(final_line);
}

TEST(LaunchRestartTest, PastItsRestartsTheLauncherGivesUpNamingTheFailure) {
  // One node; the program fails every time.
  const std::string dir = TempDir("give_up");
  Process p = SpawnProgram(
      Runfile("tools/launch"),
      {"--num_workers=2", "--max_restarts=2", "--grace_period=1s", "--", "/bin/sh", "-c", "exit 3"},
      dir + "/launcher.txt");
  Exit e = Wait(p);
  EXPECT_EQ(e.code, 1) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "restarting every task (restart 2 of 2)")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "giving up after 2 restarts")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "exited with status 3")) << e.err;
}

TEST(LaunchRestartTest, SeveralNodesWithoutASharedTokenAreRefused) {
  const std::string dir = TempDir("no_token");
  // An environment without any token: env -i keeps none of this process's.
  Process p = SpawnProgram("/usr/bin/env",
                           {"-i", Runfile("tools/launch"), "--nnodes=2", "--node_rank=0",
                            "--num_workers=1", "--rdzv_endpoint=127.0.0.1:1234", "--", "/bin/true"},
                           dir + "/launcher.txt");
  Exit e = Wait(p);
  EXPECT_EQ(e.code, 1) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "must share the job's token")) << e.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
