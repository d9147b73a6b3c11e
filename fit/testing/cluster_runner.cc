#include "fit/testing/cluster_runner.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/ip_address.h"
#include "runtime/security/job_token.h"

extern char** environ;

namespace strata {
namespace testing {

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(dir == nullptr ? "." : dir, "/strata/", path);
}

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(t == nullptr ? "/tmp" : t, "/", name);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir, ignored);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int> FreePorts(int n) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts("127.0.0.1", n);
  return ports.ok() ? *std::move(ports) : std::vector<int>();
}

int FreePortPair() {
  for (int tries = 0; tries < 50; ++tries) {
    const std::vector<int> one = FreePorts(1);
    if (one.empty() || one[0] >= 65535) continue;
    // Is the port above free too? Bind it to see.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(one[0] + 1));
    const bool free = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    if (free) return one[0];
  }
  return 0;
}

std::string WorkerCluster(int n) {
  std::vector<std::string> addrs;
  for (int port : FreePorts(n)) addrs.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  return absl::StrCat("{\"worker\":[", absl::StrJoin(addrs, ","), "]}");
}

Process SpawnProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stderr_path, const std::vector<std::string>& env) {
  std::vector<std::string> argv_s = {program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  Process p;
  p.stderr_path = stderr_path;
  p.stdout_path = stderr_path + ".stdout";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const std::string& x : env) {
      if (entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1)) replaced = true;
    }
    if (!replaced) env_s.push_back(entry);
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&p.pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    p.pid = -1;
    p.error = absl::StrCat("cannot start ", program, ": ", std::strerror(rc));
  }
  return p;
}

namespace {

WorkerExit FromStatus(const Process& p, int status) {
  WorkerExit e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
    e.core_dumped = WCOREDUMP(status);
  }
  e.err = ReadFile(p.stderr_path);
  if (!p.stdout_path.empty()) e.out = ReadFile(p.stdout_path);
  return e;
}

}  // namespace

WorkerExit Wait(const Process& p) {
  WorkerExit e;
  if (p.pid < 0) {
    e.err = p.error;
    return e;
  }
  int status = 0;
  if (waitpid(p.pid, &status, 0) != p.pid) return e;
  return FromStatus(p, status);
}

std::string Describe(const WorkerExit& e, size_t stdout_tail) {
  std::string out;
  if (e.signal != 0) {
    const char* name = strsignal(e.signal);
    out = absl::StrCat("killed by signal ", e.signal, " (", name == nullptr ? "?" : name, ")",
                       e.core_dumped ? ", core dumped" : "", e.timed_out ? ", at the deadline" : "");
  } else {
    out = absl::StrCat("exited with code ", e.code);
  }
  absl::StrAppend(&out, "\n--- stderr (", e.err.size(), " bytes) ---\n", e.err);
  if (!e.err.empty() && e.err.back() != '\n') out += '\n';
  const size_t from = e.out.size() > stdout_tail ? e.out.size() - stdout_tail : 0;
  absl::StrAppend(&out, "--- stdout (", e.out.size(), " bytes", from > 0 ? ", the tail" : "", ") ---\n",
                  absl::string_view(e.out).substr(from));
  return out;
}

std::function<bool()> CheckpointReached(const std::string& dir, int64_t step) {
  return [dir, step] {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return false;
    bool found = false;
    while (dirent* e = readdir(d)) {
      absl::string_view name = e->d_name;
      int64_t s = 0;
      if (absl::ConsumePrefix(&name, "ckpt-") && absl::ConsumeSuffix(&name, ".index") &&
          absl::SimpleAtoi(name, &s) && s >= step) {
        found = true;
      }
    }
    closedir(d);
    return found;
  };
}

std::function<bool()> FileContains(const std::string& path, const std::string& text) {
  return [path, text] { return absl::StrContains(ReadFile(path), text); };
}

bool HasJobToken(const std::vector<std::string>& env) {
  for (const char* name : {kJobTokenEnv, kJobTokenFileEnv}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
    for (const std::string& e : env) {
      if (absl::StartsWith(e, absl::StrCat(name, "="))) return true;
    }
  }
  return false;
}

absl::StatusOr<std::unique_ptr<ClusterRunner>> ClusterRunner::Start(const ClusterOptions& o) {
  if (o.program.empty()) return absl::InvalidArgumentError("ClusterRunner: no program");
  if (o.num_workers < 1) return absl::InvalidArgumentError("ClusterRunner: num_workers must be >= 1");
  std::unique_ptr<ClusterRunner> c(new ClusterRunner());
  c->log_dir_ = o.log_dir.empty() ? TempDir(absl::StrCat("cluster_", getpid(), "_", absl::ToUnixMicros(absl::Now())))
                                  : o.log_dir;
  c->cluster_ = WorkerCluster(o.num_workers);
  c->workers_.resize(static_cast<size_t>(o.num_workers));
  c->done_.assign(static_cast<size_t>(o.num_workers), false);
  // In order of start delay (undelayed first).
  std::vector<std::pair<absl::Duration, int>> order;
  for (int i = 0; i < o.num_workers; ++i) {
    auto it = o.start_delays.find(i);
    order.push_back({it == o.start_delays.end() ? absl::ZeroDuration() : it->second, i});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // One job token for the cluster, as tools/launch makes, unless the caller
  // or this process's environment supplies one.
  std::vector<std::string> common_env = o.env;
  if (!HasJobToken(o.env)) {
    common_env.push_back(absl::StrCat(kJobTokenEnv, "=", JobToken::Generate().secret()));
  }
  const absl::Time t0 = absl::Now();
  for (const auto& [delay, i] : order) {
    const absl::Duration wait = t0 + delay - absl::Now();
    if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    std::vector<std::string> env = common_env;
    env.push_back(absl::StrCat("TF_CONFIG={\"cluster\":", c->cluster_, ",\"task\":{\"type\":\"worker\",\"index\":", i,
                               "}}"));
    std::vector<std::string> args = o.args;
    if (auto it = o.worker_args.find(i); it != o.worker_args.end()) {
      args.insert(args.end(), it->second.begin(), it->second.end());
    }
    c->workers_[i] = SpawnProgram(o.program, args, c->StderrPath(i), env);
    if (c->workers_[i].pid < 0) {
      return absl::InternalError(absl::StrCat("ClusterRunner: worker ", i, ": ", c->workers_[i].error));
    }
  }
  return c;
}

ClusterRunner::~ClusterRunner() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (done_[i] || workers_[i].pid < 0) continue;
    kill(workers_[i].pid, SIGKILL);
    int status = 0;
    waitpid(workers_[i].pid, &status, 0);
  }
}

std::string ClusterRunner::StderrPath(int index) const { return absl::StrCat(log_dir_, "/worker", index, ".stderr"); }
std::string ClusterRunner::StdoutPath(int index) const { return StderrPath(index) + ".stdout"; }

absl::Status ClusterRunner::WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("ClusterRunner: the condition did not hold within ",
                                                      absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::OkStatus();
}

absl::Status ClusterRunner::Signal(int index, int signal) {
  if (index < 0 || index >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("ClusterRunner: no worker ", index));
  }
  if (done_[index]) return absl::FailedPreconditionError(absl::StrCat("ClusterRunner: worker ", index, " has ended"));
  if (kill(workers_[index].pid, signal) != 0) {
    return absl::InternalError(absl::StrCat("ClusterRunner: kill(worker ", index, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::vector<WorkerExit> ClusterRunner::Join(absl::Duration timeout) {
  std::vector<WorkerExit> out(workers_.size());
  const absl::Time deadline = absl::Now() + timeout;
  size_t left = 0;
  for (size_t i = 0; i < workers_.size(); ++i) left += done_[i] ? 0 : 1;
  while (left > 0) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (done_[i]) continue;
      int status = 0;
      const pid_t r = waitpid(workers_[i].pid, &status, WNOHANG);
      if (r == workers_[i].pid) {
        out[i] = FromStatus(workers_[i], status);
        done_[i] = true;
        --left;
      }
    }
    if (left == 0) break;
    if (absl::Now() >= deadline) {
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (done_[i]) continue;
        kill(workers_[i].pid, SIGKILL);
        int status = 0;
        waitpid(workers_[i].pid, &status, 0);
        out[i] = FromStatus(workers_[i], status);
        out[i].timed_out = true;
        done_[i] = true;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return out;
}

}  // namespace testing
}  // namespace strata
