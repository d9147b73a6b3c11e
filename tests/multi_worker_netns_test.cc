// End to end over TCP: clusters of real trainer processes whose collectives
// go over the TCP data plane instead of shared memory. What a user relies on:
//   - 2 workers on loopback with --collective_transport=tcp end with the
//     weights one process trains with the same global batch;
//   - 2 workers that are each their own host (a network namespace each,
//     joined by a veth pair, addresses 10.x.y.1 and 10.x.y.2) pick TCP by
//     themselves and end with the same weights;
//   - a worker killed (SIGKILL) on the other host ends the chief with an
//     error naming it, never a hang;
//   - when a host drops off the network (its link goes down: no reset, only
//     silence), both sides exit with an error naming the other.
// The namespace tests need root and `ip netns` (iproute2); where namespaces
// cannot be made they are skipped, with the command and its error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "runtime/security/test_certs.h"
#include "tests/netns.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSteps = 30;

// The flags of every run below: the digits MLP, SGD, a global batch of 48.
std::vector<std::string> TrainFlags(int steps, const std::string& ckpt) {
  return {"--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", steps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          absl::StrCat("--checkpoint_dir=", ckpt)};
}

// Worker flags on top of TrainFlags.
std::vector<std::string> WorkerFlags(std::vector<std::string> flags, double heartbeat) {
  flags.push_back("--strategy=multi_worker_mirrored");
  flags.push_back(absl::StrCat("--heartbeat_timeout=", heartbeat));
  flags.push_back("--startup_timeout=60");
  return flags;
}

std::string TfConfig(const std::vector<std::string>& addresses, int index) {
  return absl::StrCat("TF_CONFIG={\"cluster\":{\"worker\":[\"", absl::StrJoin(addresses, "\",\""),
                      "\"]},\"task\":{\"type\":\"worker\",\"index\":", index, "}}");
}

std::string Checkpoint(const std::string& dir, int step) {
  return absl::StrCat(dir, "/ckpt-", step);
}

// The chief's checkpoint of one process training kSteps steps, made once
// for every test of this file.
const std::string& OneProcessCheckpoint() {
  static const std::string* const prefix = [] {
    const std::string dir = TempDir("one_process");
    Exit e = RunTrainer(TrainFlags(kSteps, dir), "one_process");
    EXPECT_EQ(e.code, 0) << Describe(e);
    return new std::string(Checkpoint(dir, kSteps));
  }();
  return *prefix;
}

// Two addresses on 127.0.0.1 with free ports.
std::vector<std::string> LoopbackPair() {
  const std::vector<int> ports = FreePorts(2);
  return {absl::StrCat("127.0.0.1:", ports[0]), absl::StrCat("127.0.0.1:", ports[1])};
}

// Trains 2 workers over TCP on loopback (worker i with env[i] besides its
// TF_CONFIG); both must exit 0 with the weights of one process.
void TwoWorkersOverTcpTrainTheWeightsOfOneProcess(const std::string& name,
                                                  const std::vector<std::vector<std::string>>& env) {
  const std::string one = OneProcessCheckpoint();
  const std::string dir = TempDir(name);
  const std::string ckpt = TempDir(name + "_ckpt");
  const std::vector<std::string> addrs = LoopbackPair();
  std::vector<std::string> flags = WorkerFlags(TrainFlags(kSteps, ckpt), 2);
  flags.push_back("--collective_transport=tcp");
  std::vector<Process> tasks;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> e = env[i];
    e.push_back(TfConfig(addrs, i));
    tasks.push_back(Spawn(flags, absl::StrCat(dir, "/stderr_", i, ".txt"), e));
  }
  for (int i = 0; i < 2; ++i) {
    Exit e = Wait(tasks[i]);
    EXPECT_EQ(e.code, 0) << "worker " << i << " " << Describe(e);
  }
  if (::testing::Test::HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(one, Checkpoint(ckpt, kSteps), 1e-5), 0);
}

TEST(MultiWorkerTcpTest, TwoWorkersOverTcpOnLoopbackTrainTheWeightsOfOneProcess) {
  TwoWorkersOverTcpTrainTheWeightsOfOneProcess("tcp_loopback", {{}, {}});
}

// Mutual TLS (docs/cluster.md, "Mutual TLS"), certificates made here by
// openssl and given the way a Kubernetes or Slurm job would (environment
// variables naming files): 2 workers over TCP end with the weights of one
// process; a worker whose certificate is of another CA is refused at
// registration, and the chief names it as missing; a certificate that does
// not match its key fails at start-up naming the file.
TEST(MultiWorkerTcpTest, WithMutualTlsTwoWorkersTrainAndAForeignCertificateIsRefused) {
  const std::string dir = TempDir("tcp_tls_certs");
  auto ca = MakeTestCa(dir, "job");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto other_ca = MakeTestCa(dir, "other");
  ASSERT_TRUE(other_ca.ok()) << other_ca.status();
  std::vector<TlsFiles> certs;
  for (const char* name : {"w0", "w1"}) {
    auto f = MakeTestCert(*ca, name, "IP:127.0.0.1");
    ASSERT_TRUE(f.ok()) << f.status();
    certs.push_back(*f);
  }
  auto foreign = MakeTestCert(*other_ca, "foreign", "IP:127.0.0.1");
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  auto env = [](const TlsFiles& f) {
    return std::vector<std::string>{absl::StrCat("STRATA_TLS_CERT_FILE=", f.cert_file),
                                    absl::StrCat("STRATA_TLS_KEY_FILE=", f.key_file),
                                    absl::StrCat("STRATA_TLS_CA_FILE=", f.ca_file)};
  };
  TwoWorkersOverTcpTrainTheWeightsOfOneProcess("tcp_tls", {env(certs[0]), env(certs[1])});
  if (HasFailure()) return;
  {
    const std::vector<std::string> addrs = LoopbackPair();
    // The chief waits longer than the intruder, so that the intruder's last
    // attempt meets the chief's TLS (not a closed port).
    std::vector<std::string> flags = WorkerFlags(TrainFlags(kSteps, TempDir("tls_foreign")), 2);
    std::vector<std::string> chief_flags = flags, intruder_flags = flags;
    chief_flags.push_back("--startup_timeout=8");
    intruder_flags.push_back("--startup_timeout=4");
    std::vector<std::string> e0 = env(certs[0]), e1 = env(*foreign);
    e0.push_back(TfConfig(addrs, 0));
    e1.push_back(TfConfig(addrs, 1));
    Process chief = Spawn(chief_flags, dir + "/stderr_chief.txt", e0);
    Process intruder = Spawn(intruder_flags, dir + "/stderr_foreign.txt", e1);
    Exit x1 = Wait(intruder);
    Exit x0 = Wait(chief);
    EXPECT_NE(x1.code, 0) << Describe(x1);
    EXPECT_TRUE(absl::StrContains(x1.err, "andshake failed")) << Describe(x1);
    EXPECT_NE(x0.code, 0) << Describe(x0);
    EXPECT_TRUE(absl::StrContains(x0.err, "never registered: /job:worker/replica:0/task:1"))
        << Describe(x0);
  }
  {
    TlsFiles mismatched = certs[0];
    mismatched.key_file = certs[1].key_file;
    std::vector<std::string> e = env(mismatched);
    e.push_back(TfConfig({absl::StrCat("127.0.0.1:", FreePorts(1)[0])}, 0));
    Exit x = Wait(Spawn(WorkerFlags(TrainFlags(1, TempDir("tls_bad_key")), 2),
                        dir + "/stderr_bad_key.txt", e));
    EXPECT_EQ(x.code, 1) << Describe(x);
    EXPECT_TRUE(absl::StrContains(x.err, "w1.key is not the private key of --tls_cert_file"))
        << Describe(x);
  }
}

// The trainer inside namespace `ns`, with `env` besides this process's.
Process SpawnIn(const std::string& ns, const std::vector<std::string>& args,
                const std::string& stderr_path, const std::string& env) {
  std::vector<std::string> with_data = args;
  with_data.push_back(absl::StrCat("--digits_path=", Absolute(Runfile("data/digits/digits.csv.gz"))));
  return SpawnInNamespace(ns, Absolute(Runfile("tools/trainer")), with_data, stderr_path, {env});
}

// Worker i of a 2-worker cluster in namespace i, listening on its
// namespace's address (the same port on both: they are different hosts).
std::vector<Process> StartNetnsCluster(const NetnsPair& net, const std::string& name,
                                       const std::vector<std::string>& flags) {
  const std::string dir = TempDir(name);
  const std::vector<std::string> addrs = {net.host(0) + ":2222", net.host(1) + ":2222"};
  std::vector<Process> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(
        SpawnIn(net.name(i), flags, absl::StrCat(dir, "/stderr_", i, ".txt"), TfConfig(addrs, i)));
  }
  return tasks;
}

TEST(MultiWorkerNetnsTest, WorkersOnTwoHostsTrainTheWeightsOfOneProcess) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const std::string one = OneProcessCheckpoint();
  const std::string ckpt = TempDir("netns_ckpt");
  // No --collective_transport: different hosts must pick TCP by themselves.
  std::vector<Process> tasks =
      StartNetnsCluster(net, "netns", WorkerFlags(TrainFlags(kSteps, ckpt), 2));
  for (int i = 0; i < 2; ++i) {
    // A hung task is killed, so that the namespaces are always removed.
    Exit e = WaitWithin(tasks[i], 120, absl::StrCat("worker ", i));
    EXPECT_EQ(e.code, 0) << "worker " << i << " in " << net.name(i) << " " << Describe(e);
  }
  if (HasFailure()) return;
  EXPECT_GE(ExpectCloseTensors(one, Checkpoint(ckpt, kSteps), 1e-5), 0);
}

// Starts the 2-worker namespace cluster training until stopped, a checkpoint
// every 20 steps; returns once step 20 is saved (training is under way over
// the veth), or kills the tasks and returns empty.
std::vector<Process> StartLongRun(const NetnsPair& net, const std::string& name, double heartbeat) {
  const std::string ckpt = TempDir(name + "_ckpt");
  std::vector<std::string> flags = TrainFlags(1000000, ckpt);
  flags.push_back("--save_every_steps=20");
  std::vector<Process> tasks = StartNetnsCluster(net, name, WorkerFlags(flags, heartbeat));
  if (!WaitForCheckpoint(ckpt, 20)) {
    for (const Process& p : tasks) kill(p.pid, SIGKILL);
    for (const Process& p : tasks) Wait(p);
    ADD_FAILURE() << "no checkpoint of step 20; the chief says:\n"
                  << ReadFile(tasks[0].stderr_path);
    return {};
  }
  return tasks;
}

// The established TCP connections between the two hosts that are not to
// a gRPC server (port 2222): the TCP data plane's, which listens on an
// ephemeral port. Shared memory would have none.
int DataPlaneConnections(const NetnsPair& net) {
  const std::string out = TempDir("netns_ss") + "/ss.txt";
  // ss's exit status does not matter: what it printed, or its error, is in
  // the file, and the caller counts connections in it.
  const int ss_status = std::system(
      absl::StrCat("ip netns exec ", net.name(0), " ss -Htn state established > '", out, "' 2>&1")
          .c_str());
  (void)ss_status;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(ReadFile(out), '\n')) {
    if (absl::StrContains(line, net.host(0) + ":") && absl::StrContains(line, net.host(1) + ":") &&
        !absl::StrContains(line, ":2222 ")) {
      ++n;
    }
  }
  return n;
}

TEST(MultiWorkerNetnsTest, AWorkerKilledOnAnotherHostEndsTheChiefNamingIt) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const double heartbeat = 2;
  std::vector<Process> tasks = StartLongRun(net, "netns_killed", heartbeat);
  if (tasks.empty()) return;
  // Different hosts picked TCP by themselves.
  EXPECT_GE(DataPlaneConnections(net), 1);
  const auto lost_at = Clock::now();
  kill(tasks[1].pid, SIGKILL);
  Exit e = WaitWithin(tasks[0], heartbeat + 30, "the chief");
  const double seconds = std::chrono::duration<double>(Clock::now() - lost_at).count();
  Wait(tasks[1]);
  EXPECT_NE(e.code, 0) << "the chief did not fail: " << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "/job:worker/replica:0/task:1"))
      << "the chief does not name the lost task; it " << Describe(e);
  std::fprintf(stderr, "the chief exited %.2f s after worker 1 (other host) got SIGKILL\n",
               seconds);
}

// Worker 1's host drops off the network (its link goes down): no reset ever
// comes, only silence. Both sides must give up, each naming the other.
TEST(MultiWorkerNetnsTest, AHostThatDropsOffTheNetworkEndsBothSidesNamingTheOther) {
  NetnsPair net;
  if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
  const double heartbeat = 2;
  std::vector<Process> tasks = StartLongRun(net, "netns_partition", heartbeat);
  if (tasks.empty()) return;
  std::string err;
  const auto lost_at = Clock::now();
  if (Shell(absl::StrCat("ip -n ", net.name(1), " link set ", net.veth(1), " down"), &err) != 0) {
    for (const Process& p : tasks) kill(p.pid, SIGKILL);
    for (const Process& p : tasks) Wait(p);
    FAIL() << "cannot take worker 1's link down: " << err;
  }
  const char* expected[2] = {"/job:worker/replica:0/task:1", "/job:worker/replica:0/task:0"};
  for (int i : {0, 1}) {
    Exit e = WaitWithin(tasks[i], heartbeat + 30, absl::StrCat("worker ", i));
    const double seconds = std::chrono::duration<double>(Clock::now() - lost_at).count();
    EXPECT_NE(e.code, 0) << "worker " << i << " did not fail: " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, expected[i]))
        << "worker " << i << " does not name " << expected[i] << "; it " << Describe(e);
    std::fprintf(stderr, "worker %d exited %.2f s after worker 1's link went down\n", i, seconds);
  }
}

}  // namespace
}  // namespace testing
}  // namespace strata
