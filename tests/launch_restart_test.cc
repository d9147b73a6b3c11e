// tools/launch across nodes and with restarts, end to end with the real
// trainer: two launchers, one per "node" (--nnodes=2, --node_rank, a
// rendezvous endpoint on loopback), train the weights one launcher's
// cluster trains; with --max_restarts, a worker killed mid-run makes every
// node restart its tasks, which resume from the newest checkpoint and end
// on exactly (bitwise) the weights of an uninterrupted run; past the
// restarts the launchers give up, naming the failure.
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// A rendezvous port p with p + 1 (restart 1's) free too.
int FreePortPair() {
  for (int tries = 0; tries < 50; ++tries) {
    const int p = FreePorts(1)[0];
    if (p < 65535 && PortFree(p + 1)) return p;
  }
  return FreePorts(1)[0];
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
