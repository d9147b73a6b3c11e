#include "tests/netns.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace strata {
namespace testing {

using Clock = std::chrono::steady_clock;

// Runs `command` through the shell; returns its exit status, its stderr in
// `*err`.
int Shell(const std::string& command, std::string* err) {
  const std::string err_path = TempDir("netns_shell") + "/stderr.txt";
  const int rc = std::system(absl::StrCat(command, " 2>'", err_path, "' >/dev/null").c_str());
  *err = ReadFile(err_path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

namespace {

// Why namespaces cannot be made by this process ("" if they can).
std::string NeedRoot() {
  if (geteuid() == 0) return "";
  return "network namespaces need root (this test runs as uid " + std::to_string(geteuid()) + ")";
}

// Runs the set-up commands in order; the namespaces made ("ip netns add
// NAME") are appended to `created`. "" on success, else what failed.
std::string RunSetup(const std::vector<std::string>& commands, std::vector<std::string>* created) {
  for (const std::string& c : commands) {
    std::string err;
    const int rc = Shell(c, &err);
    if (rc != 0) {
      return absl::StrCat("network namespaces are not available here: `", c, "` exited with ", rc,
                          ": ", err);
    }
    if (absl::StartsWith(c, "ip netns add ")) created->push_back(c.substr(13));
  }
  return "";
}

// Deletes the namespaces (and with them the veths made inside them).
void RemoveNamespaces(const std::vector<std::string>& names) {
  std::string err;
  for (const std::string& ns : names) {
    if (Shell("ip netns del " + ns, &err) != 0) {
      ADD_FAILURE() << "cannot remove network namespace " << ns << ": " << err;
    }
  }
}

}  // namespace

NetnsPair::NetnsPair() {
  // The process id alone is not unique: Bazel's sandbox gives each test
  // its own pid namespace, where every test is pid 12 or so.
  std::mt19937 rng(std::random_device{}());
  const std::string id = absl::StrCat(absl::Hex(rng() & 0xffffff, absl::kZeroPad6));
  for (int i = 0; i < 2; ++i) names_[i] = absl::StrCat("strata-", getpid(), "-", id, "-", i);
  const std::string net = absl::StrCat("10.", 200 + rng() % 51, ".", rng() % 256, ".");
  for (int i = 0; i < 2; ++i) hosts_[i] = absl::StrCat(net, i + 1);
  // veth names are limited to 15 characters.
  for (int i = 0; i < 2; ++i) veth_[i] = absl::StrCat("stv", id, i == 0 ? "a" : "b");
  unavailable_ = NeedRoot();
  if (!unavailable_.empty()) return;
  std::vector<std::string> commands;
  for (int i = 0; i < 2; ++i) commands.push_back("ip netns add " + names_[i]);
  commands.push_back(absl::StrCat("ip link add ", veth_[0], " netns ", names_[0],
                                  " type veth peer name ", veth_[1], " netns ", names_[1]));
  for (int i = 0; i < 2; ++i) {
    commands.push_back(
        absl::StrCat("ip -n ", names_[i], " addr add ", hosts_[i], "/24 dev ", veth_[i]));
    commands.push_back(absl::StrCat("ip -n ", names_[i], " link set lo up"));
    commands.push_back(absl::StrCat("ip -n ", names_[i], " link set ", veth_[i], " up"));
  }
  unavailable_ = RunSetup(commands, &created_);
}

NetnsPair::~NetnsPair() { RemoveNamespaces(created_); }

NetnsHosts::NetnsHosts(int n) {
  std::mt19937 rng(std::random_device{}());
  const std::string id = absl::StrCat(absl::Hex(rng() & 0xffffff, absl::kZeroPad6));
  const std::string net = absl::StrCat("10.", 200 + rng() % 51, ".", rng() % 256, ".");
  switch_ = absl::StrCat("strata-", getpid(), "-", id, "-sw");
  for (int i = 0; i < n; ++i) {
    names_.push_back(absl::StrCat("strata-", getpid(), "-", id, "-", i));
    hosts_.push_back(absl::StrCat(net, i + 1));
    veth_.push_back(absl::StrCat("stv", id, "h", i));  // 15 characters at most
  }
  if (n < 2 || n > 16) {
    unavailable_ = absl::StrCat("NetnsHosts: ", n, " hosts is not in 2..16");
    return;
  }
  unavailable_ = NeedRoot();
  if (!unavailable_.empty()) return;
  std::vector<std::string> commands = {"ip netns add " + switch_,
                                       absl::StrCat("ip -n ", switch_, " link add br0 type bridge"),
                                       absl::StrCat("ip -n ", switch_, " link set br0 up")};
  for (int i = 0; i < n; ++i) {
    const std::string port = absl::StrCat("stv", id, "s", i);
    commands.push_back("ip netns add " + names_[i]);
    commands.push_back(absl::StrCat("ip link add ", veth_[i], " netns ", names_[i],
                                    " type veth peer name ", port, " netns ", switch_));
    commands.push_back(absl::StrCat("ip -n ", switch_, " link set ", port, " master br0"));
    commands.push_back(absl::StrCat("ip -n ", switch_, " link set ", port, " up"));
    commands.push_back(
        absl::StrCat("ip -n ", names_[i], " addr add ", hosts_[i], "/24 dev ", veth_[i]));
    commands.push_back(absl::StrCat("ip -n ", names_[i], " link set lo up"));
    commands.push_back(absl::StrCat("ip -n ", names_[i], " link set ", veth_[i], " up"));
  }
  unavailable_ = RunSetup(commands, &created_);
}

NetnsHosts::~NetnsHosts() { RemoveNamespaces(created_); }

std::string Absolute(const std::string& path) {
  if (absl::StartsWith(path, "/")) return path;
  char cwd[4096];
  return absl::StrCat(getcwd(cwd, sizeof(cwd)), "/", path);
}

Process SpawnInNamespace(const std::string& ns, const std::string& program,
                         const std::vector<std::string>& args, const std::string& stderr_path,
                         const std::vector<std::string>& env) {
  std::vector<std::string> argv_s = {"ip", "netns", "exec", ns, program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& v : env) {
      replaced = replaced || absl::StartsWith(*e, v.substr(0, v.find('=') + 1));
    }
    if (!replaced) env_s.push_back(*e);
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  if (!HasJobToken(env)) env_s.push_back(JobTokenEnv());
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  Process p;
  p.stderr_path = stderr_path;
  p.stdout_path = StdoutPathFor(stderr_path);
  posix_spawn_file_actions_addopen(&fa, 1, p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int rc = posix_spawnp(&p.pid, "ip", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "cannot start ip netns exec";
  if (rc != 0) p.pid = -1;
  return p;
}

// Waits for `p` up to `seconds`; past that kills it (SIGKILL) and fails the
// test: a hang detector with room for a loaded machine, not a timing.
Exit WaitWithin(const Process& p, double seconds, const std::string& who) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    siginfo_t info{};
    if (waitid(P_PID, p.pid, &info, WNOWAIT | WNOHANG | WEXITED) == 0 && info.si_pid == p.pid) {
      return Wait(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(p.pid, SIGKILL);
  Exit e = Wait(p);
  ADD_FAILURE() << who << " still ran " << seconds << " s later (killed it now); it "
                << Describe(e);
  return e;
}

}  // namespace testing
}  // namespace strata
