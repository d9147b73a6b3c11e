// The training loop under Fit, for programs that build their step graph
// themselves (tools/trainer does): given the step (a distributed input, the
// loss and the train op traced under a strategy) and FitOptions, it makes
// the session, restores the newest checkpoint or initializes, runs the
// steps, evaluates, saves on the chief, handles preemption, and writes the
// progress line, the JSON-lines metrics, TensorBoard files and the trace,
// calling the callbacks: what Fit does once its graph exists.
//
//   fit::StepGraph g;                                   // built by the program:
//   g.root = &root;
//   g.input = dataset.get();                            // Strategy::DistributeDataset
//   ... in the step function, per replica:
//   Output v = fit::StackPreemptionFlag(ctx.scope(), loss, &g.preempt_feeds,
//                                       strategy->num_workers());
//   ... after Strategy::Run:
//   g.loss_and_flag = strategy->Reduce(root, distribute::ReduceOp::kMean, step.values[0]);
//   g.train_op = step.op; g.init = init; g.checkpoint = checkpoint.get();
//   fit::FitResult result;
//   result.total_steps = 1000;
//   fit::TrainLoop loop(strategy, g, options, fit::LoopHooks(), &result);
//   STRATA_RETURN_IF_ERROR(loop.Start());
//   STRATA_RETURN_IF_ERROR(loop.Run());
//
// Preemption and stragglers: each replica's loss is concatenated with this
// worker's signals, fed by the loop: its preemption flag (0 or 1) and, in
// its own slots of one per worker, its time in cross-worker collectives
// during the previous step (the flight recorder's,
// runtime/collective/flight_recorder.h) and its time waiting for a CPU
// then (the run-queue delay of the threads that do its steps: the loop's,
// the executor's, the collectives' lanes and transports; base/run_queue.h).
// The vector
// is averaged over every replica of every worker with the loss's
// all-reduce, so every worker learns after the same step that one of them
// got SIGTERM, and every worker's waits (the metrics' "collective_wait_sec"
// and "cpu_wait_sec", by worker); a worker the others consistently wait
// for is named on the chief's log (fit/straggler.h).
//
// A loss that is not finite ends the run with FailedPrecondition naming the
// step (LoopHooks::nonfinite_hint appended).
//
// Trace (FitOptions::trace_out): trace_steps steps after the first
// trace_warmup_steps of this run, or its last trace_steps when it is
// shorter, written when the last of them ends (logged on the chief).
//
// Thread-safety: one thread. Ownership: nothing of the graph is owned; the
// strategy, the graph's objects and the options outlive the loop.
#ifndef STRATA_FIT_LOOP_H_
#define STRATA_FIT_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fit/checkpoint.h"
#include "fit/fit.h"
#include "fit/progress.h"
#include "fit/straggler.h"
#include "fit/tensorboard.h"
#include "graph/scope.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/inline_pool.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "strategy/distributed_dataset.h"
#include "strategy/strategy.h"

namespace strata {
namespace fit {

class PreemptionWatcher;  // SIGTERM while a loop runs (loop.cc)

// The step graph a TrainLoop runs.
struct StepGraph {
  const Scope* root = nullptr;
  distribute::DistributedDataset* input = nullptr;  // one global batch per step
  // The step's [loss, preempted, each worker's wait in collectives, each
  // worker's wait for a CPU], means over every replica of every worker
  // (StackPreemptionFlag).
  Output loss_and_flag;
  std::vector<std::string> preempt_feeds;  // one per local replica
  Node* train_op = nullptr;
  Output learning_rate;  // the step's (DT_DOUBLE), reported when set
  Node* init = nullptr;
  Checkpoint* checkpoint = nullptr;
};

// In a step function: `loss` (a float or double scalar) concatenated with
// a placeholder of its dtype for the worker's signals (the preemption flag,
// then two waits per worker of the `num_workers`), whose name is appended
// to `preempt_feeds`. Return it as a step value; its kMean reduction is
// StepGraph::loss_and_flag. A step whose session spans the workers
// (LoopHooks::across_workers) gives `worker_devices`, each worker's first
// device: one placeholder on each (each worker's feed reaches only its
// own), summed, so that any worker's preemption notice stops every worker.
Output StackPreemptionFlag(const Scope& scope, Output loss, std::vector<std::string>* preempt_feeds,
                           int num_workers = 1,
                           const std::vector<std::string>& worker_devices = {});

// What a worker returns for `error`, an error of its own run: under a
// MultiWorkerMirroredStrategy, the cluster's error when it has one (this
// worker only stopped because of it), else `error` with its ranks named as
// tasks (NameTasks), told to every other task (ReportError) so that their
// steps fail with it at once rather than after a heartbeat timeout. Other
// strategies: `error` as it is. Fit does this itself.
absl::Status ReportWorkerError(distribute::Strategy* strategy, const absl::Status& error);

// What the program adds to the loop.
struct LoopHooks {
  int64_t steps_per_epoch = 0;  // epoch ends every this many steps; 0: no epochs
  // Validation ("val_*" logs) at each epoch's end and at the end; null: none.
  std::function<absl::StatusOr<Logs>(Session*)> evaluate;
  // Added to the final metrics line and OnTrainEnd's logs, after training
  // (not after a preemption: the notice leaves little time).
  std::function<absl::StatusOr<Logs>(Session*)> final_logs;
  // After each step and its checkpoint, if any (the metrics flushed first).
  std::function<void(int64_t step)> after_step;
  // After each traced step (FitOptions::trace_out): the trace, and the
  // index of the step's first event in it, to add events of the program's
  // own (the trainer's pipeline items, distribute::RecordPipelineItems).
  std::function<void(StepTracer* tracer, size_t first_event)> traced_step;
  std::string log_prefix = "fit";  // of the chief's log lines
  std::string nonfinite_hint;      // appended to a non-finite loss's error
  // Steps that span the workers (a pipeline with stages on several
  // workers' devices, SessionOptions::task_links), as the trainer's
  // --pipeline_stages under multi_worker_mirrored: the session's options
  // (MultiWorkerMirroredStrategy::session_options_across_workers()) and
  // this worker's index. The loop's strategy is then one replica's, the
  // same on every worker; every worker runs every step, restore,
  // evaluation and checkpoint read together, and only worker 0 writes
  // (checkpoints, metrics, TensorBoard). Unset: the strategy's own.
  struct AcrossWorkers {
    SessionOptions session;
    int worker_index = 0;
  };
  std::optional<AcrossWorkers> across_workers;
};

class TrainLoop {
 public:
  // `result->total_steps` must be set; the loop fills in the rest.
  TrainLoop(distribute::Strategy* strategy, const StepGraph& graph, const FitOptions& options, LoopHooks hooks,
            FitResult* result);
  ~TrainLoop();
  TrainLoop(const TrainLoop&) = delete;
  TrainLoop& operator=(const TrainLoop&) = delete;

  // Makes the session; restores the newest intact checkpoint of
  // checkpoint_dir (skipped corrupt ones logged) or initializes.
  absl::Status Start();
  // The same with the checkpoint already chosen: `reader` (null:
  // initialize).
  absl::Status StartFrom(std::unique_ptr<CheckpointReader> reader);
  // The steps, evaluations, saves and reports, to total_steps, a stop
  // request or preemption.
  absl::Status Run();

  Session* session() const { return session_.get(); }
  // The session's inter-op threads (after Start); 0: the inline pool, one
  // op at a time.
  int inter_op_threads() const { return inter_op_threads_; }
  // The trained session and the pool it may use (FitResult::predictor).
  std::pair<std::unique_ptr<InlinePool>, std::unique_ptr<Session>> ReleaseSession() {
    return {std::move(inline_pool_), std::move(session_)};
  }

 private:
  absl::Status MakeSession();
  void Log(const std::string& line);
  bool StopRequested() const;
  absl::Status Step(int64_t step);
  absl::Status EndEpoch(int64_t step);
  absl::Status Save(int64_t step);
  absl::Status WriteTrace(int64_t step);
  absl::Status Finish(int64_t step);

  distribute::Strategy* const strategy_;
  const StepGraph g_;
  const FitOptions& o_;
  const LoopHooks hooks_;
  FitResult* const r_;
  const int worker_index_;  // LoopHooks::across_workers's, else the strategy's
  const bool chief_;
  FILE* const log_;
  std::unique_ptr<InlinePool> inline_pool_ = std::make_unique<InlinePool>();  // outlives the session
  std::unique_ptr<Session> session_;
  int inter_op_threads_ = 0;
  std::unique_ptr<CheckpointManager> manager_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // the chief's, with tensorboard_dir
  std::unique_ptr<PreemptionWatcher> preemption_;
  StepTracer tracer_;
  int64_t trace_begin_ = 0, trace_end_ = 0;  // traced steps [begin, end), 0-based
  bool trace_written_ = false;
  bool preempted_ = false;
  int64_t saved_step_ = -1;
  int64_t evaluated_at_ = -1;
  double learning_rate_ = 0;  // the last step's, when fetched
  double epoch_loss_ = 0;
  int64_t epoch_steps_ = 0;
  Clock::time_point epoch_start_;
  // The signals' length (1 + workers' slots) and, from the last step, this
  // worker's time in collectives and every worker's (seconds).
  int64_t signals_ = 1;
  double recorder_mark_ = 0, cpu_mark_ = 0;
  double my_wait_ = 0, my_cpu_wait_ = 0;
  std::vector<double> waits_, cpu_waits_;
  std::unique_ptr<StragglerDetector> straggler_;
  std::vector<std::string> task_names_;  // by worker index
};

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_LOOP_H_
