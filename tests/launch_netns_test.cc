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
// And the environments Kubeflow's operators set, on such hosts, with the
// tasks' service names resolved as a pod resolves them (/etc/netns hosts
// files): TFJob's TF_CONFIG with "environment": "cloud", PyTorchJob's
// MASTER_ADDR naming the master's service; each trains one process's
// weights. Needs root and `ip netns`; skips, saying why, where namespaces
// cannot be made.
#include <signal.h>

#include <chrono>
#include <cstdio>
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

// An elastic job on three hosts (one switch, a launcher on each,
// --nnodes=2:3): the third host is cut off for good (its link down). The
// other two lose it, restart, and after the last call go on as a 2-node
// round from the newest checkpoint, ending within float tolerance of one
// process's weights; the cut-off launcher cannot reach the rendezvous again
// and gives up.
TEST(LaunchNetnsTest, AnElasticJobOnThreeHostsDropsAHostCutOffForGood) {
  NetnsHosts net(3);
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  constexpr int kElasticSteps = 4000;
  auto flags = [&](const std::string& ckpt, const std::string& metrics) {
    std::vector<std::string> f = TrainFlags(ckpt, 60);
    for (std::string& x : f) {
      if (absl::StartsWith(x, "--steps=")) x = absl::StrCat("--steps=", kElasticSteps);
    }
    if (!metrics.empty()) f.push_back("--metrics_out=" + metrics);
    return f;
  };
  const std::string one = TempDir("elastic3_one");
  {
    std::vector<std::string> f = flags(one, "");
    f.erase(f.begin(), f.begin() + 2);  // the program; one_device
    Exit e = Wait(SpawnProgram(Runfile("tools/trainer"), f, TempDir("elastic3_one_log") + "/e"));
    ASSERT_EQ(e.code, 0) << Describe(e);
  }
  const std::string dir = TempDir("elastic3");
  const std::string ckpt = TempDir("elastic3_ckpt");
  std::vector<Process> ls;
  for (int node = 0; node < 3; ++node) {
    std::vector<std::string> args = {"--nnodes=2:3",
                                     "--num_workers=1",
                                     absl::StrCat("--rdzv_endpoint=", net.host(0), ":", kPort),
                                     "--max_restarts=2",
                                     "--rdzv_last_call=3s",
                                     "--rdzv_timeout=15s",
                                     "--grace_period=2s",
                                     "--"};
    for (const std::string& f : flags(ckpt, dir + "/metrics.jsonl")) args.push_back(f);
    ls.push_back(SpawnInNamespace(net.name(node), Absolute(Runfile("tools/launch")), args,
                                  absl::StrCat(dir, "/launcher_", node, ".txt"), {}));
    if (node == 0) {
      // Host 0's launcher hosts the rendezvous (it can bind the endpoint).
      for (int i = 0;
           i < 3000 && !absl::StrContains(ReadFile(ls[0].stderr_path), "hosting the rendezvous");
           ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  if (!WaitForCheckpoint(ckpt, 500)) {
    KillAll(ls);
    FAIL() << "no checkpoint of step 500; launcher 0 says:\n" << ReadFile(ls[0].stderr_path);
  }
  // Every host is in the first round (hosts 1 and 2 in the order they joined).
  EXPECT_TRUE(absl::StrContains(ReadFile(ls[2].stderr_path), " of 3, ranks "))
      << ReadFile(ls[2].stderr_path);
  std::string err;
  ASSERT_EQ(Shell(absl::StrCat("ip -n ", net.name(2), " link set ", net.veth(2), " down"), &err), 0)
      << err;
  for (int i = 0; i < 2; ++i) {
    Exit e = WaitWithin(ls[i], 300, absl::StrCat("launcher ", i));
    EXPECT_EQ(e.code, 0) << "launcher " << i << " " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, absl::StrCat("round 1: node ", i, " of 2"))) << e.err;
  }
  Exit cut = WaitWithin(ls[2], 120, "the cut-off launcher");
  EXPECT_NE(cut.code, 0) << Describe(cut);
  EXPECT_TRUE(absl::StrContains(cut.err, "rendezvous")) << cut.err;
  if (HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(absl::StrCat(one, "/ckpt-", kElasticSteps),
                               absl::StrCat(ckpt, "/ckpt-", kElasticSteps), 1e-2),
            0);
  const std::string metrics = ReadFile(dir + "/metrics.jsonl");
  const size_t final_line = metrics.rfind("{\"final\":true");
  ASSERT_NE(final_line, std::string::npos);
  EXPECT_TRUE(absl::StrContains(metrics.substr(final_line), "\"start_step\":"));
  EXPECT_FALSE(absl::StrContains(metrics.substr(final_line), "\"start_step\":0,"))
      << metrics.substr(final_line);
}

// Kubeflow's operators name tasks by service DNS names. `ip netns exec`
// bind-mounts /etc/netns/<namespace>/hosts over /etc/hosts, so each
// simulated host resolves the names as a pod resolves its job's services.
class ServiceNames {
 public:
  ServiceNames(const NetnsPair& net, const std::vector<std::string>& names) {
    std::string hosts = "127.0.0.1 localhost\n";
    for (size_t i = 0; i < names.size() && i < 2; ++i) {
      absl::StrAppend(&hosts, net.host(static_cast<int>(i)), " ", names[i], "\n");
    }
    for (int i = 0; i < 2; ++i) {
      dirs_.push_back("/etc/netns/" + net.name(i));
      std::string err;
      if (Shell("mkdir -p '" + dirs_.back() + "'", &err) != 0) {
        error_ = err;
        return;
      }
      std::FILE* f = std::fopen((dirs_.back() + "/hosts").c_str(), "w");
      if (f == nullptr) {
        error_ = "cannot write " + dirs_.back() + "/hosts";
        return;
      }
      std::fputs(hosts.c_str(), f);
      std::fclose(f);
    }
  }
  ~ServiceNames() {
    std::string err;
    for (const std::string& d : dirs_) Shell("rm -rf '" + d + "'", &err);
  }
  const std::string& error() const { return error_; }

 private:
  std::vector<std::string> dirs_;
  std::string error_;
};

// The trainer's flags for a 2-worker run of kShortSteps.
constexpr int kShortSteps = 30;
std::vector<std::string> ShortRun(const std::string& ckpt) {
  return {"--strategy=multi_worker_mirrored",
          "--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", kShortSteps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--startup_timeout=60",
          absl::StrCat("--checkpoint_dir=", ckpt),
          absl::StrCat("--digits_path=", Absolute(Runfile("data/digits/digits.csv.gz")))};
}

// Runs worker i in namespace i with env[i]; expects both to succeed, name
// `resolver`, and end on one process's weights.
void ExpectHostsTrainLikeOneProcess(const NetnsPair& net, const std::string& name,
                                    const std::vector<std::vector<std::string>>& env,
                                    const std::string& resolver) {
  const std::string one = TempDir(name + "_one");
  std::vector<std::string> one_flags = ShortRun(one);
  one_flags.erase(one_flags.begin());  // one process: one_device
  Exit e = Wait(SpawnProgram(Runfile("tools/trainer"), one_flags,
                             TempDir(name + "_one_log") + "/stderr.txt"));
  ASSERT_EQ(e.code, 0) << Describe(e);
  const std::string dir = TempDir(name);
  const std::string ckpt = TempDir(name + "_ckpt");
  std::vector<Process> ps;
  for (int i = 0; i < 2; ++i) {
    ps.push_back(SpawnInNamespace(net.name(i), Absolute(Runfile("tools/trainer")), ShortRun(ckpt),
                                  absl::StrCat(dir, "/stderr_", i, ".txt"), env[i]));
  }
  for (int i = 0; i < 2; ++i) {
    Exit x = WaitWithin(ps[i], 120, absl::StrCat("worker ", i));
    EXPECT_EQ(x.code, 0) << "worker " << i << " " << Describe(x);
    EXPECT_TRUE(absl::StrContains(x.err, absl::StrCat("cluster from ", resolver, " "))) << x.err;
  }
  if (::testing::Test::HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(absl::StrCat(one, "/ckpt-", kShortSteps),
                               absl::StrCat(ckpt, "/ckpt-", kShortSteps), 1e-5),
            0);
}

TEST(SchedulersOnHostsTest, TfJobServiceNamesTrainTheWeightsOfOneProcess) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const std::vector<std::string> names = {"mnist-worker-0.kubeflow.svc",
                                          "mnist-worker-1.kubeflow.svc"};
  ServiceNames services(net, names);
  ASSERT_EQ(services.error(), "");
  std::vector<std::vector<std::string>> env;
  for (int i = 0; i < 2; ++i) {
    // As TFJob writes it: the services' names and ports, "environment": "cloud".
    env.push_back({absl::StrCat(R"(TF_CONFIG={"cluster":{"worker":[")", names[0], R"(:2222",")",
                                names[1], R"(:2222"]},"task":{"type":"worker","index":)", i,
                                R"(},"environment":"cloud"})")});
  }
  ExpectHostsTrainLikeOneProcess(net, "tfjob_hosts", env, "kubeflow_tfjob");
}

TEST(SchedulersOnHostsTest, PyTorchJobMasterNameTrainsTheWeightsOfOneProcess) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  ServiceNames services(net, {"mnist-master-0"});
  ASSERT_EQ(services.error(), "");
  std::vector<std::vector<std::string>> env;
  for (int i = 0; i < 2; ++i) {
    // As PyTorchJob sets them: the master's service name, its port, the rank.
    env.push_back({"MASTER_ADDR=mnist-master-0", "MASTER_PORT=23456", absl::StrCat("RANK=", i),
                   "WORLD_SIZE=2"});
  }
  ExpectHostsTrainLikeOneProcess(net, "pytorchjob_hosts", env, "torchrun");
}

}  // namespace
}  // namespace testing
}  // namespace strata
