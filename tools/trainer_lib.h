// The trainer: trains a classifier (an MLP or a small CNN, train/models.h)
// from a CSV file, the bundled digits or synthetic data, on one device or
// data-parallel on several (strategy/), with checkpoints it resumes from by
// itself. tools/trainer.cc is its command line (flags map one to one onto
// TrainerConfig); tests drive it through RunTrainer or as a process.
//
//   TrainerConfig c;
//   c.data = "digits";
//   c.epochs = 30;
//   c.strategy = "mirrored";              // or "one_device" (the default)
//   c.num_cpu_devices = 4;                // 4 virtual CPUs: /cpu:0../cpu:3
//   c.checkpoint_dir = "/tmp/run";        // resumes from the newest intact checkpoint
//   c.save_every_steps = 100;
//   c.metrics_out = "/tmp/run/metrics.jsonl";
//   c.trace_out = "/tmp/run/trace.json";  // Chrome trace of a few steps
//   absl::StatusOr<TrainerResult> r = RunTrainer(c);
//   r->test_accuracy;
//
// Multi-worker (strategy multi_worker_mirrored, one process per task, as
// tools/launch starts them): every worker builds the same graph; the
// chief's initial weights are broadcast. The input is sharded as
// --input_sharding says (auto by default, as tf.distribute's AUTO):
//   FILE  for --data=csv with at least as many files as workers: worker w
//         loads only files w, w + W, w + 2W, ... of the sorted list, splits
//         off its own test examples and trains on batches of
//         global_batch / W of its own examples. What must be the same on
//         every worker is combined across workers through the strategy's
//         collectives: the feature statistics (sums, then sums of squared
//         deviations, over every worker's training split), the class count
//         (the largest label anywhere), the epoch length (every worker's
//         training examples) and the test metrics (every worker's test
//         examples); the workers also check that they see the same number
//         of files and features. A resumed FILE run puts each worker's input
//         at the checkpoint's step (each worker's own sequence); its
//         checkpoints resume only a FILE run of as many workers.
//   DATA  otherwise: every worker loads all the data and takes its share of
//         every global batch (the cluster trains on what one process
//         would).
// Each worker logs one line saying the policy and its files. Only the chief writes checkpoints, metrics
// and the trace; every worker resumes from the newest intact checkpoint in
// checkpoint_dir (a directory every worker can read). A lost or failed task
// ends every worker's run with an error naming it, within the heartbeat
// timeout and a few seconds; a worker that fails tells the others.
//
// What a run does: loads the data, splits off a test set (the split is fixed
// by the seed), standardizes features with the training split's statistics,
// makes the strategy (OneDeviceStrategy or MirroredStrategy over the
// devices), and builds the model, the loss and the optimizer's update as one
// graph with the same model code whatever the strategy: the step function
// traced by Strategy::Run, a DistributedOptimizer, a DistributedDataset
// splitting each global batch over the replicas. The training library's
// loop (fit/loop.h, the one under fit::Fit) runs it: one Session::Run per
// step feeds the batch, fetches the loss (mean over replicas) and runs the
// train op (the plan is built once); it saves on the chief, handles
// SIGTERM as Fit does (every worker stops after the same step, the chief
// saves, the run returns OK), and writes the reports. Checkpoints (fit/checkpoint.h) hold every variable
// (weights, optimizer slots and the step counter) under the names it has on
// one device (a mirrored variable is saved once, from its primary copy, and
// restored into every copy), the feature statistics and, in the metadata,
// the step and the input pipeline's position: a resumed run produces bit for
// bit the weights of an uninterrupted one, and a checkpoint of a mirrored run
// resumes on one device and the other way round. A corrupt newest checkpoint
// is skipped with its DataLoss error logged, and the run resumes from the
// newest intact one.
//
// Metrics (JSON lines, appended): one per step
//   {"step":12,"loss":0.4321,"examples_per_sec":51234.5,"elapsed_sec":0.0123}
// one per epoch
//   {"epoch":1,"step":44,"loss":0.8123}
// and a final one
//   {"final":true,"step":660,"test_accuracy":0.9722,"test_loss":0.0912,...}
// The file is flushed at most every 100 ms, at each checkpoint and at the
// end. Steps redone after a crash appear again. TensorBoard event files
// (tensorboard_dir) carry the same figures (fit/tensorboard.h).
//
// Trace (trace_out): the trace_steps steps after the first
// kTraceWarmupSteps of the run (its last ones if it is shorter), as a Chrome
// trace (runtime/trace.h): a track per device with its kernels, one with the
// collectives, one with the steps.
//
// Errors: InvalidArgument naming the flag for a bad setting (an unknown or
// repeated device, a global batch that does not split evenly over the
// replicas), the data source's error (naming file and line) for bad data,
// NotFound when the digits file cannot be found, FailedPrecondition when a
// checkpoint does not belong to this configuration or data; never a crash.
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
#include "fit/strategy_flags.h"

namespace strata {
namespace trainer {

// The strategy's settings (--strategy, --devices, --num_cpu_devices, the
// cluster, timeouts, transport, bucket size, threads) are the shared flags
// library's (fit/strategy_flags.h), so every training binary takes them
// alike.
struct TrainerConfig : fit::StrategyConfig {
  std::string model = "mlp";  // "mlp", "cnn" or "embedding"
  // "embedding": each feature's value (standardized, clipped to [-2, 2))
  // falls in one of embedding_levels buckets; the (feature, bucket) ids,
  // spread evenly over a table of `vocabulary` rows x embedding_dim, are
  // looked up and averaged (train::EmbeddingBag), then a dense softmax
  // layer: a model of hashed categorical features with a large table.
  int64_t vocabulary = 100000;
  int64_t embedding_dim = 16;
  int64_t embedding_levels = 16;
  // parameter_server: how large variables are split over the ps tasks
  // (ParameterServerOptions::variable_partitioner): "" none, "fixed:N"
  // (N partitions each), "min_size:BYTES[:MAX]" (partitions of at least
  // BYTES, at most MAX, default the ps task count).
  std::string variable_partitioner;
  std::string dtype_policy = "float32";      // or "mixed_bfloat16", "mixed_float16" (train/policy.h)
  std::vector<int64_t> hidden = {128, 64};   // the MLP's hidden layers
  // "digits", "csv:PATH[,PATH...]" (numbers only, label last, optional header) or
  // "synthetic:N[:FEATURES[:CLASSES]]" (defaults 64 features, 10 classes).
  // A PATH may be a directory (its files, sorted) or a glob pattern.
  std::string data = "digits";
  std::string digits_path;                   // "" = FindDigitsCsv (data/digits/find_digits.h)
  double test_fraction = 0.2;                // in [0, 1)
  std::string optimizer = "adam";            // "sgd", "momentum", "adam" or "adamw"
  double learning_rate = 0;                  // 0 = the optimizer's default
  double momentum = 0.9;
  double weight_decay = 0.004;               // adamw's
  double clip_global_norm = 0;               // 0 = no clipping
  std::string lr_schedule = "constant";      // "constant", "exponential", "cosine"
  int64_t lr_decay_steps = 0;                // 0 = the run's total steps
  double lr_decay_rate = 0.1;                // exponential: rate per decay_steps
  int64_t global_batch_size = 32;
  // Pipeline model parallelism in this process (strategy/pipeline.h): the
  // model's layers split into pipeline_stages stages of as equal a layer
  // count as can be, stage s on virtual CPU device s (so
  // --num_cpu_devices is at least the stage count), each global batch cut
  // into micro_batches micro-batches, scheduled "1f1b" or "gpipe". With one
  // stage and one micro-batch, no pipeline. Under --strategy=one_device one
  // pipeline; under --strategy=mirrored a pipeline x data mesh of
  // num_cpu_devices / pipeline_stages replicas of the pipeline, replica r's
  // stage s on CPU device r * pipeline_stages + s, each replica a part of
  // every batch (strategy/pipeline.h's replica_stage_devices).
  int pipeline_stages = 1;
  int micro_batches = 1;
  std::string pipeline_schedule = "1f1b";
  // Under --strategy=multi_worker_mirrored the mesh spans the workers: its
  // devices are every worker's CPU devices in worker order (worker w's
  // device d is mesh device w * num_cpu_devices + d), one graph whose steps
  // every worker runs together (MultiWorkerOptions::steps_span_workers).
  // Set by RunTrainer: the mesh's replicas (1 under one_device) and, across
  // workers, its devices by mesh index (empty: /device:CPU:<index>).
  int pipeline_replicas = 1;
  std::vector<std::string> pipeline_devices;
  // Each epoch's last partial global batch trains too, split over the
  // replicas and weighted by their shares, as Fit does (true: dropped).
  bool drop_remainder = false;
  int64_t epochs = 0;                        // steps = epochs * ceil(train / batch)
  int64_t steps = 0;                         // wins over epochs; neither: 30 epochs
  int64_t seed = 1;
  std::string checkpoint_dir;
  int64_t save_every_steps = 0;              // 0 = only at the end
  int max_to_keep = 3;
  std::string metrics_out;
  bool standardize = true;
  // multi_worker_mirrored: "auto" (file when --data=csv names at least as
  // many files as workers, else data), "file" or "data".
  std::string input_sharding = "auto";
  int64_t prefetch = 2;                      // batches prepared ahead; 0 = none
  int64_t log_every_steps = 0;               // progress lines when stderr is no TTY; 0 = auto
  bool quiet = false;                        // no progress output
  // A Chrome trace of trace_steps steps after warm-up is written here.
  std::string trace_out;
  int64_t trace_steps = 3;
  // TensorBoard event files (fit/tensorboard.h) here, by the chief.
  std::string tensorboard_dir;
  int64_t tensorboard_update_steps = 1;
  // Testing: right after this step (and its checkpoint, if any), the
  // process kills itself with SIGKILL, as a crash would.
  int64_t crash_at_step = 0;
  // Testing: after this step the process stops making progress (sleeps in
  // place, its heartbeats going on), as a stuck rank does.
  int64_t hang_at_step = 0;
  // Used to find the digits in the binary's runfiles.
  std::string argv0;
};

// Steps run before the traced ones (allocators and caches warm).
constexpr int64_t kTraceWarmupSteps = 10;

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
  std::vector<std::string> devices;  // the replicas' devices (full names)
  int64_t traced_steps = 0;      // steps written to trace_out
  int inter_op_threads = 0;      // the session's inter-op pool; 0: ops run inline, one at a time
  // SIGTERM reached a worker: every worker stopped after final_step, the
  // chief saved there; no test evaluation.
  bool preempted = false;
};

// InvalidArgument naming the flag (as --name) for a setting out of range.
absl::Status ValidateConfig(const TrainerConfig& config);

// Trains as the file comment says. Progress goes to `log` (stderr by
// default; carriage-return updates when it is a terminal).
absl::StatusOr<TrainerResult> RunTrainer(const TrainerConfig& config, FILE* log = stderr);

// "128,64" -> {128, 64}; "" -> {} (no hidden layer). InvalidArgument naming
// --hidden for anything but positive integers.
absl::StatusOr<std::vector<int64_t>> ParseHidden(const std::string& text);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_LIB_H_
