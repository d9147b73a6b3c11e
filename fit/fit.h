// Fit: train a user's own model under any strategy, as Keras's model.fit
// does under a tf.distribute strategy scope. The user gives the model (a
// function building predictions from features), the loss, the optimizer,
// the training examples and optionally validation examples and metrics;
// Fit distributes the input over the replicas (and workers), traces the
// step, runs the epochs, evaluates, checkpoints and resumes exactly, reports
// progress and metrics, and calls the callbacks.
//
//   auto strategy = *fit::MakeStrategy(*fit::StrategyConfigFromFlags());  // fit/strategy_flags.h
//   train::Sequential model(/*seed=*/1);
//   model.Add<train::Dense>(16, train::Activation::kRelu);
//   model.Add<MyLayer>();                                                   // a custom layer
//   fit::Model m;
//   m.predict = [&](const Scope& s, Output x) { return model.Build(s, x); };
//   m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> { return MyLoss(s, y, p); };
//   m.metrics = {fit::MeanSquaredErrorMetric()};
//   auto optimizer = *fit::MakeOptimizer("adam", 1e-3);                     // fit/optimizers.h
//   fit::FitOptions o;
//   o.global_batch_size = 64;
//   o.epochs = 10;
//   o.checkpoint_dir = "/tmp/run";
//   absl::StatusOr<fit::FitResult> r = fit::Fit(strategy.get(), m, optimizer.get(), train, validation, o);
//
// Data: `train` and `validation` are datasets of examples (train/data/,
// e.g. data::FromTensors({x, y})), each example (features, label) with the
// same dtypes and shapes throughout. Each epoch the training examples are
// shuffled (seeded by FitOptions::seed, a new order per epoch) and batched
// into global batches of global_batch_size, split over every replica of
// every worker: the cluster trains on what one process would. As Keras, the
// epoch's last partial batch trains too (FitOptions::drop_remainder drops
// it), and global_batch_size need not be a multiple of the replica count:
// a batch that does not split evenly gives some replicas one example more
// (or a replica none, when there are fewer examples than replicas), each
// replica's loss weighted by its share (strategy/distributed_dataset.h,
// PartialBatches::kWeighted) so that every example counts once, as in one
// process. With several workers every worker then reads every example
// (DATA sharding: the weights need the step's example count); with
// drop_remainder and a global batch that splits evenly, FILE sharding
// applies where the data reads at least as many files as there are workers.
//
// The model: `predict` is called once per replica inside the step, and
// once more outside it for evaluation, and must reuse its variables (make
// layers once, as train::Sequential does; its Build may be called again).
// The step is built in the training phase (train/phase.h: Dropout drops,
// BatchNormalization normalizes by the batch and updates its moving
// statistics), the evaluation and the Predictor in inference.
// Every trainable variable the loss reads is trained (train::Minimize
// without a list). `loss` returns the mean loss of its batch, a scalar; the
// step's loss is its mean over the replicas. Each metric returns the mean
// of its batch; evaluation reports it and the loss over every validation
// example ("val_loss", "val_<name>").
//
// Steps: steps if > 0, else epochs x the steps of an epoch:
// ceil(examples / global batch), or examples / global batch with
// drop_remainder.
//
// Checkpoints (checkpoint_dir): the variables, the optimizer's slots and
// step, the input pipeline's position and each callback's state
// (Callback::SaveState), every save_every_steps steps and at the end, by the
// chief (worker 0) only; max_to_keep are kept. Fit first restores the
// newest intact one, skipping corrupt ones, so a run restarted after a
// crash or preemption ends bit for bit where an uninterrupted one does;
// a checkpoint resumes under another strategy or replica count. The logs
// of an epoch cut by a restart cover only its steps after the restart.
//
// Preemption (TensorFlow's PreemptionCheckpointHandler): while Fit runs it
// handles SIGTERM (restoring the previous handler after). A worker that
// receives one tells every worker with the next step (its flag rides on the
// loss's all-reduce), so every worker stops after the same step, the chief
// saves a checkpoint there, and Fit returns OK with `preempted` set: the
// program exits 0 and its relaunch resumes exactly.
//
// Reports: the progress line to `log` and the metrics as JSON lines to
// metrics_out (one per step, one per epoch with its validation, a final
// one), both by the chief only; TensorBoard event files (tensorboard_dir,
// fit/tensorboard.h) by the chief only; a Chrome trace of a few steps
// (trace_out) by every worker.
//
// A worker's own error is told to every worker of a multi-worker cluster
// (fit/loop.h ReportWorkerError), so theirs end with it; a worker whose
// run stopped because of another's error returns the cluster's error.
//
// Errors: InvalidArgument for bad options, a model that returns a null or
// non-floating prediction, a loss that is not a scalar, data whose examples
// are not (features, label) or a global batch that does not split over the
// replicas; FailedPrecondition naming the variable for a checkpoint of
// another model; the step's own errors. Never a crash.
//
// Thread-safety: one Fit at a time per strategy. Ownership: nothing is
// kept; the strategy, optimizer and callbacks must outlive the call.
#ifndef STRATA_FIT_FIT_H_
#define STRATA_FIT_FIT_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "strategy/pipeline.h"
#include "strategy/strategy.h"
#include "train/data/dataset.h"
#include "train/optimizers.h"

namespace strata {
namespace fit {

// Named values: "loss", "val_loss", "val_mse", "learning_rate", ...
using Logs = std::map<std::string, double>;

struct Metric {
  std::string name;  // reported as "val_<name>"
  // The mean over the batch (a scalar) of labels `y` and predictions `p`.
  std::function<absl::StatusOr<Output>(const Scope& scope, Output y, Output p)> fn;
};

struct Model {
  std::function<absl::StatusOr<Output>(const Scope& scope, Output features)> predict;
  std::function<absl::StatusOr<Output>(const Scope& scope, Output labels, Output predictions)> loss;
  std::vector<Metric> metrics;
  // Pipeline model parallelism (strategy/pipeline.h): the model as one
  // function per stage, each building its stage from the tensors the one
  // before returned (stage 0 from the features; the last returns the
  // predictions). When set, the step runs the stages on
  // FitOptions::pipeline's devices with its micro-batches and schedule
  // (under a strategy of one replica whose machine has those devices), and
  // `predict` may be left empty: evaluation and the Predictor then run the
  // stages one after the other.
  std::vector<distribute::PipelineStageFn> stages;
};

// Hooks into the loop, as Keras callbacks. Every worker calls its own with
// the same logs (the loss is all-reduced, evaluation sees the same data), so
// a deterministic callback decides the same on every worker.
class Callback {
 public:
  virtual ~Callback() = default;
  virtual void OnTrainBegin(int64_t start_step, int64_t total_steps) {}
  // `step` counts from 1; logs: "loss" (the step's, mean over replicas).
  virtual void OnStepEnd(int64_t step, const Logs& logs) {}
  // `epoch` counts from 1; logs: "loss" (mean over the epoch's steps of this
  // run) and the validation's "val_*".
  virtual void OnEpochEnd(int64_t epoch, const Logs& logs) {}
  virtual void OnTrainEnd(const Logs& logs) {}
  // Saved with every checkpoint and restored on resume, so that a resumed
  // run decides as an uninterrupted one.
  virtual std::string SaveState() const { return ""; }
  virtual absl::Status RestoreState(const std::string& state) { return absl::OkStatus(); }

  // Ends the run after the current step (a checkpoint is saved then).
  void RequestStop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  bool stop_requested_ = false;
};

struct FitOptions {
  int64_t global_batch_size = 32;
  int64_t epochs = 1;
  int64_t steps = 0;          // wins over epochs when > 0
  uint64_t seed = 1;          // the shuffle's
  bool shuffle = true;
  bool drop_remainder = false;  // drop each epoch's last partial batch
  std::string checkpoint_dir;
  int64_t save_every_steps = 0;  // 0: at the end only
  int max_to_keep = 3;
  std::string metrics_out;
  int64_t log_every_steps = 0;   // progress lines when `log` is no terminal; 0: about 20
  bool quiet = false;
  FILE* log = stderr;
  int64_t prefetch = 2;          // global batches prepared ahead; 0: none
  // A Chrome trace (runtime/trace.h) of trace_steps steps after the first
  // trace_warmup_steps of this run (its last ones when it is shorter),
  // written when the last of them ends: every kernel on every device, the
  // collectives, the steps. A worker other than the chief writes its own
  // beside it (trace.json -> trace.worker1.json).
  std::string trace_out;
  int64_t trace_steps = 3;
  int64_t trace_warmup_steps = 10;
  // TensorBoard event files (fit/tensorboard.h), Keras's layout and tags:
  // in train/, "batch_loss", "batch_learning_rate" and
  // "batch_examples_per_sec" every tensorboard_update_steps steps (0:
  // none) and per epoch "epoch_loss", "epoch_learning_rate",
  // "epoch_examples_per_sec"; in validation/, per epoch "epoch_loss" and
  // "epoch_<metric>".
  std::string tensorboard_dir;
  int64_t tensorboard_update_steps = 1;
  // Threads running independent ops side by side; 0: none with one local
  // replica, one per local replica with several.
  int inter_op_threads = 0;
  std::vector<Callback*> callbacks;
  // For Model::stages: stage s on pipeline.stage_devices[s] (empty: CPU
  // device s, "/device:CPU:<s>"), the global batch cut into
  // pipeline.micro_batches, which must divide it (and an epoch's last
  // partial batch, without drop_remainder); pipeline.schedule. Its
  // stage_starts and replica_stage_devices stay empty.
  distribute::PipelineOptions pipeline;
};

// The trained model, for predictions after Fit (as Keras's model.predict):
// runs `predict` on a batch of features with the variables Fit trained.
// The strategy must outlive it. Thread-safety: Predict may be called
// concurrently.
class Predictor {
 public:
  virtual ~Predictor() = default;
  // `features`: [n, ...] of the training features' dtype and per-example
  // shape; InvalidArgument naming the mismatch otherwise.
  virtual absl::StatusOr<Tensor> Predict(const Tensor& features) = 0;
};

struct FitResult {
  int64_t start_step = 0;       // > 0 when resumed
  int64_t final_step = 0;
  int64_t total_steps = 0;
  std::string resumed_from;     // the checkpoint resumed, if any
  std::string final_checkpoint; // the last saved, if any
  double final_loss = 0;        // the last step's
  Logs validation;              // the last evaluation's "val_*", if any
  double train_seconds = 0;
  double examples_per_sec = 0;
  bool stopped_early = false;   // a callback asked
  bool preempted = false;       // a worker got SIGTERM; saved at final_step
  int64_t traced_steps = 0;     // steps written to trace_out
  std::shared_ptr<Predictor> predictor;  // the trained model; null when preempted
};

absl::StatusOr<FitResult> Fit(distribute::Strategy* strategy, const Model& model, train::Optimizer* optimizer,
                              data::DatasetPtr train, data::DatasetPtr validation, const FitOptions& options);

// Mean squared error and classification accuracy (labels int32 or int64
// class ids, predictions [batch, classes] logits) as metrics.
Metric MeanSquaredErrorMetric(std::string name = "mse");
Metric AccuracyMetric(std::string name = "accuracy");

// Stops when `monitor` ("val_loss", "loss", ...) has not improved by more
// than min_delta for `patience` epochs, as Keras's EarlyStopping.
class EarlyStopping : public Callback {
 public:
  EarlyStopping(std::string monitor, int patience, double min_delta = 0)
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta) {}
  void OnEpochEnd(int64_t epoch, const Logs& logs) override;
  std::string SaveState() const override;
  absl::Status RestoreState(const std::string& state) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }

 private:
  const std::string monitor_;
  const int patience_;
  const double min_delta_;
  double best_ = 0;
  bool have_best_ = false;
  int wait_ = 0;
  int64_t stopped_epoch_ = 0;
};

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_FIT_H_
