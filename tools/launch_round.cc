// The local launcher's rounds (tools/launch_round.h): each task a child
// process in its own process group, its output relayed line by line with
// the task's name, signals through a self-pipe into one poll loop.
#include "tools/launch_round.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace strata {
namespace launch_internal {
namespace {

// A line longer than this is relayed in pieces, so one child cannot make the
// launcher buffer without bound.
constexpr size_t kMaxLine = 64 * 1024;

// Writes all of `data`; a launcher whose stdout went away keeps draining its
// children (they would block on a full pipe otherwise), so errors are dropped.
void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string ErrnoText(int err) { return std::strerror(err); }

void Say(absl::string_view message) { WriteAll(2, absl::StrCat("launch: ", message, "\n")); }

namespace {

// ---------------------------------------------------------------------------
// Signals reach the poll loop through a self-pipe: the handler only writes
// the signal number, everything else happens outside it.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (write(g_signal_pipe[1], &b, 1) < 0) {
    // The pipe is full: the loop is already awake and reaps every child.
  }
  errno = saved;
}

}  // namespace

SignalScope::SignalScope() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    error_ = ErrnoText(errno);
    return;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int i = 0; i < 3; ++i) sigaction(kHandled[i], &sa, &old_[i]);
  struct sigaction ign = {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old_pipe_);
}

SignalScope::~SignalScope() {
  if (!error_.empty()) return;
  for (int i = 0; i < 3; ++i) sigaction(kHandled[i], &old_[i], nullptr);
  sigaction(SIGPIPE, &old_pipe_, nullptr);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

namespace {

// ---------------------------------------------------------------------------
// One of a child's output streams, relayed line by line with its prefix.
struct Stream {
  int fd = -1;          // read end, non-blocking; -1 once closed
  int dest = 1;         // the launcher's stdout or stderr
  std::string prefix;   // "[worker:1] "
  std::string pending;  // bytes after the last newline
};

void Relay(Stream& s, bool eof) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    absl::StrAppend(&out, s.prefix, absl::string_view(s.pending).substr(start, nl + 1 - start));
  }
  s.pending.erase(0, start);
  if (s.pending.size() >= kMaxLine || (eof && !s.pending.empty())) {
    absl::StrAppend(&out, s.prefix, s.pending, "\n");
    s.pending.clear();
  }
  // One write per batch of whole lines: nothing else writes to `dest` in
  // between, so tasks never interleave mid-line.
  WriteAll(s.dest, out);
}

// Reads what is available now; at EOF (or error) flushes the partial line and
// closes the stream.
void ReadStream(Stream& s) {
  char buf[16384];
  while (s.fd >= 0) {
    const ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      Relay(s, false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Relay(s, true);
    close(s.fd);
    s.fd = -1;
  }
}

struct Child {
  const LaunchTask* task = nullptr;
  pid_t pid = -1;
  bool exited = false;
  int wait_status = 0;
  Stream out, err;

  bool running() const { return pid > 0 && !exited; }
  std::string Name() const { return absl::StrCat(task->name, " (pid ", pid, ")"); }
};

// Sends `sig` to the child's process group (its own children too), or to the
// child alone if it has left its group.
void SignalChild(const Child& c, int sig) {
  if (kill(-c.pid, sig) != 0 && errno == ESRCH) kill(c.pid, sig);
}

// A pipe whose read end is non-blocking and neither end survives exec; dup2
// onto the child's stdout/stderr clears close-on-exec for that copy only.
bool MakePipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return true;
}

// Forks and execs one task. Everything the child needs is prepared before
// fork, so the child only makes async-signal-safe calls. An exec failure comes
// back through a close-on-exec pipe, so "cannot execute" is reported as such
// rather than as exit status 127.
// The variables a launcher sets for its tasks: inherited values of them
// are dropped, so that a task sees only this launcher's cluster.
constexpr const char* kLauncherVariables[] = {
    "TF_CONFIG=", "STRATA_TASK=", "STRATA_RESTART_COUNT=", "MASTER_ADDR=", "MASTER_PORT=",
    "RANK=",      "WORLD_SIZE=",  "LOCAL_RANK=",          "LOCAL_WORLD_SIZE=", "GROUP_RANK="};

absl::Status StartChild(Child& c, const std::string& path, const std::vector<std::string>& command,
                        int round) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view v(*e);
    if (std::any_of(std::begin(kLauncherVariables), std::end(kLauncherVariables),
                    [&](const char* name) { return absl::StartsWith(v, name); })) {
      continue;
    }
    env_s.emplace_back(v);
  }
  if (!c.task->tf_config.empty()) env_s.push_back("TF_CONFIG=" + c.task->tf_config);
  for (const std::string& e : c.task->env) env_s.push_back(e);
  env_s.push_back("STRATA_TASK=" + c.task->name);
  env_s.push_back(absl::StrCat("STRATA_RESTART_COUNT=", round));
  std::vector<char*> envp, argv;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s = command;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out[2], err[2], exec_err[2];
  if (!MakePipe(out)) return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  if (!MakePipe(err) || pipe2(exec_err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(e)));
  }
  // Signals stay blocked across fork until the child has reset the
  // launcher's handlers, which would otherwise report the child's signals to
  // the launcher through the inherited self-pipe.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Ignored signals also stay ignored across exec: the launcher ignores
    // SIGPIPE.
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the launcher died before prctl
    // Tasks run in their own process groups, where reading the terminal
    // would stop them; they get no input.
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(path.c_str(), argv.data(), envp.data());
    const int e = errno;
    if (write(exec_err[1], &e, sizeof(e)) < 0) _exit(127);
    _exit(127);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    close(exec_err[0]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", ErrnoText(fork_errno)));
  }
  setpgid(pid, pid);  // also here, so signalling the group works at once
  c.pid = pid;
  c.out.fd = out[0];
  c.err.fd = err[0];
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_err[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_err[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    waitpid(pid, &c.wait_status, 0);
    c.exited = true;
    ReadStream(c.out);
    ReadStream(c.err);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", path, ": ", ErrnoText(child_errno)));
  }
  return absl::OkStatus();
}


// One round: the tasks started on their delays, their output relayed,
// every task stopped once one fails or the launcher is signalled.
class Round {
 public:
  Round(const LaunchOptions& options, const std::string& path, const std::vector<LaunchTask>& tasks,
        int round)
      : options_(options), path_(path), tasks_(tasks), round_(round), children_(tasks.size()),
        order_(tasks.size()), t0_(absl::Now()) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      children_[i].task = &tasks[i];
      children_[i].out.prefix = children_[i].err.prefix = absl::StrCat("[", tasks[i].name, "] ");
      children_[i].err.dest = 2;
      order_[i] = i;
    }
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      return tasks[a].start_delay < tasks[b].start_delay;
    });
  }

  RoundEnd Run() {
    for (;;) {
      StartDue();
      Reap();
      KillOverdue();
      const bool all_started = stopping_ || next_start_ == order_.size();
      if (all_started && std::none_of(children_.begin(), children_.end(),
                                      [](const Child& c) { return c.running(); })) {
        break;
      }
      Wait(all_started);
    }
    // SIGINT/SIGTERM to the launcher ends the run, whatever failed after.
    // A parameter-server cluster's outcome is its chief's.
    if (options_.num_ps > 0 && !interrupted_ && exit_code_ == 0) exit_code_ = chief_exit_;
    return RoundEnd{exit_code_, task_failed_ && !interrupted_};
  }

 private:
  // Asks every running child to stop (with `sig`), SIGKILL after the grace.
  void StopAll(int sig) {
    stopping_ = true;
    for (const Child& c : children_) {
      if (c.running()) SignalChild(c, sig);
    }
    kill_at_ = absl::Now() + options_.grace_period;
  }

  absl::Time StartTime(size_t next) const {
    return t0_ + absl::Seconds(tasks_[order_[next]].start_delay);
  }

  // 1. Starts the tasks that are due.
  void StartDue() {
    const absl::Time now = absl::Now();
    while (!stopping_ && next_start_ < order_.size() && now >= StartTime(next_start_)) {
      Child& c = children_[order_[next_start_++]];
      absl::Status s = StartChild(c, path_, options_.command, round_);
      if (!s.ok()) {
        Say(absl::StrCat("cannot start ", c.task->name, ": ", s.message()));
        exit_code_ = 1;
        StopAll(SIGTERM);
        break;
      }
      Say(absl::StrCat("started ", c.Name(),
                       c.task->address.empty() ? "" : absl::StrCat(" at ", c.task->address)));
    }
  }

  // 2. Reaps. A reaped child's output is all in its pipes already; what its
  // own children may still write is not waited for.
  void Reap() {
    for (Child& c : children_) {
      if (!c.running() || waitpid(c.pid, &c.wait_status, WNOHANG) != c.pid) continue;
      c.exited = true;
      ReadStream(c.out);
      ReadStream(c.err);
      for (Stream* s : {&c.out, &c.err}) {
        Relay(*s, true);
        if (s->fd >= 0) close(s->fd);
        s->fd = -1;
      }
      const bool ok = WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 0;
      const bool ps_cluster = options_.num_ps > 0;
      if (ps_cluster && c.task->id.type == kChiefJob) chief_exit_ = ok ? 0 : 1;
      if (stopping_) {
        Say(absl::StrCat("stopped ", c.Name(), ": ", DescribeWaitStatus(c.wait_status)));
      } else if (!ok && ps_cluster && c.task->id.type != kChiefJob) {
        // The chief decides: a worker's steps run elsewhere; a lost ps
        // task fails the chief's steps, and the chief ends the job.
        Say(absl::StrCat(c.Name(), " ", DescribeWaitStatus(c.wait_status),
                         "; the parameter-server cluster goes on without it"));
        RestartWorker(c);
      } else if (!ok) {
        Say(absl::StrCat(c.Name(), " ", DescribeWaitStatus(c.wait_status),
                         "; stopping the other tasks"));
        exit_code_ = 1;
        task_failed_ = true;
        StopAll(SIGTERM);
      }
    }
  }

  // A failed worker of a parameter-server cluster starts again, alone, while
  // it has restarts left (--max_worker_restarts).
  void RestartWorker(Child& c) {
    if (c.task->id.type != kWorkerJob) return;
    int& used = worker_restarts_[c.task->id.index];
    if (used >= options_.max_worker_restarts) return;
    ++used;
    c.exited = false;
    c.wait_status = 0;
    absl::Status s = StartChild(c, path_, options_.command, round_);
    if (!s.ok()) {
      Say(absl::StrCat("cannot restart ", c.task->name, ": ", s.message()));
      return;
    }
    Say(absl::StrCat("restarted ", c.Name(), " (worker restart ", used, " of ",
                     options_.max_worker_restarts, ")"));
  }

  // 3. Past the grace period, SIGKILLs what is left.
  void KillOverdue() {
    if (killed_ || absl::Now() < kill_at_) return;
    killed_ = true;
    for (const Child& c : children_) {
      if (!c.running()) continue;
      Say(absl::StrCat(c.Name(), " is still running ", absl::FormatDuration(options_.grace_period),
                       " after being asked to stop; sending SIGKILL"));
      SignalChild(c, SIGKILL);
    }
  }

  // 4. Waits for output, a signal, the next start or the kill deadline.
  void Wait(bool all_started) {
    const absl::Time now = absl::Now();
    absl::Time wake = killed_ ? absl::InfiniteFuture() : kill_at_;
    if (!all_started) wake = std::min(wake, StartTime(next_start_));
    int timeout_ms = -1;
    if (wake != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          std::min<int64_t>(absl::ToInt64Milliseconds(wake - now) + 1, 1 << 30));
      timeout_ms = std::max(timeout_ms, 0);
    }
    std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Child& c : children_) {
      for (Stream* s : {&c.out, &c.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) return;
      Say(absl::StrCat("poll: ", ErrnoText(errno)));
      exit_code_ = 1;
      StopAll(SIGKILL);
      return;
    }
    if (fds[0].revents != 0) OnSignals();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ReadStream(*streams[i - 1]);
    }
  }

  // SIGINT or SIGTERM to the launcher: forwarded to the tasks; a second
  // one kills them.
  void OnSignals() {
    unsigned char sigs[64];
    const ssize_t n = read(g_signal_pipe[0], sigs, sizeof(sigs));
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = sigs[i];
      if (sig != SIGINT && sig != SIGTERM) continue;  // SIGCHLD: reaped above
      if (interrupted_) {
        Say(absl::StrCat("received ", strsignal(sig), " again; sending SIGKILL to the tasks"));
        killed_ = true;
        for (const Child& c : children_) {
          if (c.running()) SignalChild(c, SIGKILL);
        }
        continue;
      }
      interrupted_ = true;
      Say(absl::StrCat("received signal ", sig, " (", strsignal(sig),
                       "); forwarding it to the tasks"));
      if (exit_code_ == 0) exit_code_ = 128 + sig;
      StopAll(sig);
    }
  }

  const LaunchOptions& options_;
  const std::string& path_;
  const std::vector<LaunchTask>& tasks_;
  const int round_;
  std::vector<Child> children_;
  std::vector<size_t> order_;
  const absl::Time t0_;
  size_t next_start_ = 0;
  int exit_code_ = 0;
  int chief_exit_ = 0;
  std::map<int, int> worker_restarts_;  // by worker index
  bool stopping_ = false;  // no more starts; the others are being stopped
  bool task_failed_ = false;
  bool interrupted_ = false;
  bool killed_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();
};

RoundEnd RunRound(const LaunchOptions& options, const std::string& path_text,
                  const std::vector<LaunchTask>& tasks, int round) {
  return Round(options, path_text, tasks, round).Run();
}

}  // namespace

RoundEnd RunRound(const LaunchOptions& options, const std::string& path,
                  const std::vector<LaunchTask>& tasks, int round) {
  return Round(options, path, tasks, round).Run();
}

}  // namespace launch_internal
}  // namespace strata
