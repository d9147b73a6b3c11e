// Helpers for end-to-end tests that run tools/trainer as a real process:
// spawn it with flags (its stderr and stdout kept in files), read its
// JSON-lines metrics, and compare two checkpoints tensor by tensor. Spawning
// any program, waiting and describing how it ended are the public cluster
// test library's (fit/testing/cluster_runner.h), re-exported here.
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

#include <cstdint>
#include <string>
#include <vector>

#include "fit/testing/cluster_runner.h"

namespace strata {
namespace testing {

// Waits (up to a minute) until `dir` holds a checkpoint ckpt-<s>.index with
// s >= step: training got that far. Any such step, since the manager keeps
// only the newest few and a fast cluster may have deleted ckpt-<step>
// before a poll sees it.
bool WaitForCheckpoint(const std::string& dir, int64_t step);

// The trainer's endings are the cluster runner's (fit/testing/).
using Exit = WorkerExit;

// Where Spawn sends the stdout of a process whose stderr goes to
// `stderr_path`: the same path with ".stdout" appended.
std::string StdoutPathFor(const std::string& stderr_path);

// "STRATA_JOB_TOKEN=<token>": one job token for every trainer this test
// process starts, so that they form clusters; Spawn adds it unless `env`
// (or this process's environment) gives a token.
std::string JobTokenEnv();

// Starts the trainer with `args` (plus --digits_path to the bundled data);
// stderr goes to `stderr_path`, stdout to StdoutPathFor(stderr_path). `env`
// ("NAME=value") is added to (or replaces entries of) this process's
// environment.
Process Spawn(const std::vector<std::string>& args, const std::string& stderr_path,
              const std::vector<std::string>& env = {});
// Spawn + Wait, stderr kept under a directory named after `name`.
Exit RunTrainer(const std::vector<std::string>& args, const std::string& name);

// Starts n trainers as the workers of one cluster on loopback
// (--strategy=multi_worker_mirrored, TF_CONFIG, --heartbeat_timeout=5,
// --startup_timeout=60, --intra_op_threads=1 after `flags`) and waits for all
// of them; worker i's stderr is exits[i].err, kept under a directory named
// after `name`.
std::vector<Exit> RunTrainerCluster(int n, const std::string& name, const std::vector<std::string>& flags);

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
