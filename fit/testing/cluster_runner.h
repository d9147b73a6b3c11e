// Integration tests of a user's own trainer on a simulated cluster, as
// TensorFlow's MultiProcessRunner: real worker processes of the user's
// binary on loopback, each with its TF_CONFIG, their output kept, faults
// injected (kill, freeze, terminate a worker when the run reaches a point),
// and each worker's ending reported. Bazel target //fit/testing:cluster_runner
// (testonly), for a cc_test whose data includes the binary.
//
//   ClusterOptions o;
//   o.program = Runfile("my_project/my_trainer");
//   o.num_workers = 2;
//   o.args = {"--strategy=multi_worker_mirrored", "--steps=500", "--checkpoint_dir=" + dir};
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ClusterRunner> c, ClusterRunner::Start(o));
//   c->WaitUntil(CheckpointReached(dir, 200), absl::Seconds(60));   // a point of the run
//   c->Signal(1, SIGKILL);                                           // worker 1 dies there
//   std::vector<WorkerExit> ends = c->Join(absl::Seconds(60));
//   ends[0].code, ends[1].signal, Describe(ends[0])                  // how each ended
//
// Each worker's stdout and stderr go to files under ClusterOptions::log_dir
// (a fresh temporary directory by default). A worker may start late
// (start_delays). Join kills the workers still running at its deadline
// (they are reported killed by SIGKILL, `timed_out` set), so a hanging
// cluster fails the test instead of hanging it.
//
// Thread-safety: one thread. Ownership: the runner owns its processes; its
// destructor kills any still running.
#ifndef STRATA_FIT_TESTING_CLUSTER_RUNNER_H_
#define STRATA_FIT_TESTING_CLUSTER_RUNNER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace strata {
namespace testing {

// `path` under the test's runfiles ("my_project/my_trainer"), from
// TEST_SRCDIR and the workspace name "strata" (the repository's own name).
std::string Runfile(const std::string& path);
// A fresh, empty directory `name` under the test's temporary directory.
std::string TempDir(const std::string& name);
std::string ReadFile(const std::string& path);
// n distinct ports of 127.0.0.1 that were free a moment ago.
std::vector<int> FreePorts(int n);
// A port p of 127.0.0.1 with p and p + 1 free a moment ago (a launcher's
// rendezvous and its restart's); 0 if none was found.
int FreePortPair();
// The TF_CONFIG "cluster" JSON of n workers on such ports.
std::string WorkerCluster(int n);

// A started process; `pid` is -1 and `error` says why if it could not start.
struct Process {
  pid_t pid = -1;
  std::string stderr_path;
  std::string stdout_path;
  std::string error;
};

struct WorkerExit {
  int code = -1;             // exit status, or -1 if killed
  int signal = 0;            // the signal that killed it
  bool core_dumped = false;
  bool timed_out = false;    // killed by Join at its deadline
  std::string err;           // its stderr
  std::string out;           // its stdout
};

// Starts `program` with `args`; stderr to `stderr_path`, stdout to the same
// path with ".stdout" appended. `env` ("NAME=value") adds to or replaces
// entries of this process's environment.
Process SpawnProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stderr_path, const std::vector<std::string>& env = {});
// Waits for `p` to end (forever).
WorkerExit Wait(const Process& p);
// "exited with code 1" / "killed by signal 9 (Killed)", then its stderr and
// the last `stdout_tail` bytes of its stdout: for a failed expectation.
std::string Describe(const WorkerExit& e, size_t stdout_tail = 4096);

// True once `dir` holds a checkpoint ckpt-<s>.index with s >= step (the
// checkpoint manager keeps only the newest, so any such s counts).
std::function<bool()> CheckpointReached(const std::string& dir, int64_t step);
// True once `path` (a worker's output file, say) contains `text`.
std::function<bool()> FileContains(const std::string& path, const std::string& text);

struct ClusterOptions {
  std::string program;             // the worker binary
  int num_workers = 2;
  std::vector<std::string> args;   // every worker's arguments
  // Extra arguments per worker index.
  std::map<int, std::vector<std::string>> worker_args;
  // Worker index -> how long after the others it starts.
  std::map<int, absl::Duration> start_delays;
  // Added to every worker's environment. Without a job token here or in
  // this process's environment, Start makes one for the cluster.
  std::vector<std::string> env;
  std::string log_dir;             // "": a fresh temporary directory
};

// Whether `env` ("NAME=value" entries) or this process's environment gives
// a job token (STRATA_JOB_TOKEN or STRATA_JOB_TOKEN_FILE).
bool HasJobToken(const std::vector<std::string>& env);

class ClusterRunner {
 public:
  // Picks free ports, writes each worker's TF_CONFIG and starts the workers
  // (a delayed one once its delay has passed: Start returns when every
  // worker has started). InvalidArgument for bad
  // options; Internal naming the worker that could not be started.
  static absl::StatusOr<std::unique_ptr<ClusterRunner>> Start(const ClusterOptions& options);
  ~ClusterRunner();
  ClusterRunner(const ClusterRunner&) = delete;
  ClusterRunner& operator=(const ClusterRunner&) = delete;

  // Polls `condition` every 10 ms; DeadlineExceeded after `timeout`.
  absl::Status WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);
  // Sends `signal` to worker `index` (SIGKILL: a crash; SIGSTOP: a frozen
  // worker; SIGCONT: thawed; SIGTERM: a preemption notice).
  absl::Status Signal(int index, int signal);
  // Waits for every worker, up to `timeout` in all; returns their endings
  // in worker order.
  std::vector<WorkerExit> Join(absl::Duration timeout);

  const std::string& cluster() const { return cluster_; }  // TF_CONFIG's "cluster"
  const std::string& log_dir() const { return log_dir_; }
  std::string StdoutPath(int index) const;
  std::string StderrPath(int index) const;
  // Worker `index`'s process id (-1 if it could not start).
  int pid(int index) const { return workers_.at(static_cast<size_t>(index)).pid; }

 private:
  ClusterRunner() = default;
  std::string cluster_;
  std::string log_dir_;
  std::vector<Process> workers_;
  std::vector<bool> done_;
};

}  // namespace testing
}  // namespace strata

#endif  // STRATA_FIT_TESTING_CLUSTER_RUNNER_H_
