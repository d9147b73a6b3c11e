#include "fit/loop.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/run_queue.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/device_name.h"
#include "strategy/multi_worker_mirrored_strategy.h"

namespace strata {
namespace fit {
namespace {

// SIGTERM (a scheduler's preemption notice) while a loop runs: the handler
// only sets a flag, which the loop sends to every worker with the next step.
std::atomic<bool> g_sigterm{false};
extern "C" void OnSigterm(int) { g_sigterm.store(true); }

std::string LogsJson(const Logs& logs) {
  std::string out;
  for (const auto& [name, value] : logs) absl::StrAppend(&out, ",\"", name, "\":", JsonNumber(value));
  return out;
}

}  // namespace

class PreemptionWatcher {
 public:
  PreemptionWatcher() {
    g_sigterm.store(false);
    struct sigaction sa = {};
    sa.sa_handler = OnSigterm;
    sigemptyset(&sa.sa_mask);
    installed_ = sigaction(SIGTERM, &sa, &previous_) == 0;
  }
  ~PreemptionWatcher() {
    if (installed_) sigaction(SIGTERM, &previous_, nullptr);
  }
  PreemptionWatcher(const PreemptionWatcher&) = delete;
  PreemptionWatcher& operator=(const PreemptionWatcher&) = delete;
  bool requested() const { return g_sigterm.load(); }

 private:
  struct sigaction previous_ = {};
  bool installed_ = false;
};

absl::Status ReportWorkerError(distribute::Strategy* strategy, const absl::Status& error) {
  auto* multi_worker = dynamic_cast<distribute::MultiWorkerMirroredStrategy*>(strategy);
  if (error.ok() || multi_worker == nullptr) return error;
  const absl::Status cluster = multi_worker->cluster_error();
  if (!cluster.ok()) return absl::Status(cluster.code(), absl::StrCat("cluster error: ", cluster.message()));
  const absl::Status mine =
      multi_worker->NameTasks(AnnotateStatus(error, absl::StrCat(multi_worker->task_name(), ": ")));
  multi_worker->ReportError(mine);
  return mine;
}

Output StackPreemptionFlag(const Scope& scope, Output loss, std::vector<std::string>* preempt_feeds,
                           int num_workers, const std::vector<std::string>& worker_devices) {
  if (!scope.ok() || !loss.ok()) return Output();
  const DataType dt = loss.node()->output_type(loss.index());
  const int64_t n = 1 + 2 * std::max(num_workers, 1);
  Output signals;
  if (worker_devices.empty()) {
    signals = ops::Placeholder(scope.WithOpName("preempted"), dt, PartialTensorShape({n}));
    preempt_feeds->push_back(signals.name());
  } else {
    OutputList each;
    for (size_t w = 0; w < worker_devices.size(); ++w) {
      // A feed goes where its consumer runs: an Identity on the worker's
      // device takes it there.
      const Scope there = scope.WithDevice(worker_devices[w]);
      Output fed = ops::Placeholder(there.WithOpName(absl::StrCat("preempted_", w)), dt,
                                    PartialTensorShape({n}));
      preempt_feeds->push_back(fed.name());
      each.push_back(ops::Identity(there.WithOpName(absl::StrCat("preempted_", w, "/here")), fed));
    }
    signals = ops::AddN(scope.WithOpName("preempted"), each);
  }
  Output loss1 = ops::Reshape(scope.WithOpName("loss_1"), loss, ops::Const<int32_t>(scope, {1}));
  return ops::Concat(scope.WithOpName("loss_and_flag"), {loss1, signals},
                     ops::Const<int32_t>(scope, 0));
}

TrainLoop::TrainLoop(distribute::Strategy* strategy, const StepGraph& graph,
                     const FitOptions& options, LoopHooks hooks, FitResult* result)
    : strategy_(strategy),
      g_(graph),
      o_(options),
      hooks_(std::move(hooks)),
      r_(result),
      worker_index_(hooks_.across_workers.has_value() ? hooks_.across_workers->worker_index
                                                      : strategy->worker_index()),
      chief_(worker_index_ == 0),
      log_(chief_ && !options.quiet ? options.log : nullptr) {}

TrainLoop::~TrainLoop() = default;

namespace {

// How many of this process's devices the graph's nodes ask for (a
// pipeline's stages, a mesh's replicas): "/cpu:1" and
// "/job:worker/replica:0/task:0/device:CPU:1" alike, another task's not.
int LocalDevicesAskedFor(const Graph& graph, const DeviceOptions& machine) {
  absl::flat_hash_set<std::string> devices;
  for (const Node* n : graph.nodes()) {
    if (n->requested_device().empty()) continue;
    absl::StatusOr<DeviceName> d = DeviceName::Parse(n->requested_device());
    if (!d.ok() || !d->has_type) continue;  // placement names a bad one
    if ((d->has_job && d->job != machine.job) || (d->has_task && d->task != machine.task)) continue;
    devices.insert(absl::StrCat(d->type, ":", d->has_id ? d->id : 0));
  }
  return static_cast<int>(devices.size());
}

}  // namespace

absl::Status TrainLoop::MakeSession() {
  SessionOptions options = hooks_.across_workers.has_value() ? hooks_.across_workers->session
                                                             : strategy_->session_options();
  // A thread per local device the step runs on, so that the replicas'
  // partitions (a pipeline's stages) run side by side: the inline pool runs
  // one op at a time, and a pipeline's stages would take turns. One local
  // device (a stage of a pipeline across workers too) stays inline: the
  // executor runs a ready _Send before the rest (runtime/executor.cc), and
  // the session continues a step across tasks on a thread of its own after
  // each tensor from another task (runtime/session.h).
  const int devices = std::max(strategy_->num_local_replicas(),
                               LocalDevicesAskedFor(*g_.root->graph(), options.devices));
  if (o_.inter_op_threads > 0) {
    options.inter_op_threads = o_.inter_op_threads;
  } else if (devices == 1) {
    options.inter_op_pool = inline_pool_.get();
  } else {
    options.inter_op_threads = devices;
  }
  inter_op_threads_ = options.inter_op_pool != nullptr ? 0 : options.inter_op_threads;
  STRATA_ASSIGN_OR_RETURN(session_, Session::Create(*g_.root, options));
  // The signals' length, from their placeholder (StackPreemptionFlag).
  if (!g_.preempt_feeds.empty()) {
    const std::string& feed = g_.preempt_feeds[0];
    const Node* n = g_.root->graph()->FindNode(feed.substr(0, feed.find(':')));
    if (n != nullptr) {
      auto shape = n->attrs().find("shape");
      if (shape != n->attrs().end() && shape->second.shape().dim_size() == 1 &&
          shape->second.shape().dim(0).size() > 0) {
        signals_ = shape->second.shape().dim(0).size();
      }
    }
  }
  if (strategy_->num_workers() > 1) {
    auto* multi_worker = dynamic_cast<distribute::MultiWorkerMirroredStrategy*>(strategy_);
    if (multi_worker != nullptr) task_names_ = multi_worker->worker_task_names();
    for (int w = static_cast<int>(task_names_.size()); w < strategy_->num_workers(); ++w) {
      task_names_.push_back(absl::StrCat("worker ", w));
    }
    straggler_ = std::make_unique<StragglerDetector>(strategy_->num_workers());
  }
  if (!o_.checkpoint_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(manager_, CheckpointManager::Create(g_.checkpoint, o_.checkpoint_dir, o_.max_to_keep));
  }
  return absl::OkStatus();
}

absl::Status TrainLoop::Start() {
  STRATA_RETURN_IF_ERROR(MakeSession());
  if (manager_ == nullptr) return session_->Run({}, {}, {g_.init->name()}, nullptr);
  STRATA_ASSIGN_OR_RETURN(Restored restored, manager_->RestoreOrInitialize(session_.get(), g_.init));
  for (const absl::Status& s : restored.skipped) Log(absl::StrCat("skipping checkpoint: ", s.ToString()));
  r_->start_step = restored.step;
  r_->resumed_from = restored.prefix;
  if (!restored.prefix.empty()) Log(absl::StrCat("resumed from ", restored.prefix, " at step ", restored.step));
  return absl::OkStatus();
}

absl::Status TrainLoop::StartFrom(std::unique_ptr<CheckpointReader> reader) {
  STRATA_RETURN_IF_ERROR(MakeSession());
  if (reader == nullptr) return session_->Run({}, {}, {g_.init->name()}, nullptr);
  STRATA_ASSIGN_OR_RETURN(r_->start_step, CheckpointStep(*reader));
  STRATA_RETURN_IF_ERROR(g_.checkpoint->Restore(session_.get(), *reader));
  r_->resumed_from = reader->prefix();
  Log(absl::StrCat("resumed from ", r_->resumed_from, " at step ", r_->start_step));
  return absl::OkStatus();
}

void TrainLoop::Log(const std::string& line) {
  if (log_ == nullptr) return;
  std::fprintf(log_, "%s: %s\n", hooks_.log_prefix.c_str(), line.c_str());
  std::fflush(log_);
}

bool TrainLoop::StopRequested() const {
  return std::any_of(o_.callbacks.begin(), o_.callbacks.end(), [](const Callback* c) { return c->stop_requested(); });
}

absl::Status TrainLoop::Run() {
  preemption_ = std::make_unique<PreemptionWatcher>();
  STRATA_ASSIGN_OR_RETURN(metrics_, MetricsWriter::Open(chief_ ? o_.metrics_out : ""));
  if (chief_ && !o_.tensorboard_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(tensorboard_, TensorBoardWriter::Create(o_.tensorboard_dir));
  }
  if (r_->start_step >= r_->total_steps) {
    Log(absl::StrCat("the checkpoint's step ", r_->start_step, " is not before the last step ", r_->total_steps,
                     "; nothing to train"));
  }
  if (!o_.trace_out.empty()) {
    // After the warm-up, or the run's last steps if it is shorter.
    trace_begin_ = std::max(r_->start_step, std::min(r_->start_step + o_.trace_warmup_steps,
                                                     r_->total_steps - o_.trace_steps));
    trace_end_ = std::min(r_->total_steps, trace_begin_ + o_.trace_steps);
  }
  ProgressLine progress(log_, log_ == nullptr, r_->start_step, r_->total_steps, o_.log_every_steps,
                        o_.global_batch_size);
  for (Callback* cb : o_.callbacks) cb->OnTrainBegin(r_->start_step, r_->total_steps);
  const Clock::time_point t0 = Clock::now();
  Clock::time_point prev = t0;
  epoch_start_ = t0;
  int64_t step = r_->start_step;
  while (step < r_->total_steps && !StopRequested() && !preempted_) {
    STRATA_RETURN_IF_ERROR(Step(step));
    ++step;
    if (!o_.trace_out.empty() && step == trace_end_) STRATA_RETURN_IF_ERROR(WriteTrace(step));
    const Clock::time_point now = Clock::now();
    const double dt = Seconds(now - prev);
    prev = now;
    const double rate = dt > 0 ? o_.global_batch_size / dt : 0;
    if (waits_.empty()) {
      metrics_->Step(step, r_->final_loss, rate, Seconds(now - t0));
    } else {
      metrics_->Step(step, r_->final_loss, rate, Seconds(now - t0),
                     {{"collective_wait_sec", waits_}, {"cpu_wait_sec", cpu_waits_}});
    }
    if (chief_ && straggler_ != nullptr && !waits_.empty()) {
      std::optional<std::string> report = straggler_->Add(waits_, cpu_waits_, dt, task_names_);
      if (report.has_value()) Log(*report);
    }
    progress.Update(step, r_->final_loss);
    if (!std::isfinite(r_->final_loss)) {
      return absl::FailedPreconditionError(absl::StrCat("the loss became ", r_->final_loss, " at step ", step,
                                                        hooks_.nonfinite_hint.empty() ? "" : "; ",
                                                        hooks_.nonfinite_hint));
    }
    if (tensorboard_ != nullptr && o_.tensorboard_update_steps > 0 && step % o_.tensorboard_update_steps == 0) {
      Logs logs = {{"loss", r_->final_loss}, {"examples_per_sec", rate}};
      if (g_.learning_rate.ok()) logs["learning_rate"] = learning_rate_;
      STRATA_RETURN_IF_ERROR(tensorboard_->Step(step, logs));
    }
    for (Callback* cb : o_.callbacks) cb->OnStepEnd(step, {{"loss", r_->final_loss}});
    epoch_loss_ += r_->final_loss;
    ++epoch_steps_;
    if (hooks_.steps_per_epoch > 0 && step % hooks_.steps_per_epoch == 0) STRATA_RETURN_IF_ERROR(EndEpoch(step));
    if (o_.save_every_steps > 0 && step % o_.save_every_steps == 0) STRATA_RETURN_IF_ERROR(Save(step));
    if (hooks_.after_step) {
      metrics_->Flush();
      hooks_.after_step(step);
    }
  }
  r_->final_step = step;
  r_->preempted = preempted_;
  r_->stopped_early = step < r_->total_steps && !preempted_;
  if (preempted_) Log(absl::StrCat("preempted: saving at step ", step, " and stopping"));
  r_->train_seconds = Seconds(Clock::now() - t0);
  r_->examples_per_sec =
      r_->train_seconds > 0 && step > r_->start_step
          ? static_cast<double>(step - r_->start_step) * o_.global_batch_size / r_->train_seconds
          : 0;
  return Finish(step);
}

// One step (0-based `step`): the next global batch and this worker's
// preemption flag in, the step's loss and whether any worker is being
// preempted out.
absl::Status TrainLoop::Step(int64_t step) {
  // What a hang diagnosis reports of this task (runtime/collective/
  // flight_recorder.h): the step as the progress line counts it, and where
  // in it the task is.
  FlightRecorder& recorder = FlightRecorder::Process();
  recorder.SetStep(step + 1);
  recorder.SetActivity("input pipeline");
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool end = false;
  STRATA_RETURN_IF_ERROR(g_.input->GetNext(&feeds, &end));
  recorder.SetActivity("step");
  if (end) return absl::InternalError("the repeated input pipeline ended");
  const DataType dt = g_.loss_and_flag.node()->output_type(g_.loss_and_flag.index());
  std::vector<double> signals(static_cast<size_t>(signals_), 0.0);
  signals[0] = preemption_->requested() ? 1 : 0;
  const int workers = strategy_->num_workers();
  const bool has_waits = signals_ == 1 + 2 * workers;
  if (has_waits) {
    signals[1 + strategy_->worker_index()] = my_wait_;
    signals[1 + workers + strategy_->worker_index()] = my_cpu_wait_;
  }
  Tensor fed = dt == DT_DOUBLE ? Tensor::FromVector<double>(signals)
                               : Tensor::FromVector<float>(std::vector<float>(signals.begin(), signals.end()));
  for (const std::string& name : g_.preempt_feeds) feeds.emplace_back(name, fed);
  const bool traced = !o_.trace_out.empty() && step >= trace_begin_ && step < trace_end_;
  RunOptions ro;
  ro.tracer = traced ? &tracer_ : nullptr;
  const int64_t t0 = traced ? StepTracer::NowNanos() : 0;
  const size_t first_event = traced ? tracer_.num_events() : 0;
  std::vector<Tensor> out;
  std::vector<std::string> fetches = {g_.loss_and_flag.name()};
  const bool fetch_rate = tensorboard_ != nullptr && g_.learning_rate.ok();
  if (fetch_rate) fetches.push_back(g_.learning_rate.name());
  STRATA_RETURN_IF_ERROR(session_->Run(ro, feeds, fetches, {g_.train_op->name()}, &out, nullptr));
  if (traced) {
    tracer_.RecordSpan(absl::StrCat("step ", step + 1), t0, StepTracer::NowNanos());
    if (hooks_.traced_step) hooks_.traced_step(&tracer_, first_event);
  }
  if (fetch_rate) learning_rate_ = *out[1].data<double>();
  const Tensor& v = out[0];
  auto at = [&](int64_t i) { return dt == DT_DOUBLE ? v.data<double>()[i] : v.data<float>()[i]; };
  r_->final_loss = at(0);
  preempted_ = at(1) > 0;
  // Each worker's slot is averaged over every replica; it alone fills it.
  waits_.clear();
  cpu_waits_.clear();
  if (has_waits && workers > 1) {
    for (int w = 0; w < workers; ++w) {
      waits_.push_back(at(2 + w) * workers);
      cpu_waits_.push_back(at(2 + workers + w) * workers);
    }
  }
  const double mark = recorder.completed_seconds();
  my_wait_ = mark - recorder_mark_;
  recorder_mark_ = mark;
  CountThisThreadsRunQueueDelay();
  const double cpu_mark = CountedRunQueueSeconds();
  my_cpu_wait_ = cpu_mark - cpu_mark_;
  cpu_mark_ = cpu_mark;
  recorder.SetActivity("between steps (metrics, callbacks, checkpoints)");
  return absl::OkStatus();
}

absl::Status TrainLoop::EndEpoch(int64_t step) {
  Logs logs = {{"loss", epoch_loss_ / static_cast<double>(epoch_steps_)}};
  const Clock::time_point now = Clock::now();
  const double epoch_seconds = Seconds(now - epoch_start_);
  epoch_start_ = now;
  if (hooks_.evaluate) {
    STRATA_ASSIGN_OR_RETURN(r_->validation, hooks_.evaluate(session_.get()));
    logs.insert(r_->validation.begin(), r_->validation.end());
    evaluated_at_ = step;
  }
  const int64_t epoch = step / hooks_.steps_per_epoch;
  metrics_->Line(absl::StrCat("{\"epoch\":", epoch, ",\"step\":", step, LogsJson(logs), "}"));
  if (tensorboard_ != nullptr) {
    Logs train = {{"loss", logs["loss"]},
                  {"examples_per_sec", epoch_seconds > 0 ? epoch_steps_ * o_.global_batch_size / epoch_seconds : 0}};
    if (g_.learning_rate.ok()) train["learning_rate"] = learning_rate_;
    STRATA_RETURN_IF_ERROR(tensorboard_->Epoch(epoch, train, hooks_.evaluate ? r_->validation : Logs()));
  }
  for (Callback* cb : o_.callbacks) cb->OnEpochEnd(epoch, logs);
  epoch_loss_ = 0;
  epoch_steps_ = 0;
  return absl::OkStatus();
}

// The chief writes the checkpoints; where the state is sharded over the
// workers, every worker writes its shard.
absl::Status TrainLoop::Save(int64_t step) {
  if (manager_ == nullptr || saved_step_ == step) return absl::OkStatus();
  if (!chief_ && hooks_.across_workers.has_value()) {
    // The chief's reads run partitions here too: run the same Session::Run
    // (and drop what it read).
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::map<std::string, std::string> metadata;
    STRATA_RETURN_IF_ERROR(manager_->checkpoint().Collect(session_.get(), &tensors, &metadata));
    saved_step_ = step;
    return absl::OkStatus();
  }
  if (!chief_) {
    if (manager_->checkpoint().every_process_saves()) {
      STRATA_RETURN_IF_ERROR(manager_->SaveShard(session_.get(), step));
      saved_step_ = step;
    }
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(r_->final_checkpoint, manager_->Save(session_.get(), step));
  saved_step_ = step;
  metrics_->Flush();
  return absl::OkStatus();
}

// This worker's trace: trace_out on the chief, with ".worker<i>" before the
// extension on worker i.
absl::Status TrainLoop::WriteTrace(int64_t step) {
  trace_written_ = true;
  r_->traced_steps = std::max<int64_t>(0, std::min(step, trace_end_) - trace_begin_);
  if (r_->traced_steps == 0) return absl::OkStatus();
  const std::string path = chief_ ? o_.trace_out : WorkerPath(o_.trace_out, worker_index_);
  STRATA_RETURN_IF_ERROR(AnnotateStatus(tracer_.WriteChromeTrace(path), "trace_out: "));
  Log(absl::StrCat("wrote the trace of steps ", trace_begin_ + 1, "-", trace_begin_ + r_->traced_steps, " to ", path));
  return absl::OkStatus();
}

absl::Status TrainLoop::Finish(int64_t step) {
  if (hooks_.evaluate && evaluated_at_ != step && !preempted_) {
    STRATA_ASSIGN_OR_RETURN(r_->validation, hooks_.evaluate(session_.get()));
  }
  STRATA_RETURN_IF_ERROR(Save(step));
  if (!o_.trace_out.empty() && !trace_written_) STRATA_RETURN_IF_ERROR(WriteTrace(step));
  Logs logs = r_->validation;
  logs["loss"] = r_->final_loss;
  if (hooks_.final_logs && !preempted_) {
    STRATA_ASSIGN_OR_RETURN(Logs extra, hooks_.final_logs(session_.get()));
    logs.insert(extra.begin(), extra.end());
  }
  for (Callback* cb : o_.callbacks) cb->OnTrainEnd(logs);
  metrics_->Line(absl::StrCat("{\"final\":true,\"step\":", step, ",\"start_step\":", r_->start_step, LogsJson(logs),
                              ",\"train_seconds\":", JsonNumber(r_->train_seconds),
                              ",\"examples_per_sec\":", JsonNumber(r_->examples_per_sec), "}"));
  metrics_->Flush();
  if (tensorboard_ != nullptr) STRATA_RETURN_IF_ERROR(tensorboard_->Close());
  preemption_.reset();
  return absl::OkStatus();
}

}  // namespace fit
}  // namespace strata
