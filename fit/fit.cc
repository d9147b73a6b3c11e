#include "fit/fit.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "fit/checkpoint.h"
#include "fit/loop.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "runtime/inline_pool.h"
#include "runtime/session.h"
#include "strategy/distributed_dataset.h"
#include "strategy/replica_context.h"
#include "train/data/transforms.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/phase.h"
#include "train/variable.h"

namespace strata {
namespace fit {
namespace {

constexpr int64_t kEvalBatch = 1024;

// One example's component: its dtype and shape.
struct ComponentSpec {
  DataType dtype = DT_INVALID;
  TensorShape shape;
};

// The (features, label) specs of `ds`'s first example.
absl::StatusOr<std::vector<ComponentSpec>> PeekSpecs(const data::DatasetPtr& ds, const char* which) {
  if (ds == nullptr) return absl::InvalidArgumentError(absl::StrCat("Fit: no ", which, " data"));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it, data::DatasetIterator::Create(ds));
  data::Example first;
  bool end = false;
  STRATA_RETURN_IF_ERROR(it->GetNext(&first, &end));
  if (end) return absl::InvalidArgumentError(absl::StrCat("Fit: the ", which, " data has no examples"));
  if (first.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("Fit: ", which, " examples must be (features, label), got ",
                                                   first.size(), " components"));
  }
  std::vector<ComponentSpec> specs;
  for (const Tensor& t : first) specs.push_back({t.dtype(), t.shape()});
  return specs;
}

// [-1, example dims...]: a batch of examples.
PartialTensorShape BatchOf(const TensorShape& example) {
  std::vector<int64_t> dims = {-1};
  for (int d = 0; d < example.dims(); ++d) dims.push_back(example.dim_size(d));
  return PartialTensorShape(dims);
}

absl::StatusOr<double> ScalarValue(const Tensor& t, const std::string& what) {
  if (t.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  switch (t.dtype()) {
    case DT_FLOAT: return static_cast<double>(*t.data<float>());
    case DT_DOUBLE: return *t.data<double>();
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, " must be float or double, got ", DataTypeString(t.dtype())));
  }
}

// A scalar loss or metric of a floating type, or InvalidArgument naming it.
absl::Status CheckScalar(const Output& o, const std::string& what) {
  if (!o.ok()) return absl::InvalidArgumentError(absl::StrCat("Fit: ", what, " is a null Output"));
  const DataType dt = o.node()->output_type(o.index());
  if (dt != DT_FLOAT && dt != DT_DOUBLE) {
    return absl::InvalidArgumentError(absl::StrCat("Fit: ", what, " must be float or double, got ", DataTypeString(dt)));
  }
  const PartialTensorShape& shape = o.node()->output_shape(o.index());
  if (shape.dims() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("Fit: ", what, " must be a scalar (the mean over the batch), got shape ",
                                                   shape.DebugString()));
  }
  return absl::OkStatus();
}

// The graph of one Fit: the step on every replica, the evaluation, the
// checkpoint.
struct FitGraph {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<distribute::DistributedDataset> input;
  // The step's [loss, preempted], means over every replica of every worker:
  // each local replica is fed this worker's preemption flag (0 or 1), so a
  // mean above 0 tells every worker, after the same step, that one of them
  // was asked to stop; it rides on the loss's all-reduce.
  Output loss_and_flag;
  std::vector<std::string> preempt_feeds;  // one per local replica
  Node* train_op = nullptr;
  Output learning_rate;  // the step's (DT_DOUBLE), for reports
  Output eval_x, eval_y, eval_prediction;
  std::vector<std::pair<std::string, Output>> eval_values;  // "val_loss", "val_<metric>"
  Node* init = nullptr;
  std::unique_ptr<Checkpoint> checkpoint;
};

// The model's predictions for `features`: `predict`, or its stages one
// after the other where it has only those.
absl::StatusOr<Output> Predict(const Model& model, const Scope& scope, Output features) {
  if (model.predict) return model.predict(scope, features);
  OutputList h = {features};
  for (size_t s = 0; s < model.stages.size(); ++s) {
    absl::StatusOr<OutputList> out = model.stages[s](scope, h);
    if (!out.ok()) return AnnotateStatus(out.status(), absl::StrCat("stage ", s, ": "));
    h = *std::move(out);
  }
  if (h.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last stage returned ", h.size(), " tensors instead of the predictions"));
  }
  return h[0];
}

// The pipelined step of Model::stages on `scope`'s replica (strategy/pipeline.h).
absl::StatusOr<distribute::PipelineStep> BuildPipelinedStep(const Scope& scope, const Model& model,
                                                            train::Optimizer* optimizer,
                                                            const std::vector<Output>& in,
                                                            const FitOptions& o) {
  distribute::PipelineOptions po = o.pipeline;
  if (po.stage_devices.empty()) {
    for (size_t s = 0; s < model.stages.size(); ++s) {
      po.stage_devices.push_back(absl::StrCat("/device:CPU:", s));
    }
  }
  auto loss = [&model](const Scope& s, Output labels, Output predictions) -> Output {
    absl::StatusOr<Output> l = model.loss(s, labels, predictions);
    absl::Status checked = l.ok() ? CheckScalar(*l, "the loss") : l.status();
    if (!checked.ok()) {
      s.UpdateStatus(AnnotateStatus(checked, "Fit: the loss: "));
      return Output();
    }
    return *l;
  };
  absl::StatusOr<distribute::PipelineStep> p =
      distribute::BuildPipelineTrainStep(scope, model.stages, {in[0]}, in[1], loss, optimizer, po);
  if (!p.ok()) return AnnotateStatus(p.status(), "Fit: the model's stages: ");
  return p;
}

absl::Status BuildEvaluation(const Model& model, const std::vector<ComponentSpec>& specs, FitGraph* g) {
  const Scope eval = g->root.NewSubScope("eval");
  g->eval_x = ops::Placeholder(eval.WithOpName("x"), specs[0].dtype, BatchOf(specs[0].shape));
  g->eval_y = ops::Placeholder(eval.WithOpName("y"), specs[1].dtype, BatchOf(specs[1].shape));
  absl::StatusOr<Output> p = Predict(model, eval, g->eval_x);
  if (!p.ok()) return AnnotateStatus(p.status(), "Fit: the model (evaluation): ");
  g->eval_prediction = *p;
  absl::StatusOr<Output> l = model.loss(eval.NewSubScope("loss"), g->eval_y, *p);
  if (!l.ok()) return AnnotateStatus(l.status(), "Fit: the loss (evaluation): ");
  STRATA_RETURN_IF_ERROR(CheckScalar(*l, "the loss"));
  g->eval_values.emplace_back("val_loss", *l);
  for (const Metric& m : model.metrics) {
    if (m.name.empty() || !m.fn) return absl::InvalidArgumentError("Fit: a metric needs a name and a function");
    absl::StatusOr<Output> v = m.fn(eval.NewSubScope(m.name), g->eval_y, *p);
    if (!v.ok()) return AnnotateStatus(v.status(), absl::StrCat("Fit: metric '", m.name, "': "));
    STRATA_RETURN_IF_ERROR(CheckScalar(*v, absl::StrCat("metric '", m.name, "'")));
    g->eval_values.emplace_back(absl::StrCat("val_", m.name), *v);
  }
  return g->root.status();
}

// Whether batches may not split evenly over the replicas (a partial last
// batch, a global batch that is not a multiple of the replicas): then
// each replica's loss is weighted by its share.
bool Weighted(const FitOptions& o, const distribute::Strategy& s) {
  return !o.drop_remainder || o.global_batch_size % s.num_replicas_in_sync() != 0;
}

absl::StatusOr<std::unique_ptr<FitGraph>> BuildGraph(distribute::Strategy* strategy, const Model& model,
                                                     train::Optimizer* optimizer, data::DatasetPtr batches,
                                                     const std::vector<ComponentSpec>& specs,
                                                     const FitOptions& o) {
  auto g = std::make_unique<FitGraph>();
  distribute::StrategyScope in_scope = strategy->Scope();
  distribute::DistributeOptions options;
  const bool weighted = Weighted(o, *strategy);
  if (weighted) {
    options.partial_batches = distribute::DistributeOptions::PartialBatches::kWeighted;
    // The weights need the step's example count, which every worker knows
    // only when each reads every global batch.
    options.auto_shard_policy = data::AutoShardPolicy::kData;
  }
  STRATA_ASSIGN_OR_RETURN(g->input, strategy->DistributeDataset(std::move(batches),
                                                                {{"x", specs[0].dtype, BatchOf(specs[0].shape)},
                                                                 {"y", specs[1].dtype, BatchOf(specs[1].shape)}},
                                                                options));
  STRATA_ASSIGN_OR_RETURN(std::vector<distribute::PerReplica> inputs, g->input->Inputs(g->root));
  if (weighted) inputs.push_back(g->input->weights());
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    train::TrainingPhase training(true);  // Dropout drops, BatchNormalization uses the batch's statistics
    if (!model.stages.empty()) {          // one replica: its share of a partial batch is all of it
      STRATA_ASSIGN_OR_RETURN(distribute::PipelineStep p,
                              BuildPipelinedStep(ctx.scope(), model, optimizer, in, o));
      return distribute::ReplicaResult{
          {StackPreemptionFlag(ctx.scope(), p.loss, &g->preempt_feeds, strategy->num_workers())},
          {p.train_op}};
    }
    absl::StatusOr<Output> p = model.predict(ctx.scope(), in[0]);
    if (!p.ok()) return AnnotateStatus(p.status(), "Fit: the model: ");
    if (!p->ok()) return absl::InvalidArgumentError("Fit: the model returned a null prediction");
    absl::StatusOr<Output> l = model.loss(ctx.scope().NewSubScope("loss"), in[1], *p);
    if (!l.ok()) return AnnotateStatus(l.status(), "Fit: the loss: ");
    STRATA_RETURN_IF_ERROR(ctx.scope().status());
    STRATA_RETURN_IF_ERROR(CheckScalar(*l, "the loss"));
    if (weighted) {
      *l = distribute::WeightedLoss(ctx.scope().NewSubScope("loss"), *l, in[2]);
      STRATA_RETURN_IF_ERROR(ctx.scope().status());
    }
    STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(ctx.scope(), *l, optimizer));
    return distribute::ReplicaResult{{StackPreemptionFlag(ctx.scope(), *l, &g->preempt_feeds, strategy->num_workers())}, {train_op}};
  };
  STRATA_ASSIGN_OR_RETURN(distribute::RunResult step, strategy->Run(g->root, step_fn, inputs));
  STRATA_ASSIGN_OR_RETURN(g->loss_and_flag, strategy->Reduce(g->root.NewSubScope("loss"),
                                                             distribute::ReduceOp::kMean, step.values[0]));
  g->train_op = step.op;
  g->learning_rate = optimizer->applied_learning_rate();
  // Built also without validation examples: FitResult::predictor runs it.
  STRATA_RETURN_IF_ERROR(BuildEvaluation(model, specs, g.get()));
  g->init = train::GlobalVariablesInitializer(g->root);
  STRATA_RETURN_IF_ERROR(g->root.status());
  STRATA_ASSIGN_OR_RETURN(g->checkpoint, Checkpoint::Create(g->root, train::GlobalVariables(g->root)));
  return g;
}

// The loss and metrics over every validation example (means of the batch
// means, weighted by the batches' sizes).
absl::StatusOr<Logs> Evaluate(Session* session, const FitGraph& g, const data::DatasetPtr& validation) {
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr batches, data::Batch(validation, kEvalBatch, /*drop_remainder=*/false));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it, data::DatasetIterator::Create(batches));
  std::vector<std::string> fetches;
  for (const auto& [name, value] : g.eval_values) fetches.push_back(value.name());
  std::vector<double> sums(fetches.size(), 0);
  int64_t rows = 0;
  for (;;) {
    data::Example batch;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    if (end) break;
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(
        session->Run({{g.eval_x.name(), batch[0]}, {g.eval_y.name(), batch[1]}}, fetches, {}, &out));
    const int64_t n = batch[0].dim_size(0);
    for (size_t i = 0; i < out.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(double v, ScalarValue(out[i], g.eval_values[i].first));
      sums[i] += v * static_cast<double>(n);
    }
    rows += n;
  }
  Logs logs;
  for (size_t i = 0; i < sums.size(); ++i) logs[g.eval_values[i].first] = rows > 0 ? sums[i] / rows : 0;
  return logs;
}

absl::Status ValidateOptions(const FitOptions& o, const distribute::Strategy& s) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("Fit: ", what)); };
  if (o.global_batch_size < 1) return bad("global_batch_size must be >= 1");
  if (o.epochs < 0 || o.steps < 0) return bad("epochs and steps must be >= 0");
  if (o.epochs == 0 && o.steps == 0) return bad("neither epochs nor steps is set");
  if (o.save_every_steps < 0) return bad("save_every_steps must be >= 0");
  if (o.save_every_steps > 0 && o.checkpoint_dir.empty()) return bad("save_every_steps needs checkpoint_dir");
  if (o.max_to_keep < 0) return bad("max_to_keep must be >= 0");
  if (o.prefetch < 0 || o.inter_op_threads < 0 || o.log_every_steps < 0) {
    return bad("prefetch, inter_op_threads and log_every_steps must be >= 0");
  }
  if (o.trace_steps < 1 || o.trace_warmup_steps < 0) {
    return bad("trace_steps must be >= 1 and trace_warmup_steps >= 0");
  }
  if (o.tensorboard_update_steps < 0) return bad("tensorboard_update_steps must be >= 0");
  return absl::OkStatus();
}

// The training examples as the step reads them: shuffled per epoch,
// batched into global batches, repeated, prefetched.
absl::StatusOr<data::DatasetPtr> TrainBatches(data::DatasetPtr train, const FitOptions& o) {
  if (o.shuffle) {
    STRATA_ASSIGN_OR_RETURN(train, data::Shuffle(train, o.seed));
  }
  STRATA_ASSIGN_OR_RETURN(train, data::Batch(train, o.global_batch_size, o.drop_remainder));
  STRATA_ASSIGN_OR_RETURN(train, data::Repeat(train));
  if (o.prefetch > 0) {
    STRATA_ASSIGN_OR_RETURN(train, data::Prefetch(train, o.prefetch));
  }
  return train;
}

// Beyond the variables, a checkpoint holds the input's position and each
// callback's state.
absl::Status TrackState(FitGraph* g, const FitOptions& o) {
  distribute::DistributedDataset* input = g->input.get();
  STRATA_RETURN_IF_ERROR(g->checkpoint->TrackString(
      "fit/input", [input]() { return input->SaveState(); },
      [input](const std::string& s) { return input->RestoreState(s); }));
  for (size_t i = 0; i < o.callbacks.size(); ++i) {
    Callback* cb = o.callbacks[i];
    STRATA_RETURN_IF_ERROR(g->checkpoint->TrackString(
        absl::StrCat("fit/callback_", i), [cb]() -> absl::StatusOr<std::string> { return cb->SaveState(); },
        [cb](const std::string& s) { return cb->RestoreState(s); }));
  }
  return absl::OkStatus();
}

class FitPredictor : public Predictor {
 public:
  FitPredictor(std::unique_ptr<FitGraph> g, std::pair<std::unique_ptr<InlinePool>, std::unique_ptr<Session>> s)
      : g_(std::move(g)), pool_(std::move(s.first)), s_(std::move(s.second)) {}
  absl::StatusOr<Tensor> Predict(const Tensor& features) override {
    std::vector<Tensor> out;
    absl::Status st = s_->Run({{g_->eval_x.name(), features}}, {g_->eval_prediction.name()}, {}, &out);
    if (!st.ok()) return AnnotateStatus(st, "Predictor: ");
    return out[0];
  }

 private:
  const std::unique_ptr<FitGraph> g_;
  const std::unique_ptr<InlinePool> pool_;  // outlives the session
  const std::unique_ptr<Session> s_;
};

// A pipelined model's options: one replica, micro-batches that divide
// every batch of an epoch (its last partial one too, when it trains).
absl::Status CheckPipelined(const distribute::Strategy& strategy, const FitOptions& o,
                            int64_t examples) {
  if (strategy.num_replicas_in_sync() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Fit: a model of stages trains under a strategy of one replica (its stages are the "
        "devices), not ",
        strategy.num_replicas_in_sync()));
  }
  const int m = o.pipeline.micro_batches;
  if (m < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fit: pipeline.micro_batches must be >= 1, got ", m));
  }
  const int64_t last = examples > 0 && !o.drop_remainder ? examples % o.global_batch_size : 0;
  if (o.global_batch_size % m != 0 || last % m != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fit: pipeline.micro_batches = ", m, " does not divide ",
                     o.global_batch_size % m != 0
                         ? absl::StrCat("global_batch_size ", o.global_batch_size)
                         : absl::StrCat("an epoch's last batch of ", last,
                                        " examples (set drop_remainder, or another batch size)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<FitResult> FitOnce(distribute::Strategy* strategy, const Model& model, train::Optimizer* optimizer,
                                  data::DatasetPtr train, data::DatasetPtr validation, const FitOptions& o) {
  if (strategy == nullptr || optimizer == nullptr) return absl::InvalidArgumentError("Fit: no strategy or optimizer");
  if ((!model.predict && model.stages.empty()) || !model.loss) {
    return absl::InvalidArgumentError("Fit: the model needs predict (or stages) and loss");
  }
  STRATA_RETURN_IF_ERROR(ValidateOptions(o, *strategy));
  STRATA_ASSIGN_OR_RETURN(std::vector<ComponentSpec> specs, PeekSpecs(train, "training"));
  if (validation != nullptr) {
    STRATA_ASSIGN_OR_RETURN(std::vector<ComponentSpec> vspecs, PeekSpecs(validation, "validation"));
    for (int i = 0; i < 2; ++i) {
      if (vspecs[i].dtype != specs[i].dtype || vspecs[i].shape != specs[i].shape) {
        return absl::InvalidArgumentError("Fit: the validation examples differ in dtype or shape from the training ones");
      }
    }
  }
  // Steps: an epoch is every global batch of the training examples (every
  // full one with drop_remainder).
  const int64_t examples = train->Cardinality();
  const int64_t steps_per_epoch =
      examples < 0 ? 0 : (examples + (o.drop_remainder ? 0 : o.global_batch_size - 1)) / o.global_batch_size;
  if (examples >= 0 && steps_per_epoch == 0 && o.drop_remainder) {
    return absl::InvalidArgumentError(absl::StrCat("Fit: global_batch_size ", o.global_batch_size, " is larger than the ",
                                                   examples, " training examples"));
  }
  if (o.steps == 0 && steps_per_epoch == 0) {
    return absl::InvalidArgumentError("Fit: the training data's size is unknown: set steps");
  }
  if (!model.stages.empty()) STRATA_RETURN_IF_ERROR(CheckPipelined(*strategy, o, examples));
  FitResult result;
  result.total_steps = o.steps > 0 ? o.steps : o.epochs * steps_per_epoch;
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr batches, TrainBatches(train, o));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<FitGraph> g,
                          BuildGraph(strategy, model, optimizer, std::move(batches), specs, o));
  STRATA_RETURN_IF_ERROR(TrackState(g.get(), o));
  StepGraph step;
  step.root = &g->root;
  step.input = g->input.get();
  step.loss_and_flag = g->loss_and_flag;
  step.preempt_feeds = g->preempt_feeds;
  step.train_op = g->train_op;
  step.learning_rate = g->learning_rate;
  step.init = g->init;
  step.checkpoint = g->checkpoint.get();
  LoopHooks hooks;
  hooks.steps_per_epoch = steps_per_epoch;
  if (validation != nullptr) {
    hooks.evaluate = [&g, &validation](Session* s) { return Evaluate(s, *g, validation); };
  }
  TrainLoop loop(strategy, step, o, std::move(hooks), &result);
  STRATA_RETURN_IF_ERROR(loop.Start());
  STRATA_RETURN_IF_ERROR(loop.Run());
  if (!result.preempted) result.predictor = std::make_shared<FitPredictor>(std::move(g), loop.ReleaseSession());
  return result;
}

}  // namespace

absl::StatusOr<FitResult> Fit(distribute::Strategy* strategy, const Model& model, train::Optimizer* optimizer,
                              data::DatasetPtr train, data::DatasetPtr validation, const FitOptions& o) {
  absl::StatusOr<FitResult> r = FitOnce(strategy, model, optimizer, std::move(train), std::move(validation), o);
  if (!r.ok()) return ReportWorkerError(strategy, r.status());
  return r;
}

Metric MeanSquaredErrorMetric(std::string name) {
  return {std::move(name), [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
            Output v = train::MeanSquaredError(s, y, p);
            STRATA_RETURN_IF_ERROR(s.status());
            return v;
          }};
}

Metric AccuracyMetric(std::string name) {
  return {std::move(name), [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
            Output v = train::Accuracy(s, y, p);
            STRATA_RETURN_IF_ERROR(s.status());
            return v;
          }};
}

void EarlyStopping::OnEpochEnd(int64_t epoch, const Logs& logs) {
  auto it = logs.find(monitor_);
  if (it == logs.end()) return;
  if (!have_best_ || it->second < best_ - min_delta_) {
    best_ = it->second;
    have_best_ = true;
    wait_ = 0;
    return;
  }
  if (++wait_ >= patience_) {
    stopped_epoch_ = epoch;
    RequestStop();
  }
}

std::string EarlyStopping::SaveState() const {
  if (!have_best_) return "";
  char best[64];
  std::snprintf(best, sizeof(best), "%.17g", best_);
  return absl::StrCat(best, " ", wait_);
}

absl::Status EarlyStopping::RestoreState(const std::string& state) {
  if (state.empty()) {
    have_best_ = false;
    wait_ = 0;
    return absl::OkStatus();
  }
  std::vector<std::string> parts = absl::StrSplit(state, ' ');
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &best_) || !absl::SimpleAtoi(parts[1], &wait_)) {
    return absl::DataLossError(absl::StrCat("EarlyStopping: bad state '", state, "'"));
  }
  have_best_ = true;
  return absl::OkStatus();
}

}  // namespace fit
}  // namespace strata
