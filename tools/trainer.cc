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
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/trainer_lib.h"

ABSL_FLAG(std::string, model, "mlp", "mlp or cnn (the CNN needs square images, e.g. the 8x8 digits)");
ABSL_FLAG(std::string, hidden, "128,64", "the MLP's hidden layer sizes, comma-separated");
ABSL_FLAG(std::string, data, "digits",
          "digits, csv:PATH[,PATH...] (numbers only, label in the last column, optional header; a "
          "PATH may be a directory or a glob pattern) or synthetic:N[:FEATURES[:CLASSES]]");
ABSL_FLAG(std::string, digits_path, "",
          "the digits CSV; default: found in the runfiles or the source tree");
ABSL_FLAG(double, test_fraction, 0.2, "fraction of the examples held out for testing (split fixed by --seed)");
ABSL_FLAG(std::string, optimizer, "adam", "sgd, momentum or adam");
ABSL_FLAG(double, learning_rate, 0, "0: the optimizer's default (sgd 0.1, momentum 0.01, adam 0.001)");
ABSL_FLAG(double, momentum, 0.9, "the momentum optimizer's momentum");
ABSL_FLAG(std::string, lr_schedule, "constant", "constant, exponential or cosine");
ABSL_FLAG(int64_t, lr_decay_steps, 0, "decay steps of the schedule; 0: the run's total steps");
ABSL_FLAG(double, lr_decay_rate, 0.1, "exponential schedule: factor per lr_decay_steps");
ABSL_FLAG(int64_t, global_batch_size, 32, "examples per step");
ABSL_FLAG(int64_t, epochs, 0, "passes over the training split (0 and no --steps: 30)");
ABSL_FLAG(int64_t, steps, 0, "total steps (wins over --epochs)");
ABSL_FLAG(int64_t, seed, 1, "seeds the split, the shuffle and the initial weights");
ABSL_FLAG(std::string, checkpoint_dir, "", "write checkpoints here and resume from the newest intact one");
ABSL_FLAG(int64_t, save_every_steps, 0, "checkpoint period in steps (0: only at the end)");
ABSL_FLAG(int32_t, max_to_keep, 3, "checkpoints kept (0: all)");
ABSL_FLAG(std::string, metrics_out, "", "append JSON lines: one per step and a final one with test metrics");
ABSL_FLAG(bool, standardize, true, "standardize features with the training split's mean and stddev");
ABSL_FLAG(std::string, strategy, "one_device",
          "one_device (OneDeviceStrategy), mirrored (MirroredStrategy: one replica per device, "
          "gradients all-reduced) or multi_worker_mirrored (one process per task of a cluster; "
          "see --cluster_spec and tools/launch)");
ABSL_FLAG(std::string, cluster_spec, "",
          "multi_worker_mirrored: the cluster as JSON, e.g. {\"worker\":[\"127.0.0.1:2222\","
          "\"127.0.0.1:2223\"]} (default: the TF_CONFIG environment variable)");
ABSL_FLAG(std::string, task_type, "", "multi_worker_mirrored with --cluster_spec: chief or worker");
ABSL_FLAG(std::string, task_index, "", "multi_worker_mirrored with --cluster_spec: this task's index");
ABSL_FLAG(double, heartbeat_timeout, 10,
          "multi_worker_mirrored: seconds without a heartbeat before a task is declared lost");
ABSL_FLAG(double, startup_timeout, 120,
          "multi_worker_mirrored: seconds start-up waits for every task to register");
ABSL_FLAG(std::string, collective_transport, "auto",
          "multi_worker_mirrored: auto (shared memory when every task is on one host, else TCP), "
          "shm or tcp");
ABSL_FLAG(std::string, input_sharding, "auto",
          "multi_worker_mirrored: auto (file when --data=csv names at least as many files as "
          "workers, else data), file (each worker loads only its share of the files) or data "
          "(every worker loads everything and takes its share of every global batch)");
ABSL_FLAG(std::string, devices, "",
          "comma-separated devices in replica order, e.g. /cpu:0,/cpu:1 or /gpu:0,/gpu:1 (GPUs need a "
          "build with --config=cuda; docs/gpu.md). Default: one_device /cpu:0; mirrored and "
          "multi_worker_mirrored every CPU device of --num_cpu_devices if given, else every GPU, "
          "else /cpu:0");
ABSL_FLAG(int32_t, num_cpu_devices, 0,
          "virtual CPU devices simulating a multi-device machine (0: as many as --devices names, "
          "at least 1)");
ABSL_FLAG(int64_t, gradient_bucket_bytes, -1,
          "gradients are all-reduced in buckets of at most this many bytes, the last layers' "
          "first, overlapping the backward pass (0: one per gradient; -1: 1 MiB for mirrored, 0 "
          "for multi_worker_mirrored)");
ABSL_FLAG(int32_t, intra_op_threads, 0,
          "threads inside each op, per device (0: all cores divided by the CPU devices, at least 1)");
ABSL_FLAG(int32_t, inter_op_threads, 0,
          "threads running independent ops side by side (0: none on one device, one per replica "
          "with several)");
ABSL_FLAG(std::string, trace_out, "",
          "write a Chrome trace (Perfetto, chrome://tracing) of --trace_steps steps after warm-up here");
ABSL_FLAG(int64_t, trace_steps, 3, "steps traced for --trace_out");
ABSL_FLAG(int64_t, prefetch, 2, "batches prepared ahead on a background thread (0: none)");
ABSL_FLAG(int64_t, log_every_steps, 0, "progress line period when stderr is not a terminal (0: auto)");
ABSL_FLAG(bool, quiet, false, "no progress output");
ABSL_FLAG(int64_t, crash_at_step, 0, "testing: SIGKILL itself right after this step");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a classifier on one device or mirrored over several.\n"
      "  trainer --model=mlp --hidden=128,64 --data=digits --epochs=30\n"
      "  trainer --strategy=mirrored --num_cpu_devices=4 --trace_out=/tmp/trace.json\n"
      "  trainer --devices=/gpu:0 --model=cnn   (a --config=cuda build)\n"
      "  trainer --data=csv:train.csv --checkpoint_dir=/tmp/run --save_every_steps=100");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::vector<std::string> extra(rest.begin() + 1, rest.end());
    std::fprintf(stderr, "trainer: unexpected arguments: %s (flags look like --name=value)\n",
                 absl::StrJoin(extra, " ").c_str());
    return 1;
  }
  strata::trainer::TrainerConfig c;
  c.model = absl::GetFlag(FLAGS_model);
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
  c.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  c.lr_decay_steps = absl::GetFlag(FLAGS_lr_decay_steps);
  c.lr_decay_rate = absl::GetFlag(FLAGS_lr_decay_rate);
  c.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.steps = absl::GetFlag(FLAGS_steps);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  c.save_every_steps = absl::GetFlag(FLAGS_save_every_steps);
  c.max_to_keep = absl::GetFlag(FLAGS_max_to_keep);
  c.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  c.standardize = absl::GetFlag(FLAGS_standardize);
  c.strategy = absl::GetFlag(FLAGS_strategy);
  absl::StatusOr<std::vector<std::string>> devices =
      strata::trainer::ParseDevices(absl::GetFlag(FLAGS_devices));
  if (!devices.ok()) {
    std::fprintf(stderr, "trainer: %s\n", std::string(devices.status().message()).c_str());
    return 1;
  }
  c.devices = *devices;
  c.num_cpu_devices = absl::GetFlag(FLAGS_num_cpu_devices);
  c.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);
  c.task_type = absl::GetFlag(FLAGS_task_type);
  c.task_index = absl::GetFlag(FLAGS_task_index);
  c.heartbeat_timeout_seconds = absl::GetFlag(FLAGS_heartbeat_timeout);
  c.startup_timeout_seconds = absl::GetFlag(FLAGS_startup_timeout);
  c.collective_transport = absl::GetFlag(FLAGS_collective_transport);
  c.input_sharding = absl::GetFlag(FLAGS_input_sharding);
  c.gradient_bucket_bytes = absl::GetFlag(FLAGS_gradient_bucket_bytes);
  c.trace_out = absl::GetFlag(FLAGS_trace_out);
  c.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  c.intra_op_threads = absl::GetFlag(FLAGS_intra_op_threads);
  c.inter_op_threads = absl::GetFlag(FLAGS_inter_op_threads);
  c.prefetch = absl::GetFlag(FLAGS_prefetch);
  c.log_every_steps = absl::GetFlag(FLAGS_log_every_steps);
  c.quiet = absl::GetFlag(FLAGS_quiet);
  c.crash_at_step = absl::GetFlag(FLAGS_crash_at_step);
  c.argv0 = argv[0];

  absl::StatusOr<strata::trainer::TrainerResult> r = strata::trainer::RunTrainer(c);
  if (!r.ok()) {
    std::fprintf(stderr, "trainer: error: %s\n", r.status().ToString().c_str());
    return 1;
  }
  return 0;
}
