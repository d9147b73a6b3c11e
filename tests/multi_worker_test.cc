// End to end: clusters of real trainer processes on loopback, each task
// configured the way TensorFlow's are (TF_CONFIG, or --cluster_spec with
// --task_type/--task_index), training the digits MLP with
// --strategy=multi_worker_mirrored. What a user relies on:
//   - 2 and 4 workers end with the weights one process trains with the same
//     global batch (to float tolerance: the sums are added in another order);
//   - tasks may start in any order, and each writes its own trace;
//   - a worker killed (SIGKILL) or frozen (SIGSTOP) mid-run ends every other
//     task with an error naming it, never a hang;
//   - a cluster restarted from its checkpoint ends bitwise identical to an
//     uninterrupted run;
//   - a malformed TF_CONFIG, or tasks whose cluster specs disagree, fail at
//     start-up with an error naming the problem.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

int FreePort() { return FreePorts(1)[0]; }

// The flags of every run below: the digits MLP, SGD, a global batch of 48 (splits over 2, 3 and 4 workers).
std::vector<std::string> TrainFlags(int steps, const std::string& ckpt) {
  return {"--optimizer=sgd", "--hidden=32", absl::StrCat("--steps=", steps),
          "--global_batch_size=48", "--prefetch=0", "--quiet", "--intra_op_threads=1",
          absl::StrCat("--checkpoint_dir=", ckpt)};
}

struct Cluster {
  std::vector<Process> tasks;
  std::string dir;
};

// Starts n workers of one cluster; worker i gets TF_CONFIG for its task
// (extra_args[i] appended when given). `order` is the order they start in,
// `delay` the pause between two starts.
Cluster StartCluster(int n, const std::string& name, const std::vector<std::string>& flags,
                     std::vector<int> order = {}, std::chrono::milliseconds delay = {},
                     double heartbeat = 2) {
  Cluster c;
  c.dir = TempDir(name);
  const std::string cluster = WorkerCluster(n);
  if (order.empty()) {
    for (int i = 0; i < n; ++i) order.push_back(i);
  }
  c.tasks.resize(n);
  for (int i : order) {
    std::vector<std::string> args = flags;
    args.push_back("--strategy=multi_worker_mirrored");
    args.push_back(absl::StrCat("--heartbeat_timeout=", heartbeat));
    args.push_back("--startup_timeout=60");
    const std::string tf_config = absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                                               ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}");
    c.tasks[i] = Spawn(args, absl::StrCat(c.dir, "/stderr_", i, ".txt"), {tf_config});
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
  }
  return c;
}

std::vector<Exit> WaitAll(const Cluster& c) {
  std::vector<Exit> out;
  for (const Process& p : c.tasks) out.push_back(Wait(p));
  return out;
}

// The newest checkpoint prefix in `dir` (the manager names them ckpt-<step>).
std::string Checkpoint(const std::string& dir, int step) {
  return absl::StrCat(dir, "/ckpt-", step);
}

void ExpectAllSucceeded(const std::vector<Exit>& exits) {
  for (size_t i = 0; i < exits.size(); ++i) {
    EXPECT_EQ(exits[i].code, 0) << "worker " << i << " " << Describe(exits[i]);
  }
}

TEST(MultiWorkerTest, TwoAndFourWorkersTrainTheWeightsOfOneProcess) {
  const std::string one = TempDir("one_process");
  Exit e = RunTrainer(TrainFlags(30, one), "one_process");
  ASSERT_EQ(e.code, 0) << Describe(e);
  for (int n : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " workers"));
    const std::string ckpt = TempDir(absl::StrCat("workers_", n, "_ckpt"));
    Cluster c = StartCluster(n, absl::StrCat("workers_", n), TrainFlags(30, ckpt));
    std::vector<Exit> exits = WaitAll(c);
    ExpectAllSucceeded(exits);
    if (HasFailure()) return;
    const double worst = ExpectCloseTensors(Checkpoint(one, 30), Checkpoint(ckpt, 30), 1e-5);
    EXPECT_GE(worst, 0);
  }
}

TEST(MultiWorkerTest, WorkersMayStartInAnyOrder) {
  const std::string ckpt = TempDir("order_ckpt");
  // Each worker writes its own trace: the chief trace.json, worker k
  // trace.workerk.json (a straggler shows only in its own).
  const std::string traces = TempDir("order_traces");
  std::vector<std::string> flags = TrainFlags(20, ckpt);
  flags.push_back(absl::StrCat("--trace_out=", traces, "/trace.json"));
  flags.push_back("--trace_steps=2");
  Cluster c = StartCluster(3, "order", flags, {2, 0, 1}, std::chrono::milliseconds(400));
  ExpectAllSucceeded(WaitAll(c));
  for (const char* name : {"trace.json", "trace.worker1.json", "trace.worker2.json"}) {
    const std::string trace = ReadFile(absl::StrCat(traces, "/", name));
    EXPECT_TRUE(absl::StrContains(trace, "\"traceEvents\"")) << name << ": " << trace.substr(0, 200);
    EXPECT_TRUE(absl::StrContains(trace, "CollectiveReduceV2")) << name;
  }
}

// Issue 23, defect 4: a worker that starts later than the heartbeat timeout
// (but within the start-up timeout) joins, and nobody is declared lost for
// the wait; a worker that never comes is named at the start-up timeout.
TEST(MultiWorkerTest, AWorkerLaterThanTheHeartbeatTimeoutJoinsAndAMissingOneIsNamed) {
  const std::string ckpt = TempDir("late_ckpt");
  const double heartbeat = 1;
  Cluster c = StartCluster(2, "late", TrainFlags(10, ckpt), {0, 1}, std::chrono::milliseconds(4000),
                           heartbeat);
  ExpectAllSucceeded(WaitAll(c));

  const std::string dir = TempDir("never");
  std::vector<std::string> args = TrainFlags(10, TempDir("never_ckpt"));
  args.push_back("--strategy=multi_worker_mirrored");
  args.push_back("--heartbeat_timeout=1");
  args.push_back("--startup_timeout=3");
  const std::string tf_config = absl::StrCat("TF_CONFIG={\"cluster\":", WorkerCluster(2),
                                             ",\"task\":{\"type\":\"worker\",\"index\":0}}");
  Exit e = Wait(Spawn(args, dir + "/stderr_0.txt", {tf_config}));
  EXPECT_NE(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, "never registered: /job:worker/replica:0/task:1"))
      << Describe(e);
}

// Issue 23: a task started with another job token is refused at
// registration (it exits at once saying so), the chief logs the refusal
// naming the task it claimed to be, and the cluster names it as missing.
TEST(MultiWorkerTest, AWorkerWithAnotherJobTokenIsRefusedAndNamed) {
  const std::string dir = TempDir("wrong_token");
  const std::string cluster = WorkerCluster(2);
  std::vector<std::string> args = TrainFlags(10, TempDir("wrong_token_ckpt"));
  args.push_back("--strategy=multi_worker_mirrored");
  args.push_back("--startup_timeout=4");
  auto tf_config = [&](int i) {
    return absl::StrCat("TF_CONFIG={\"cluster\":", cluster, ",\"task\":{\"type\":\"worker\",\"index\":",
                        i, "}}");
  };
  Process chief = Spawn(args, dir + "/stderr_0.txt", {tf_config(0)});
  Process other = Spawn(args, dir + "/stderr_1.txt",
                        {tf_config(1), "STRATA_JOB_TOKEN=some-other-jobs-token-0123456789"});
  Exit e1 = Wait(other);
  Exit e0 = Wait(chief);
  EXPECT_NE(e1.code, 0) << Describe(e1);
  EXPECT_TRUE(absl::StrContains(e1.err, "does not match this job's token")) << Describe(e1);
  EXPECT_FALSE(absl::StrContains(e1.err, "some-other-jobs-token")) << Describe(e1);
  EXPECT_NE(e0.code, 0) << Describe(e0);
  EXPECT_TRUE(absl::StrContains(e0.err, "refused a call from")) << Describe(e0);
  EXPECT_TRUE(absl::StrContains(e0.err, "claiming to be task '/job:worker/replica:0/task:1'"))
      << Describe(e0);
  EXPECT_TRUE(absl::StrContains(e0.err, "never registered: /job:worker/replica:0/task:1"))
      << Describe(e0);

  // No token anywhere: the trainer says where to put one, unless told to run
  // without (with a warning).
  std::vector<std::string> unset_env = {tf_config(0), "STRATA_JOB_TOKEN="};
  Exit none = Wait(Spawn(args, dir + "/stderr_none.txt", unset_env));
  EXPECT_EQ(none.code, 1) << Describe(none);
  EXPECT_TRUE(absl::StrContains(none.err, "no job token")) << Describe(none);
  // --insecure_no_job_token: it runs, and says once what that means.
  std::vector<std::string> insecure_args = args;
  insecure_args.push_back("--insecure_no_job_token");
  const std::string one = absl::StrCat("TF_CONFIG={\"cluster\":", WorkerCluster(1),
                                       ",\"task\":{\"type\":\"worker\",\"index\":0}}");
  Exit insecure = Wait(Spawn(insecure_args, dir + "/stderr_insecure.txt", {one, "STRATA_JOB_TOKEN="}));
  EXPECT_EQ(insecure.code, 0) << Describe(insecure);
  const std::string warning = "runs without a job token";
  const size_t first = insecure.err.find(warning);
  EXPECT_NE(first, std::string::npos) << Describe(insecure);
  EXPECT_EQ(insecure.err.find(warning, first + 1), std::string::npos) << "warned twice";
}

// Kills (or freezes) worker 1 of a 3-worker cluster once training is under
// way; the other two must exit non-zero naming it.
void LoseWorkerMidRun(int signal_number, const std::string& name) {
  const std::string ckpt = TempDir(name + "_ckpt");
  std::vector<std::string> flags = TrainFlags(1000000, ckpt);
  flags.push_back("--save_every_steps=20");
  const double heartbeat = 2;
  Cluster c = StartCluster(3, name, flags, {}, {}, heartbeat);
  ASSERT_TRUE(WaitForCheckpoint(ckpt, 20)) << ReadFile(c.tasks[0].stderr_path);
  const auto lost_at = Clock::now();
  ASSERT_EQ(kill(c.tasks[1].pid, signal_number), 0);
  for (int i : {0, 2}) {
    Exit e = Wait(c.tasks[i]);
    const double seconds = std::chrono::duration<double>(Clock::now() - lost_at).count();
    EXPECT_NE(e.code, 0) << "worker " << i << " did not fail: " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, "/job:worker/replica:0/task:1"))
        << "worker " << i << " does not name the lost task; it " << Describe(e);
    // Not a speed measurement: a hang detector, with room for a loaded CI
    // machine (the bound is the heartbeat timeout + 5 s).
    EXPECT_LT(seconds, heartbeat + 30) << "worker " << i << " took " << seconds << " s";
    std::fprintf(stderr, "worker %d exited %.2f s after worker 1 got signal %d\n", i, seconds,
                 signal_number);
  }
  if (signal_number == SIGSTOP) kill(c.tasks[1].pid, SIGKILL);
  Wait(c.tasks[1]);
}

TEST(MultiWorkerTest, AKilledWorkerEndsEveryOtherTaskNamingIt) {
  LoseWorkerMidRun(SIGKILL, "killed");
}

TEST(MultiWorkerTest, AFrozenWorkerEndsEveryOtherTaskNamingIt) {
  LoseWorkerMidRun(SIGSTOP, "frozen");
}

TEST(MultiWorkerTest, ARestartedClusterEndsBitwiseIdenticalToAnUninterruptedOne) {
  const std::string straight = TempDir("straight_ckpt");
  std::vector<std::string> flags = TrainFlags(40, straight);
  flags.push_back("--save_every_steps=10");
  ExpectAllSucceeded(WaitAll(StartCluster(2, "straight", flags)));

  const std::string resumed = TempDir("resumed_ckpt");
  flags = TrainFlags(40, resumed);
  flags.push_back("--save_every_steps=10");
  std::vector<std::string> crashing = flags;
  crashing.push_back("--crash_at_step=25");  // every worker dies after step 25
  std::vector<Exit> crashed = WaitAll(StartCluster(2, "crashing", crashing));
  EXPECT_EQ(crashed[0].signal, SIGKILL) << Describe(crashed[0]);
  ExpectAllSucceeded(WaitAll(StartCluster(2, "resuming", flags)));
  int compared = 0;
  ExpectSameTensors(Checkpoint(straight, 40), Checkpoint(resumed, 40), &compared);
  EXPECT_GT(compared, 4);
}

TEST(MultiWorkerTest, MalformedTfConfigFailsAtStartUpNamingTheField) {
  const std::string dir = TempDir("bad_config");
  struct Case {
    std::string tf_config;
    std::string expect;
  };
  const int port = FreePort();
  std::vector<Case> cases = {
      {"{\"cluster\": {\"worker\": [", "TF_CONFIG"},
      {absl::StrCat("{\"cluster\":{\"worker\":[\"127.0.0.1:", port,
                    "\"]},\"task\":{\"type\":\"boss\",\"index\":0}}"),
       "boss"},
      {absl::StrCat("{\"cluster\":{\"worker\":[\"127.0.0.1:", port,
                    "\"]},\"task\":{\"type\":\"worker\",\"index\":3}}"),
       "index"},
      {"{\"cluster\":{\"worker\":[\"127.0.0.1:1\",\"127.0.0.1:1\"]},\"task\":{\"type\":\"worker\","
       "\"index\":0}}",
       "127.0.0.1:1"},
      {"{\"cluster\":{\"worker\":[\"127.0.0.1:99999\"]},\"task\":{\"type\":\"worker\",\"index\":0}}",
       "99999"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Process p = Spawn({"--strategy=multi_worker_mirrored", "--steps=1", "--quiet"},
                      absl::StrCat(dir, "/stderr_", i, ".txt"),
                      {"TF_CONFIG=" + cases[i].tf_config});
    Exit e = Wait(p);
    EXPECT_EQ(e.code, 1) << cases[i].tf_config << "\n" << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, "InvalidArgument") ||
                absl::StrContains(e.err, "INVALID_ARGUMENT"))
        << e.err;
    EXPECT_TRUE(absl::StrContains(e.err, cases[i].expect))
        << "expected '" << cases[i].expect << "' in:\n" << e.err;
  }
}

TEST(MultiWorkerTest, TasksWhoseClusterSpecsDisagreeAllFailFast) {
  const std::string dir = TempDir("disagree");
  const std::vector<int> ports = FreePorts(3);
  const int p0 = ports[0], p1 = ports[1], p2 = ports[2];
  const std::string two = absl::StrCat("{\"worker\":[\"127.0.0.1:", p0, "\",\"127.0.0.1:", p1, "\"]}");
  const std::string three = absl::StrCat("{\"worker\":[\"127.0.0.1:", p0, "\",\"127.0.0.1:", p1,
                                         "\",\"127.0.0.1:", p2, "\"]}");
  const std::vector<std::string> flags = {"--strategy=multi_worker_mirrored", "--steps=5", "--quiet",
                                          "--startup_timeout=60", "--heartbeat_timeout=2"};
  std::vector<std::string> a0 = flags, a1 = flags;
  a0.insert(a0.end(), {"--cluster_spec=" + two, "--task_type=worker", "--task_index=0"});
  a1.insert(a1.end(), {"--cluster_spec=" + three, "--task_type=worker", "--task_index=1"});
  const auto start = Clock::now();
  Process w0 = Spawn(a0, dir + "/stderr_0.txt");
  Process w1 = Spawn(a1, dir + "/stderr_1.txt");
  Exit e0 = Wait(w0);
  Exit e1 = Wait(w1);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_NE(e0.code, 0) << Describe(e0);
  EXPECT_NE(e1.code, 0) << Describe(e1);
  EXPECT_TRUE(absl::StrContains(e1.err, "fingerprint") || absl::StrContains(e1.err, "cluster"))
      << e1.err;
  // Fast: well before the 60 s start-up timeout.
  EXPECT_LT(seconds, 40) << e0.err << e1.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
