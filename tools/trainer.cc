// trainer: trains an MLP or a small CNN classifier on one device or
// data-parallel over several (MirroredStrategy), with checkpoints it resumes
// from by itself (tools/trainer_lib.h has the details; docs/training.md the
// guide).
//
//   bazel run //tools:trainer -- --model=mlp --hidden=128,64 --epochs=30
//   bazel-bin/tools/trainer --strategy=mirrored --num_cpu_devices=4 --trace_out=/tmp/trace.json
//   bazel-bin/tools/trainer --devices=/gpu:0 --model=cnn         # built with --config=cuda
//   bazel-bin/tools/trainer --strategy=mirrored                  # every GPU (NCCL), else /cpu:0
//   bazel-bin/tools/trainer --data=csv:/data/train.csv --optimizer=sgd --learning_rate=0.1
//       --checkpoint_dir=/tmp/run --save_every_steps=100 --metrics_out=/tmp/run/metrics.jsonl
//
// Exit status: 0 on success, 1 with a message on stderr for bad flags, bad
// data or a failed run.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fit/fit_flags.h"
#include "fit/strategy_flags.h"
#include "tools/trainer_lib.h"

ABSL_FLAG(std::string, model, "mlp",
          "mlp, cnn (square images, e.g. the 8x8 digits) or embedding (bucketed features looked up "
          "in a table of --vocabulary rows, averaged, then a softmax layer)");
ABSL_FLAG(int64_t, vocabulary, 100000, "embedding: the table's rows");
ABSL_FLAG(int64_t, embedding_dim, 16, "embedding: the table's columns");
ABSL_FLAG(int64_t, embedding_levels, 16, "embedding: buckets per feature");
ABSL_FLAG(std::string, variable_partitioner, "",
          "parameter_server: split large variables over the ps tasks: fixed:N or "
          "min_size:BYTES[:MAX] (default: none)");
ABSL_FLAG(int32_t, pipeline_stages, 1,
          "pipeline model parallelism: the model's layers split into this many stages, each on a "
          "virtual CPU device of its own (one_device), replicated over this process's devices "
          "(mirrored) or over every worker's (multi_worker_mirrored)");
ABSL_FLAG(int32_t, micro_batches, 1,
          "pipeline: micro-batches per global batch (must divide --global_batch_size)");
ABSL_FLAG(std::string, pipeline_schedule, "1f1b", "pipeline: 1f1b or gpipe");
ABSL_FLAG(std::string, hidden, "128,64", "the MLP's hidden layer sizes, comma-separated");
ABSL_FLAG(std::string, data, "digits",
          "digits, csv:PATH[,PATH...] (numbers only, label in the last column, optional header; a "
          "PATH may be a directory or a glob pattern) or synthetic:N[:FEATURES[:CLASSES]]");
ABSL_FLAG(std::string, digits_path, "",
          "the digits CSV; default: found in the runfiles or the source tree");
ABSL_FLAG(double, test_fraction, 0.2, "fraction of the examples held out for testing (split fixed by --seed)");
ABSL_FLAG(std::string, lr_schedule, "constant", "constant, exponential or cosine");
ABSL_FLAG(int64_t, lr_decay_steps, 0, "decay steps of the schedule; 0: the run's total steps");
ABSL_FLAG(double, lr_decay_rate, 0.1, "exponential schedule: factor per lr_decay_steps");
ABSL_FLAG(bool, standardize, true, "standardize features with the training split's mean and stddev");
ABSL_FLAG(std::string, input_sharding, "auto",
          "multi_worker_mirrored: auto (file when --data=csv names at least as many files as "
          "workers, else data), file (each worker loads only its share of the files) or data "
          "(every worker loads everything and takes its share of every global batch)");
ABSL_FLAG(int64_t, crash_at_step, 0, "testing: SIGKILL itself right after this step");
ABSL_FLAG(int64_t, hang_at_step, 0,
          "testing: stop making progress right after this step (sleep, heartbeats going on), as a "
          "stuck rank does");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a classifier on one device or mirrored over several.\n"
      "  trainer --model=mlp --hidden=128,64 --data=digits --epochs=30\n"
      "  trainer --strategy=mirrored --num_cpu_devices=4 --trace_out=/tmp/trace.json\n"
      "  trainer --devices=/gpu:0 --model=cnn   (a --config=cuda build)\n"
      "  trainer --data=csv:train.csv --checkpoint_dir=/tmp/run --save_every_steps=100");
  // The training flags are the shared library's (fit/fit_flags.h); the
  // trainer's own default: no --epochs and no --steps is 30 epochs.
  absl::SetFlag(&FLAGS_epochs, 0);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::vector<std::string> extra(rest.begin() + 1, rest.end());
    std::fprintf(stderr, "trainer: unexpected arguments: %s (flags look like --name=value)\n",
                 absl::StrJoin(extra, " ").c_str());
    return 1;
  }
  strata::trainer::TrainerConfig c;
  c.model = absl::GetFlag(FLAGS_model);
  c.vocabulary = absl::GetFlag(FLAGS_vocabulary);
  c.embedding_dim = absl::GetFlag(FLAGS_embedding_dim);
  c.embedding_levels = absl::GetFlag(FLAGS_embedding_levels);
  c.variable_partitioner = absl::GetFlag(FLAGS_variable_partitioner);
  c.dtype_policy = absl::GetFlag(FLAGS_dtype_policy);
  absl::StatusOr<std::vector<int64_t>> hidden = strata::trainer::ParseHidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) {
    std::fprintf(stderr, "trainer: %s\n", std::string(hidden.status().message()).c_str());
    return 1;
  }
  c.hidden = *hidden;
  c.data = absl::GetFlag(FLAGS_data);
  c.digits_path = absl::GetFlag(FLAGS_digits_path);
  c.test_fraction = absl::GetFlag(FLAGS_test_fraction);
  c.optimizer = absl::GetFlag(FLAGS_optimizer);
  c.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  c.momentum = absl::GetFlag(FLAGS_momentum);
  c.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  c.clip_global_norm = absl::GetFlag(FLAGS_clip_global_norm);
  c.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  c.lr_decay_steps = absl::GetFlag(FLAGS_lr_decay_steps);
  c.lr_decay_rate = absl::GetFlag(FLAGS_lr_decay_rate);
  c.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
  c.pipeline_stages = absl::GetFlag(FLAGS_pipeline_stages);
  c.micro_batches = absl::GetFlag(FLAGS_micro_batches);
  c.pipeline_schedule = absl::GetFlag(FLAGS_pipeline_schedule);
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.steps = absl::GetFlag(FLAGS_steps);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  c.save_every_steps = absl::GetFlag(FLAGS_save_every_steps);
  c.max_to_keep = absl::GetFlag(FLAGS_max_to_keep);
  c.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  c.standardize = absl::GetFlag(FLAGS_standardize);
  // --strategy, --devices, the cluster, threads: the shared flags library.
  absl::StatusOr<strata::fit::StrategyConfig> strategy = strata::fit::StrategyConfigFromFlags();
  if (!strategy.ok()) {
    std::fprintf(stderr, "trainer: %s\n", std::string(strategy.status().message()).c_str());
    return 1;
  }
  static_cast<strata::fit::StrategyConfig&>(c) = *std::move(strategy);
  c.input_sharding = absl::GetFlag(FLAGS_input_sharding);
  c.trace_out = absl::GetFlag(FLAGS_trace_out);
  c.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  c.tensorboard_dir = absl::GetFlag(FLAGS_tensorboard_dir);
  c.tensorboard_update_steps = absl::GetFlag(FLAGS_tensorboard_update_steps);
  c.prefetch = absl::GetFlag(FLAGS_prefetch);
  c.drop_remainder = absl::GetFlag(FLAGS_drop_remainder);
  c.log_every_steps = absl::GetFlag(FLAGS_log_every_steps);
  c.quiet = absl::GetFlag(FLAGS_quiet);
  c.crash_at_step = absl::GetFlag(FLAGS_crash_at_step);
  c.hang_at_step = absl::GetFlag(FLAGS_hang_at_step);
  c.argv0 = argv[0];

  absl::StatusOr<strata::trainer::TrainerResult> r = strata::trainer::RunTrainer(c);
  if (!r.ok()) {
    std::fprintf(stderr, "trainer: error: %s\n", r.status().ToString().c_str());
    return 1;
  }
  return 0;
}
