// The trainer: trains a classifier (an MLP or a small CNN, train/models.h)
// on one device from a CSV file, the bundled digits or synthetic data, with
// checkpoints it resumes from by itself. tools/trainer.cc is its command
// line (flags map one to one onto TrainerConfig); tests drive it through
// RunTrainer or as a process.
//
//   TrainerConfig c;
//   c.data = "digits";
//   c.epochs = 30;
//   c.checkpoint_dir = "/tmp/run";        // resumes from the newest intact checkpoint
//   c.save_every_steps = 100;
//   c.metrics_out = "/tmp/run/metrics.jsonl";
//   absl::StatusOr<TrainerResult> r = RunTrainer(c);
//   r->test_accuracy;
//
// What a run does: loads the data, splits off a test set (the split is fixed
// by the seed), standardizes features with the training split's statistics,
// builds the model, the loss and the optimizer's update as one graph, and
// runs one Session::Run per step that feeds the batch, fetches the loss and
// runs the train op (the plan is built once). Checkpoints hold every
// variable (weights, optimizer slots and the step counter), the feature
// statistics and, in the metadata, the step and the input pipeline's
// position, so a resumed run produces bit for bit the weights of an
// uninterrupted one. A corrupt newest checkpoint is skipped with its
// DataLoss error logged, and the run resumes from the newest intact one.
//
// Metrics (JSON lines, appended): one per step
//   {"step":12,"loss":0.4321,"examples_per_sec":51234.5,"elapsed_sec":0.0123}
// and a final one
//   {"final":true,"step":660,"test_accuracy":0.9722,"test_loss":0.0912,...}
// The file is flushed at most every 100 ms, at each checkpoint and at the
// end. Steps redone after a crash appear again.
//
// Errors: InvalidArgument naming the flag for a bad setting, the data
// source's error (naming file and line) for bad data, NotFound when the
// digits file cannot be found, FailedPrecondition when a checkpoint does not
// belong to this configuration or data; never a crash.
//
// Thread-safety: RunTrainer may run once at a time per process (its
// variables live in the process's device). Ownership: plain values.
#ifndef STRATA_TOOLS_TRAINER_LIB_H_
#define STRATA_TOOLS_TRAINER_LIB_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata {
namespace trainer {

struct TrainerConfig {
  std::string model = "mlp";                 // "mlp" or "cnn"
  std::vector<int64_t> hidden = {128, 64};   // the MLP's hidden layers
  // "digits", "csv:PATH" (numbers only, label last, optional header) or
  // "synthetic:N[:FEATURES[:CLASSES]]" (defaults 64 features, 10 classes).
  std::string data = "digits";
  std::string digits_path;                   // "" = FindDigitsCsv
  double test_fraction = 0.2;                // in [0, 1)
  std::string optimizer = "adam";            // "sgd", "momentum" or "adam"
  double learning_rate = 0;                  // 0 = the optimizer's default
  double momentum = 0.9;
  std::string lr_schedule = "constant";      // "constant", "exponential", "cosine"
  int64_t lr_decay_steps = 0;                // 0 = the run's total steps
  double lr_decay_rate = 0.1;                // exponential: rate per decay_steps
  int64_t global_batch_size = 32;
  int64_t epochs = 0;                        // steps = epochs * (train / batch)
  int64_t steps = 0;                         // wins over epochs; neither: 30 epochs
  int64_t seed = 1;
  std::string checkpoint_dir;
  int64_t save_every_steps = 0;              // 0 = only at the end
  int max_to_keep = 3;
  std::string metrics_out;
  bool standardize = true;
  int intra_op_threads = 0;                  // 0 = hardware concurrency
  // Threads for running independent ops side by side; 0 = none (ops run one
  // at a time on the calling thread, each using the intra-op threads).
  int inter_op_threads = 0;
  int64_t prefetch = 2;                      // batches prepared ahead; 0 = none
  int64_t log_every_steps = 0;               // progress lines when stderr is no TTY; 0 = auto
  bool quiet = false;                        // no progress output
  // Testing: right after this step (and its checkpoint, if any), the
  // process kills itself with SIGKILL, as a crash would.
  int64_t crash_at_step = 0;
  // Used to find the digits in the binary's runfiles.
  std::string argv0;
};

struct TrainerResult {
  int64_t start_step = 0;        // > 0 when resumed
  int64_t final_step = 0;
  int64_t total_steps = 0;
  int64_t num_features = 0;
  int64_t num_classes = 0;
  int64_t train_examples = 0;
  int64_t test_examples = 0;
  double test_accuracy = -1;     // -1 without a test set
  double test_loss = -1;
  double train_seconds = 0;      // the steps of this run, input included
  double examples_per_sec = 0;   // over this run's steps
  std::string resumed_from;      // checkpoint prefix, if resumed
  std::string final_checkpoint;  // prefix written at the end, if any
};

// InvalidArgument naming the flag (as --name) for a setting out of range.
absl::Status ValidateConfig(const TrainerConfig& config);

// Trains as the file comment says. Progress goes to `log` (stderr by
// default; carriage-return updates when it is a terminal).
absl::StatusOr<TrainerResult> RunTrainer(const TrainerConfig& config, FILE* log = stderr);

// "128,64" -> {128, 64}; "" -> {} (no hidden layer). InvalidArgument naming
// --hidden for anything but positive integers.
absl::StatusOr<std::vector<int64_t>> ParseHidden(const std::string& text);

// The bundled digits file: `explicit_path` if given (NotFound if missing),
// else the first that exists of: the runfiles of `argv0` or of this
// executable (RUNFILES_DIR / TEST_SRCDIR, <exe>.runfiles), the workspace of
// `bazel run` (BUILD_WORKSPACE_DIRECTORY), data/digits/digits.csv.gz in the
// working directory or any parent, and the same above the executable's real
// path. NotFound listing where it looked otherwise.
absl::StatusOr<std::string> FindDigitsCsv(const std::string& explicit_path,
                                          const std::string& argv0);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_LIB_H_
