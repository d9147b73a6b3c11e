// tools/launch across simulated hosts: two network namespaces joined by a
// veth pair (tests/netns.h), one launcher in each (--nnodes=2, the
// rendezvous endpoint on the first host), the real trainer as tasks. Faults
// a multi-node job meets:
//   - a host cut off (its link taken down: silence, no reset) for longer
//     than the heartbeat timeout and then back: both launchers restart
//     their tasks, which meet again and end bitwise on the weights of an
//     uninterrupted run (--max_restarts);
//   - a launcher killed (its host lost for good): the surviving launcher
//     restarts, its chief names the missing task as never registered, and
//     past its restarts the launcher gives up; no hang.
// Needs root and `ip netns`; skips, saying why, where namespaces cannot be
// made.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/netns.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

constexpr int kSteps = 3000;
constexpr int kPort = 29500;  // each namespace has its own ports

std::vector<std::string> TrainFlags(const std::string& ckpt, double startup_timeout) {
  return {Absolute(Runfile("tools/trainer")),
          "--strategy=multi_worker_mirrored",
          "--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", kSteps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--heartbeat_timeout=2",
          absl::StrCat("--startup_timeout=", startup_timeout),
          "--save_every_steps=250",
          absl::StrCat("--checkpoint_dir=", ckpt),
          absl::StrCat("--digits_path=", Absolute(Runfile("data/digits/digits.csv.gz")))};
}

// One launcher per host, each starting one worker.
std::vector<Process> StartLaunchers(const NetnsPair& net, const std::string& dir,
                                    const std::string& ckpt, int max_restarts,
                                    double startup_timeout) {
  std::vector<Process> out;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> args = {"--nnodes=2",
                                     absl::StrCat("--node_rank=", node),
                                     "--num_workers=1",
                                     absl::StrCat("--rdzv_endpoint=", net.host(0), ":", kPort),
                                     absl::StrCat("--max_restarts=", max_restarts),
                                     "--grace_period=2s",
                                     "--"};
    for (const std::string& f : TrainFlags(ckpt, startup_timeout)) args.push_back(f);
    out.push_back(SpawnInNamespace(net.name(node), Absolute(Runfile("tools/launch")), args,
                                   absl::StrCat(dir, "/launcher_", node, ".txt"), {}));
  }
  return out;
}

void KillAll(const std::vector<Process>& ps) {
  for (const Process& p : ps) {
    if (p.pid > 0) kill(p.pid, SIGKILL);
  }
}

TEST(LaunchNetnsTest, AHostCutOffAndBackIsRestartedToTheUninterruptedWeights) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const std::string straight = TempDir("netns_straight_ckpt");
  {
    std::vector<Process> ls = StartLaunchers(net, TempDir("netns_straight"), straight, 0, 60);
    for (int i = 0; i < 2; ++i) {
      Exit e = WaitWithin(ls[i], 300, absl::StrCat("launcher ", i));
      ASSERT_EQ(e.code, 0) << Describe(e);
    }
  }
  const std::string ckpt = TempDir("netns_cut_ckpt");
  std::vector<Process> ls = StartLaunchers(net, TempDir("netns_cut"), ckpt, 3, 60);
  if (!WaitForCheckpoint(ckpt, 500)) {
    KillAll(ls);
    FAIL() << "no checkpoint of step 500; launcher 0 says:\n" << ReadFile(ls[0].stderr_path);
  }
  std::string err;
  ASSERT_EQ(Shell(absl::StrCat("ip -n ", net.name(1), " link set ", net.veth(1), " down"), &err), 0)
      << err;
  std::this_thread::sleep_for(std::chrono::seconds(5));  // past the 2 s heartbeat timeout
  ASSERT_EQ(Shell(absl::StrCat("ip -n ", net.name(1), " link set ", net.veth(1), " up"), &err), 0)
      << err;
  for (int i = 0; i < 2; ++i) {
    Exit e = WaitWithin(ls[i], 300, absl::StrCat("launcher ", i));
    EXPECT_EQ(e.code, 0) << "launcher " << i << " " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, "restarting every task (restart 1 of 3)")) << e.err;
  }
  if (HasFailure()) return;
  int compared = 0;
  ExpectSameTensors(absl::StrCat(straight, "/ckpt-", kSteps), absl::StrCat(ckpt, "/ckpt-", kSteps),
                    &compared);
  EXPECT_GT(compared, 4);
}

TEST(LaunchNetnsTest, AKilledLauncherIsNamedAndTheOtherGivesUp) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const std::string ckpt = TempDir("netns_lost_ckpt");
  std::vector<Process> ls = StartLaunchers(net, TempDir("netns_lost"), ckpt, 1, 6);
  if (!WaitForCheckpoint(ckpt, 500)) {
    KillAll(ls);
    FAIL() << "no checkpoint of step 500; launcher 0 says:\n" << ReadFile(ls[0].stderr_path);
  }
  // Node 1 is lost for good: its launcher dies, and its worker with it.
  kill(ls[1].pid, SIGKILL);
  Wait(ls[1]);
  Exit e = WaitWithin(ls[0], 120, "launcher 0");
  EXPECT_EQ(e.code, 1) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "restarting every task (restart 1 of 1)")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "never registered: /job:worker/replica:0/task:1")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "giving up after 1 restart")) << e.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
