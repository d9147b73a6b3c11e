// Helpers for end-to-end tests that run tools/trainer as a real process:
// spawn it with flags (its stderr and stdout kept in files), wait for it,
// say how it ended, read its JSON-lines metrics, and compare two checkpoints
// tensor by tensor.
//
//   Exit e = RunTrainer({"--steps=40", "--metrics_out=" + dir + "/m.jsonl"}, "short");
//   ASSERT_EQ(e.code, 0) << Describe(e);  // "killed by signal 11 (...)", stderr, stdout
//   double acc = FinalMetric(dir + "/m.jsonl", "test_accuracy");
//
// The trainer and the digits data come from the test's runfiles (the test
// target lists //tools:trainer and //data/digits as data). Not thread-safe:
// each test uses its own directories.
#ifndef STRATA_TESTS_TRAINER_PROCESS_H_
#define STRATA_TESTS_TRAINER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata {
namespace testing {

// `path` under the test's runfiles ("tools/trainer").
std::string Runfile(const std::string& path);
// A fresh, empty directory `name` under the test's temporary directory.
std::string TempDir(const std::string& name);
std::string ReadFile(const std::string& path);

// n distinct ports on 127.0.0.1 that were free a moment ago. The sockets
// stay bound until all are picked: the kernel hands a closed port out again,
// and two tasks given one address fail at start-up.
std::vector<int> FreePorts(int n);
// The TF_CONFIG "cluster" JSON of n workers on such ports of 127.0.0.1.
std::string WorkerCluster(int n);

// Waits (up to a minute) until `dir` holds a checkpoint ckpt-<s>.index with
// s >= step: training got that far. Any such step, since the manager keeps
// only the newest few and a fast cluster may have deleted ckpt-<step>
// before a poll sees it.
bool WaitForCheckpoint(const std::string& dir, int64_t step);

struct Process {
  pid_t pid = -1;
  std::string stderr_path;
  std::string stdout_path;  // StdoutPathFor(stderr_path)
};

struct Exit {
  int code = -1;             // exit status, or -1 if killed
  int signal = 0;            // the signal that killed it
  bool core_dumped = false;  // ... and whether it dumped core
  std::string err;           // its stderr
  std::string out;           // its stdout
};

// Where Spawn sends the stdout of a process whose stderr goes to
// `stderr_path`: the same path with ".stdout" appended.
std::string StdoutPathFor(const std::string& stderr_path);

// Starts the trainer with `args` (plus --digits_path to the bundled data);
// stderr goes to `stderr_path`, stdout to StdoutPathFor(stderr_path). `env`
// ("NAME=value") is added to (or replaces entries of) this process's
// environment.
Process Spawn(const std::vector<std::string>& args, const std::string& stderr_path,
              const std::vector<std::string>& env = {});
// The same for any program (a path, e.g. Runfile("examples/regression")),
// with `args` only.
Process SpawnProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stderr_path, const std::vector<std::string>& env = {});
Exit Wait(const Process& p);
// How `e` ended, for a failed expectation: "exited with code 1" or "killed
// by signal 11 (Segmentation fault), core dumped", then its stderr and the
// last `stdout_tail` bytes of its stdout.
std::string Describe(const Exit& e, size_t stdout_tail = 4096);
// Spawn + Wait, stderr kept under a directory named after `name`.
Exit RunTrainer(const std::vector<std::string>& args, const std::string& name);

// The value of "key":<number> in the metrics file's final line; -1 if absent.
double FinalMetric(const std::string& metrics_path, const std::string& key);
// The largest "step" of the metrics file's per-step lines so far.
int64_t LastStep(const std::string& metrics_path);

// Every tensor of checkpoints `a` and `b` has the same dtype, shape and bytes,
// and their metadata (step, input position, ...) match. `compared`, if given, gets the count.
void ExpectSameTensors(const std::string& a, const std::string& b, int* compared = nullptr);
// Every float tensor of `a` is in `b` with the same shape and every element
// within `rel_tol` relative (to max(|x|, 1e-3)); other dtypes bitwise equal.
// Returns the largest relative difference seen.
double ExpectCloseTensors(const std::string& a, const std::string& b, double rel_tol);

}  // namespace testing
}  // namespace strata

#endif  // STRATA_TESTS_TRAINER_PROCESS_H_
