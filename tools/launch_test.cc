// Runs the real launcher over real worker processes (launch_test_worker).
#include "tools/launch_lib.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategy/cluster_resolver.h"

extern char** environ;

namespace strata {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(dir == nullptr ? "." : dir, "/strata/", path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `done` every 10 ms; false after `guard` (a hang guard, not a timing
// assertion: every caller expects to finish far sooner).
template <typename F>
bool PollUntil(F done, absl::Duration guard = absl::Seconds(60)) {
  const absl::Time end = absl::Now() + guard;
  while (!done()) {
    if (absl::Now() > end) return false;
    usleep(10000);
  }
  return true;
}

struct Result {
  int code = -1;   // exit status, -1 if killed
  int signal = 0;  // the signal that killed it
  std::string out, err;
};

// Every "[task] content" line of `text`, by task; other lines under "".
std::map<std::string, std::vector<std::string>> ByTask(const std::string& text) {
  std::map<std::string, std::vector<std::string>> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t close = line.find("] ");
    if (absl::StartsWith(line, "[") && close != absl::string_view::npos) {
      lines[std::string(line.substr(1, close - 1))].emplace_back(line.substr(close + 2));
    } else {
      lines[""].emplace_back(line);
    }
  }
  return lines;
}

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = io::MakeTempDir("launch");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }

  // The launcher's arguments to run the test worker with `actions`.
  std::vector<std::string> Worker(const std::vector<std::string>& actions) {
    std::vector<std::string> args = {"--", Runfile("tools/launch_test_worker"), dir_};
    args.insert(args.end(), actions.begin(), actions.end());
    return args;
  }

  pid_t Start(const std::vector<std::string>& flags, const std::vector<std::string>& rest) {
    std::vector<std::string> argv_s = {Runfile("tools/launch")};
    argv_s.insert(argv_s.end(), flags.begin(), flags.end());
    argv_s.insert(argv_s.end(), rest.begin(), rest.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/stdout").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/stderr").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << argv[0];
    return rc == 0 ? pid : -1;
  }

  Result Wait(pid_t pid) {
    Result r;
    if (pid < 0) return r;
    int status = 0;
    if (!PollUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, absl::Seconds(120))) {
      ADD_FAILURE() << "the launcher did not exit; killing it";
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = ReadFile(dir_ + "/stdout");
    r.err = ReadFile(dir_ + "/stderr");
    return r;
  }

  Result Launch(const std::vector<std::string>& flags, const std::vector<std::string>& rest) {
    return Wait(Start(flags, rest));
  }

  // The pid in DIR/ready.TASK once the task wrote it; -1 if it never does.
  pid_t WaitReady(const std::string& task) {
    const std::string path = absl::StrCat(dir_, "/ready.", task);
    if (!PollUntil([&] { return access(path.c_str(), F_OK) == 0; })) return -1;
    int pid = -1;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &pid));
    return pid;
  }

  std::string dir_;
};

TEST_F(LaunchTest, AllSucceedOutputPrefixedAndComplete) {
  const int kLines = 300;
  Result r = Launch({"--num_workers=3"}, Worker({absl::StrCat("*=lines:", kLines)}));
  ASSERT_EQ(r.code, 0) << r.err;
  auto out = ByTask(r.out);
  auto err = ByTask(r.err);
  EXPECT_EQ(out.count(""), 0u) << "unprefixed stdout: " << out[""][0];
  for (const std::string& line : err[""]) EXPECT_TRUE(absl::StartsWith(line, "launch: ")) << line;
  for (int w = 0; w < 3; ++w) {
    const std::string task = absl::StrCat("worker:", w);
    // Lines intact, in order, each under its own task's prefix: a line mixed
    // with another task's would break one of these.
    const std::vector<std::string>& o = out[task];
    ASSERT_EQ(o.size(), kLines + 4u) << task;
    EXPECT_TRUE(absl::StartsWith(o[0], "TF_CONFIG={")) << o[0];
    EXPECT_EQ(o[1], "STRATA_TASK=" + task);
    for (int k = 0; k < kLines; ++k) EXPECT_EQ(o[3 + k], absl::StrCat("out ", task, " ", k));
    EXPECT_EQ(o.back(), "partial " + task);  // flushed at exit without its newline
    const std::vector<std::string>& e = err[task];
    ASSERT_EQ(e.size(), static_cast<size_t>(kLines)) << task;
    for (int k = 0; k < kLines; ++k) EXPECT_EQ(e[k], absl::StrCat("err ", task, " ", k));
  }
  EXPECT_TRUE(absl::EndsWith(r.out, "\n"));
}

TEST_F(LaunchTest, EachTaskGetsTensorFlowTfConfigWithItsOwnIndexAndDistinctPorts) {
  Result r = Launch({"--num_workers=2", "--num_chiefs=1"}, Worker({"*=bind"}));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  auto out = ByTask(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  std::vector<ClusterSpec> specs;
  for (const std::string task : {"chief:0", "worker:0", "worker:1"}) {
    const std::vector<std::string>& lines = out[task];
    ASSERT_EQ(lines.size(), 4u) << task << "\n" << r.out;
    absl::string_view config = lines[0];
    ASSERT_TRUE(absl::ConsumePrefix(&config, "TF_CONFIG=")) << lines[0];
    absl::StatusOr<ClusterSpec> spec = ClusterSpecFromTfConfig(config);
    ASSERT_TRUE(spec.ok()) << spec.status() << " in " << config;
    EXPECT_EQ(absl::StrCat(spec->task_type(), ":", spec->task_index()), task);
    EXPECT_EQ(lines[1], "STRATA_TASK=" + task);
    // The task could listen on exactly its address.
    EXPECT_EQ(lines[3], "bound " + spec->task_address());
    specs.push_back(*spec);
  }
  std::set<std::string> addresses;
  for (const ClusterSpec& spec : specs) {
    EXPECT_EQ(spec.jobs(), specs[0].jobs());
    EXPECT_EQ(spec.num_workers(), 3);
    EXPECT_EQ(spec.chief().type, "chief");
    addresses.insert(spec.task_address());
    EXPECT_TRUE(absl::StartsWith(spec.task_address(), "127.0.0.1:")) << spec.task_address();
  }
  EXPECT_EQ(addresses.size(), 3u);
}

TEST_F(LaunchTest, FailedWorkerIsNamedAndTheOthersAreStopped) {
  Result r = Launch({"--num_workers=3"}, Worker({"worker:1=exit:3", "*=sleep"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("launch: worker:1 (pid "));
  EXPECT_THAT(r.err, HasSubstr(") exited with status 3; stopping the other tasks"));
  for (const std::string task : {"worker:0", "worker:2"}) {
    EXPECT_THAT(r.err, HasSubstr("launch: stopped " + task + " (pid "));
  }
  EXPECT_THAT(r.err, HasSubstr("was killed by signal 15 (Terminated)"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("SIGKILL")));
}

TEST_F(LaunchTest, WorkerKilledBySignalIsNamedWithTheSignal) {
  Result r = Launch({"--num_workers=2"}, Worker({"worker:0=sigkill", "*=sleep"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("launch: worker:0 (pid "));
  EXPECT_THAT(r.err, HasSubstr(") was killed by signal 9 (Killed); stopping the other tasks"));
  EXPECT_THAT(r.err, HasSubstr("launch: stopped worker:1 (pid "));
}

TEST_F(LaunchTest, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Result r = Launch({"--num_workers=2", "--grace_period=500ms"},
                    Worker({"worker:0=exit_when_ready:worker:1:2", "worker:1=ignore_term"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(") exited with status 2; stopping the other tasks"));
  EXPECT_THAT(r.err, HasSubstr(") is still running 500ms after being asked to stop; sending SIGKILL"));
  EXPECT_THAT(r.err, HasSubstr("launch: stopped worker:1 (pid "));
  EXPECT_THAT(r.err, HasSubstr("): was killed by signal 9 (Killed)"));
}

TEST_F(LaunchTest, ForwardsSigtermToTheWorkers) {
  const pid_t launcher = Start({"--num_workers=2"}, Worker({"*=term_exit0"}));
  ASSERT_GT(WaitReady("worker:0"), 0);
  ASSERT_GT(WaitReady("worker:1"), 0);
  kill(launcher, SIGTERM);
  Result r = Wait(launcher);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_THAT(r.err, HasSubstr("received signal 15 (Terminated); forwarding it to the tasks"));
  // The workers saw the signal themselves and ended as they chose to.
  EXPECT_THAT(r.out, HasSubstr("[worker:0] got SIGTERM\n"));
  EXPECT_THAT(r.out, HasSubstr("[worker:1] got SIGTERM\n"));
  EXPECT_THAT(r.err, HasSubstr("exited with status 0"));
}

TEST_F(LaunchTest, SecondSignalKillsAtOnce) {
  const pid_t launcher =
      Start({"--num_workers=2", "--grace_period=1h"}, Worker({"*=ignore_term"}));
  ASSERT_GT(WaitReady("worker:0"), 0);
  ASSERT_GT(WaitReady("worker:1"), 0);
  kill(launcher, SIGTERM);
  ASSERT_TRUE(PollUntil([&] { return absl::StrContains(ReadFile(dir_ + "/stderr"), "forwarding"); }));
  kill(launcher, SIGTERM);
  Result r = Wait(launcher);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_THAT(r.err, HasSubstr("received Terminated again; sending SIGKILL to the tasks"));
  EXPECT_THAT(r.err, HasSubstr("launch: stopped worker:0 (pid "));
  EXPECT_THAT(r.err, HasSubstr("): was killed by signal 9 (Killed)"));
}

// Dead or a zombie nobody reaps (an orphan in a container without init).
bool Gone(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

TEST_F(LaunchTest, WorkersDieWithTheLauncher) {
  const pid_t launcher = Start({"--num_workers=2"}, Worker({"*=sleep"}));
  const pid_t w0 = WaitReady("worker:0");
  const pid_t w1 = WaitReady("worker:1");
  ASSERT_GT(w0, 0);
  ASSERT_GT(w1, 0);
  EXPECT_FALSE(Gone(w0));
  kill(launcher, SIGKILL);
  Result r = Wait(launcher);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_TRUE(PollUntil([&] { return Gone(w0) && Gone(w1); })) << "workers outlived the launcher";
}

TEST_F(LaunchTest, RandomStartOrderAndStartDelaysStartEveryTask) {
  Result r = Launch({"--num_workers=4", "--random_start_order=7"}, Worker({"*=ok"}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (int w = 0; w < 4; ++w) EXPECT_THAT(r.err, HasSubstr(absl::StrCat("started worker:", w)));
  r = Launch({"--num_workers=1", "--num_chiefs=1", "--start_delays=0.2,0"}, Worker({"*=ok"}));
  ASSERT_EQ(r.code, 0) << r.err;
  // The worker, due first, starts first.
  EXPECT_LT(r.err.find("started worker:0"), r.err.find("started chief:0")) << r.err;
}

TEST_F(LaunchTest, BadUsageIsAClearError) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string not_exec = dir_ + "/not_executable";
  std::ofstream(not_exec) << "#!/bin/sh\n";
  const std::string garbage = dir_ + "/garbage";
  std::ofstream(garbage) << "\x01\x02 not a program";
  chmod(garbage.c_str(), 0755);
  const std::vector<Case> cases = {
      {{"--num_workers=2", "true"}, "unexpected argument \"true\" before `--`"},
      {{"--num_workers=2"}, "missing `--` before the program"},
      {{"--num_workers=0", "--", "true"}, "--num_workers must be 1..1000, got 0"},
      {{"--num_workers=2", "--"}, "missing the program to run after `--`"},
      {{"--num_workers=2", "--num_chiefs=2", "--", "true"}, "--num_chiefs must be 0 or 1"},
      {{"--num_workers=2", "--num_ps=1", "--", "true"}, "add --num_chiefs=1"},
      {{"--num_workers=2", "--num_ps=-1", "--", "true"}, "--num_ps must be 0..1000"},
      {{"--num_workers=2", "--max_worker_restarts=1", "--", "true"},
       "--max_worker_restarts restarts a worker of a parameter-server cluster"},
      {{"--num_workers=2", "--host=localhost", "--", "true"}, "--host: \"localhost\" is not"},
      {{"--num_workers=2", "--start_delays=0,x", "--", "true"}, "--start_delays: \"x\""},
      {{"--num_workers=2", "--host=0.0.0.0", "--", "true"}, "is the unspecified address"},
      {{"--num_workers=2", "--host=::", "--", "true"}, "is the unspecified address"},
      {{"--num_workers=2", "--start_delays=0", "--", "true"}, "--start_delays has 1 entries for 2"},
      {{"--num_workers=2", "--random_start_order=-1", "--", "true"}, "--random_start_order"},
      {{"--num_workers=2", "--", "no_such_program_for_launch_test"},
       "program \"no_such_program_for_launch_test\" not found in PATH"},
      {{"--num_workers=2", "--", "/no/such/program"}, "program \"/no/such/program\" not found"},
      {{"--num_workers=2", "--", not_exec}, "is not executable"},
      {{"--num_workers=1", "--", garbage}, "cannot start worker:0: cannot execute " + garbage},
  };
  for (const Case& c : cases) {
    Result r = Launch(c.args, {});
    EXPECT_EQ(r.code, 1) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(r.err, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
    EXPECT_EQ(r.out, "") << absl::StrJoin(c.args, " ");
  }
}

TEST(LaunchLibTest, TfConfigJsonIsTensorFlowsFormat) {
  ClusterSpec::JobMap cluster = {{"chief", {{0, "127.0.0.1:1000"}}},
                                 {"worker", {{0, "127.0.0.1:1001"}, {1, "127.0.0.1:1002"}}}};
  const std::string json = TfConfigJson(cluster, {"worker", 1});
  EXPECT_EQ(json,
            R"({"cluster":{"chief":["127.0.0.1:1000"],"worker":["127.0.0.1:1001","127.0.0.1:1002"]},)"
            R"("task":{"type":"worker","index":1}})");
  absl::StatusOr<ClusterSpec> spec = ClusterSpecFromTfConfig(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->jobs(), cluster);
  EXPECT_EQ(spec->task_address(), "127.0.0.1:1002");
}

TEST(LaunchLibTest, PlanTasksChiefFirstAndSeededStartOrder) {
  LaunchOptions o;
  o.num_workers = 2;
  o.num_chiefs = 1;
  o.command = {"true"};
  std::vector<LaunchTask> tasks = PlanTasks(o, {1000, 1001, 1002});
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].name, "chief:0");
  EXPECT_EQ(tasks[2].name, "worker:1");
  EXPECT_EQ(tasks[2].tf_config,
            R"({"cluster":{"chief":["127.0.0.1:1000"],"worker":["127.0.0.1:1001","127.0.0.1:1002"]},)"
            R"("task":{"type":"worker","index":1}})");
  for (const LaunchTask& t : tasks) EXPECT_EQ(t.start_delay, 0);

  o.num_chiefs = 0;
  o.num_workers = 6;
  std::set<std::vector<double>> schedules;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    o.random_start_seed = seed;
    std::vector<double> delays, again;
    for (const LaunchTask& t : PlanTasks(o, {1, 2, 3, 4, 5, 6})) delays.push_back(t.start_delay);
    for (const LaunchTask& t : PlanTasks(o, {1, 2, 3, 4, 5, 6})) again.push_back(t.start_delay);
    EXPECT_EQ(delays, again) << "seed " << seed;
    std::vector<double> sorted = delays;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted[0], 0);
    for (size_t i = 1; i < sorted.size(); ++i) {
      EXPECT_LE(sorted[i] - sorted[i - 1], kMaxRandomStartGap);
    }
    schedules.insert(delays);
  }
  EXPECT_EQ(schedules.size(), 5u);

  o.random_start_seed.reset();
  o.start_delays = {0, 1, 2, 3, 4, 0.5};
  EXPECT_EQ(PlanTasks(o, {1, 2, 3, 4, 5, 6})[5].start_delay, 0.5);
  EXPECT_TRUE(ValidateLaunchOptions(o).ok());
  o.random_start_seed = 1;
  EXPECT_FALSE(ValidateLaunchOptions(o).ok());
}

TEST(LaunchLibTest, FormatAddressBracketsIpv6) {
  EXPECT_EQ(FormatAddress("::1", 80), "[::1]:80");
  EXPECT_EQ(FormatAddress("127.0.0.1", 80), "127.0.0.1:80");
}

TEST(LaunchLibTest, DescribeWaitStatusAndStartDelays) {
  EXPECT_EQ(DescribeWaitStatus(3 << 8), "exited with status 3");
  EXPECT_EQ(DescribeWaitStatus(SIGKILL), "was killed by signal 9 (Killed)");
  absl::StatusOr<std::vector<double>> d = ParseStartDelays("0, 0.5,2");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<double>{0, 0.5, 2}));
  EXPECT_TRUE(ParseStartDelays("")->empty());
  EXPECT_FALSE(ParseStartDelays("-1").ok());
  EXPECT_FALSE(ParseStartDelays("0,,1").ok());
  EXPECT_FALSE(ParseStartDelays("nan").ok());
}

TEST(LaunchLibTest, NodesOfAJobGetTorchrunStyleRanksAndEachRestartItsOwnPort) {
  LaunchOptions o;
  o.num_workers = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.command = {"/bin/true"};
  EXPECT_THAT(std::string(ValidateLaunchOptions(o).message()), HasSubstr("--rdzv_endpoint"));
  ASSERT_TRUE(ParseRendezvousEndpoint("10.0.0.1:29500", &o.rdzv_host, &o.rdzv_port).ok());
  EXPECT_EQ(o.rdzv_host, "10.0.0.1");
  EXPECT_EQ(o.rdzv_port, 29500);
  EXPECT_TRUE(ValidateLaunchOptions(o).ok());
  std::vector<LaunchTask> tasks = PlanNodeTasks(o, 0);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].name, "worker:2");
  EXPECT_EQ(tasks[1].name, "worker:3");
  EXPECT_THAT(tasks[1].env, ::testing::IsSupersetOf({"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500",
                                                      "RANK=3", "WORLD_SIZE=6", "LOCAL_RANK=1",
                                                      "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1"}));
  EXPECT_TRUE(tasks[0].tf_config.empty());
  EXPECT_THAT(PlanNodeTasks(o, 2)[0].env, ::testing::Contains("MASTER_PORT=29502"));

  LaunchOptions bad = o;
  bad.node_rank = 3;
  EXPECT_THAT(std::string(ValidateLaunchOptions(bad).message()), HasSubstr("--node_rank=3"));
  bad = o;
  bad.num_chiefs = 1;
  EXPECT_THAT(std::string(ValidateLaunchOptions(bad).message()), HasSubstr("--num_chiefs"));
  bad = o;
  bad.rdzv_port = 65535;
  bad.max_restarts = 1;
  EXPECT_THAT(std::string(ValidateLaunchOptions(bad).message()), HasSubstr("65535"));
  bad = o;
  bad.max_restarts = -1;
  EXPECT_FALSE(ValidateLaunchOptions(bad).ok());

  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseRendezvousEndpoint("[::1]:7", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 7);
  ASSERT_TRUE(ParseRendezvousEndpoint("node0.cluster:29400", &host, &port).ok());
  EXPECT_EQ(host, "node0.cluster");
  for (const char* text : {"", "host", "host:", ":29500", "host:0", "host:70000", "::1:5",
                           "[::1]5", "0.0.0.0:29500", "host:port"}) {
    EXPECT_FALSE(ParseRendezvousEndpoint(text, &host, &port).ok()) << text;
  }
}

}  // namespace
}  // namespace strata
