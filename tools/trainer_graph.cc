#include "tools/trainer_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "fit/loop.h"
#include "fit/optimizers.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/pipeline.h"
#include "strategy/replica_context.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/learning_rate.h"
#include "train/losses.h"
#include "train/variable.h"

namespace strata {
namespace trainer {

namespace {

// The "optimizer" of a round's steps: adds each gradient, times 1/n, into an
// accumulator slot beside its variable (so on its ps task).
class Accumulate : public train::Optimizer {
 public:
  explicit Accumulate(int n)
      : Optimizer("accumulate", train::ConstantLearningRate(0)), scale_(1.0 / n) {}
  train::Variable* accumulator(const train::Variable* v) const { return GetSlot(v, "sum"); }

 protected:
  void CreateSlots(const Scope& scope, train::Variable* var) override {
    AddSlot(scope, var, "sum", "accumulated");
  }
  Node* ApplyDense(const Scope& scope, Output grad, train::Variable* var,
                   StepContext& ctx) override {
    const DataType dt = grad.node()->output_type(grad.index());
    return GetSlot(var, "sum")->AssignAdd(scope,
                                          ops::Mul(scope, grad, ctx.Constant("scale", scale_, dt)));
  }

 private:
  const double scale_;
};

// The round's update: `optimizer` applied to the accumulated gradients,
// then the accumulators zeroed.
absl::StatusOr<Node*> ApplyRound(const Scope& root, const train::Sequential& model,
                                 const Accumulate& accumulate, train::Optimizer* optimizer) {
  const Scope scope = root.NewSubScope("apply_round");
  std::vector<train::GradAndVar> sums;
  std::vector<std::pair<train::Variable*, Output>> reads;
  for (train::Variable* whole : model.variables()) {
    // A partitioned variable's gradients accumulate beside each partition.
    for (int p = 0; p < whole->num_partitions(); ++p) {
      train::Variable* v = whole->partition(p);
      train::Variable* sum = accumulate.accumulator(v);
      if (!v->trainable() || sum == nullptr) continue;
      Output read = sum->Read(scope);
      sums.push_back({read, v});
      reads.push_back({sum, read});
    }
  }
  // In the root scope: the optimizer's step counter and slots get the names
  // a synchronous run gives them ("SGD/iter", "dense/kernel/m").
  Node* apply = optimizer->ApplyGradients(root, sums);
  STRATA_RETURN_IF_ERROR(root.status());
  STRATA_RETURN_IF_ERROR(scope.status());
  std::vector<Node*> zeroed;
  const Scope after = scope.WithControlDependencies({apply});
  for (const auto& [sum, read] : reads) {
    zeroed.push_back(sum->Assign(after, ops::ZerosLike(after, read)));
  }
  Node* done = ops::NoOp(scope.WithOpName("apply_round").WithControlDependencies(zeroed));
  STRATA_RETURN_IF_ERROR(scope.status());
  return done;
}

// --model=embedding's first layer: feature j's value x (standardized)
// clipped to [-2, 2) falls in bucket b of `levels`; its id is
// (j * levels + b) * stride, the ids of every (feature, bucket) spread
// evenly over the table's rows.
class BucketIds : public train::Layer {
 public:
  BucketIds(int64_t levels, int64_t stride)
      : Layer("bucket_ids", 0), levels_(levels), stride_(stride) {}
  std::string kind() const override { return "bucket_ids"; }

 protected:
  absl::StatusOr<Output> Call(const Scope& s, Output x, const std::vector<Output>&) override {
    const float levels = static_cast<float>(levels_);
    Output clipped =
        ops::Minimum(s, ops::Maximum(s, x, ops::Const(s, -2.0f)), ops::Const(s, 1.999f));
    Output bucket = ops::Cast(s,
                              ops::Floor(s, ops::Mul(s, ops::AddV2(s, clipped, ops::Const(s, 2.0f)),
                                                     ops::Const(s, levels / 4))),
                              DT_INT64);
    const int64_t features = x.shape().dims() == 2 ? x.shape().dim_size(1) : -1;
    if (features < 1) return Error("expects [batch, features] with known features");
    Output first = ops::Range(s, ops::Const(s, int64_t{0}), ops::Const(s, features * levels_),
                              ops::Const(s, levels_));
    return ops::Mul(s, ops::AddV2(s, bucket, first), ops::Const(s, stride_));
  }

 private:
  const int64_t levels_, stride_;
};

absl::StatusOr<std::unique_ptr<train::Sequential>> MakeEmbeddingModel(const TrainerConfig& c,
                                                                      const TrainerData& d) {
  const int64_t ids = d.num_features * c.embedding_levels;
  if (ids > c.vocabulary) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocabulary=", c.vocabulary, " is less than the ", ids, " ids of ",
                     d.num_features, " features x --embedding_levels=", c.embedding_levels));
  }
  auto model = std::make_unique<train::Sequential>(c.seed);
  model->Add<BucketIds>(c.embedding_levels, c.vocabulary / ids);
  // Keras's Embedding initializer: Glorot's bound for a table of many
  // rows would be tiny.
  model->Add<train::EmbeddingBag>(c.vocabulary, c.embedding_dim)
      ->set_initializer(train::RandomUniform(-0.05, 0.05, c.seed));
  model->Add<train::Dense>(d.num_classes);
  return model;
}

// --pipeline_stages / --micro_batches: stage s on CPU device s, the layers
// split as evenly as they go (the first stages get one more where they do
// not divide).
// `summary`: the shape, for the log.
absl::StatusOr<distribute::PipelineOptions> PipelineFor(const TrainerConfig& c,
                                                        const train::Sequential& model,
                                                        std::string* summary) {
  const int layers = static_cast<int>(model.layers().size());
  const int stages = c.pipeline_stages;
  if (stages > layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_stages=", stages, ": the model has only ", layers, " layers to split"));
  }
  distribute::PipelineOptions o;
  auto device = [&c](int i) {
    return c.pipeline_devices.empty() ? absl::StrCat("/device:CPU:", i) : c.pipeline_devices[i];
  };
  int start = 0;
  for (int s = 0; s < stages; ++s) {
    o.stage_devices.push_back(device(s));
    o.stage_starts.push_back(start);
    start += layers / stages + (s < layers % stages ? 1 : 0);
  }
  for (int r = 1; r < c.pipeline_replicas; ++r) {
    o.replica_stage_devices.emplace_back();
    for (int s = 0; s < stages; ++s) {
      o.replica_stage_devices.back().push_back(device(r * stages + s));
    }
  }
  o.micro_batches = c.micro_batches;
  o.schedule = c.pipeline_schedule == "gpipe"
                   ? distribute::PipelineSchedule::kGPipe
                   : distribute::PipelineSchedule::kOneForwardOneBackward;
  std::vector<std::string> parts;
  for (int s = 0; s < stages; ++s) {
    const int first = o.stage_starts[s];
    const int last = (s + 1 < stages ? o.stage_starts[s + 1] : layers) - 1;
    parts.push_back(absl::StrCat(
        last > first ? absl::StrCat("layers ", first, "-", last) : absl::StrCat("layer ", first),
        " on ", o.stage_devices[s]));
  }
  *summary = absl::StrCat(
      "pipeline: ", stages, " stage(s) (", absl::StrJoin(parts, ", "), ")",
      c.pipeline_replicas > 1
          ? absl::StrCat(" x ", c.pipeline_replicas, " replicas (replica r's stage s on ",
                         c.pipeline_devices.empty() ? "/device:CPU:" : "mesh device ", "(r * ",
                         stages, " + s), each a part of every batch)")
          : "",
      ", ", c.micro_batches, " micro-batch(es) of each ",
      c.pipeline_replicas > 1 ? "replica's part" : "batch", ", ", c.pipeline_schedule);
  return o;
}

}  // namespace

bool Pipelined(const TrainerConfig& c) { return c.pipeline_stages > 1 || c.micro_batches > 1; }

absl::StatusOr<std::unique_ptr<TrainGraph>> BuildGraph(const TrainerConfig& c, const TrainerData& d,
                                                       int64_t total_steps,
                                                       distribute::Strategy* strategy,
                                                       data::DatasetPtr batches,
                                                       bool per_worker_batches, bool weighted,
                                                       int accumulate_over) {
  auto g = std::make_unique<TrainGraph>();
  g->strategy = strategy;
  distribute::Strategy& s = *g->strategy;
  const Scope& root = g->root;
  distribute::StrategyScope in_scope = s.Scope();

  // Input: each batch split over the replicas ("x/replica_<r>", ...).
  std::vector<distribute::InputSpec> specs = {{"x", DT_FLOAT, PartialTensorShape({-1, d.num_features})},
                                              {"y", DT_INT32, PartialTensorShape({-1})}};
  distribute::DistributeOptions options;
  if (weighted) options.partial_batches = distribute::DistributeOptions::PartialBatches::kWeighted;
  if (per_worker_batches) {
    STRATA_ASSIGN_OR_RETURN(g->input, s.DistributeDatasetsFromFunction(
                                          [&](const distribute::InputContext&) { return batches; },
                                          std::move(specs), options));
  } else {
    // One worker: each global batch split over its replicas. (Several
    // workers get per-worker batches above; kData is what they amount to.)
    options.auto_shard_policy = data::AutoShardPolicy::kData;
    STRATA_ASSIGN_OR_RETURN(g->input, s.DistributeDataset(std::move(batches), std::move(specs), options));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<distribute::PerReplica> inputs, g->input->Inputs(root));
  if (weighted) inputs.push_back(g->input->weights());

  // The model code, the same under every strategy.
  if (c.model == "mlp") {
    STRATA_ASSIGN_OR_RETURN(g->model, train::MakeMlp(c.hidden, d.num_classes, c.seed));
  } else if (c.model == "embedding") {
    STRATA_ASSIGN_OR_RETURN(g->model, MakeEmbeddingModel(c, d));
  } else {
    const int64_t side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(d.num_features))));
    if (side * side != d.num_features || side < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model=cnn needs square single-channel images (features = side * side), got ",
          d.num_features, " features"));
    }
    STRATA_ASSIGN_OR_RETURN(g->model, train::MakeSmallCnn(side, side, 1, d.num_classes, c.seed));
  }
  const double lr = c.learning_rate > 0 ? c.learning_rate : fit::DefaultLearningRate(c.optimizer);
  const int64_t decay_steps = c.lr_decay_steps > 0 ? c.lr_decay_steps : std::max<int64_t>(1, total_steps);
  train::LearningRateSchedule schedule = train::ConstantLearningRate(lr);
  if (c.lr_schedule == "exponential") {
    schedule = train::ExponentialDecay(lr, decay_steps, c.lr_decay_rate);
  } else if (c.lr_schedule == "cosine") {
    schedule = train::CosineDecay(lr, decay_steps);
  }
  // Distributed optimizers (fit/optimizers.h): all-reduce (mean) the
  // replicas' gradients, then the base update on each replica's copy; on
  // one device, the base update.
  fit::OptimizerOptions oo;
  oo.schedule = schedule;
  oo.momentum = c.momentum;
  oo.weight_decay = c.weight_decay;
  oo.clip_global_norm = c.clip_global_norm;
  absl::StatusOr<std::unique_ptr<train::Optimizer>> optimizer = fit::MakeOptimizer(c.optimizer, lr, oo);
  if (!optimizer.ok()) return AnnotateStatus(optimizer.status(), "--optimizer: ");
  g->optimizer = *std::move(optimizer);
  distribute::PipelineOptions po;
  if (Pipelined(c)) {
    STRATA_ASSIGN_OR_RETURN(po, PipelineFor(c, *g->model, &g->pipeline));
  }
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    if (Pipelined(c)) {
      // One replica (--strategy=one_device): its weight of a partial batch is 1.
      auto loss_fn = [](const Scope& scope, Output labels, Output logits) {
        return train::SparseSoftmaxCrossEntropy(scope, labels, logits);
      };
      STRATA_ASSIGN_OR_RETURN(
          distribute::PipelineStep p,
          distribute::BuildPipelineTrainStep(ctx.scope(), g->model.get(), in[0], in[1], loss_fn,
                                             g->optimizer.get(), po));
      g->pipeline_step = p;
      // Across workers, each worker's preemption flag on its own first
      // device (the mesh lists each worker's devices in turn).
      std::vector<std::string> flag_devices;
      for (size_t i = 0; i < c.pipeline_devices.size(); i += fit::NumCpuDevices(c)) {
        flag_devices.push_back(c.pipeline_devices[i]);
      }
      return distribute::ReplicaResult{
          {fit::StackPreemptionFlag(ctx.scope(), p.loss, &g->preempt_feeds, s.num_workers(),
                                    flag_devices)},
          {p.train_op}};
    }
    STRATA_ASSIGN_OR_RETURN(Output logits, g->model->Build(ctx.scope(), in[0]));
    Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope().NewSubScope("loss"), in[1], logits);
    // This replica's share of the step's examples.
    if (weighted) loss = distribute::WeightedLoss(ctx.scope().NewSubScope("loss"), loss, in[2]);
    train::Optimizer* update = g->accumulate != nullptr ? g->accumulate.get() : g->optimizer.get();
    STRATA_ASSIGN_OR_RETURN(Node* train_op,
                            train::Minimize(ctx.scope(), loss, g->model->reads(), update));
    return distribute::ReplicaResult{{fit::StackPreemptionFlag(ctx.scope(), loss, &g->preempt_feeds, s.num_workers())}, {train_op}};
  };
  if (accumulate_over > 0) g->accumulate = std::make_unique<Accumulate>(accumulate_over);
  STRATA_ASSIGN_OR_RETURN(distribute::RunResult step, s.Run(root, step_fn, inputs));
  if (accumulate_over > 0) {
    STRATA_ASSIGN_OR_RETURN(g->apply_op,
                            ApplyRound(root, *g->model, static_cast<const Accumulate&>(*g->accumulate),
                                       g->optimizer.get()));
  }
  // Weights, and up to two optimizer slots each, must fit in memory; refuse
  // absurd sizes (e.g. --hidden=100000000) instead of failing to allocate.
  if (g->model->num_parameters() > kMaxParameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hidden / --model: the model has ", g->model->num_parameters(),
        " parameters, more than the ", kMaxParameters, " this trainer holds"));
  }
  STRATA_ASSIGN_OR_RETURN(g->loss_and_flag, s.Reduce(root.NewSubScope("loss"), distribute::ReduceOp::kMean,
                                                     step.values[0]));
  g->train_op = step.op;

  // Evaluation outside the step: reads the primary copies, on the first
  // device.
  const Scope eval = root.NewSubScope("eval");
  g->eval_x = ops::Placeholder(eval.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, d.num_features}));
  g->eval_y = ops::Placeholder(eval.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  STRATA_ASSIGN_OR_RETURN(Output eval_logits, g->model->Build(eval, g->eval_x));
  g->eval_loss = train::SparseSoftmaxCrossEntropy(eval.NewSubScope("loss"), g->eval_y, eval_logits);
  g->eval_accuracy = train::Accuracy(eval.NewSubScope("accuracy"), g->eval_y, eval_logits);
  g->init = train::GlobalVariablesInitializer(root);

  STRATA_ASSIGN_OR_RETURN(g->checkpoint, fit::Checkpoint::Create(root, train::GlobalVariables(root)));
  STRATA_RETURN_IF_ERROR(root.status());
  return g;
}

Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
  const size_t row_bytes = dims[0] == 0 ? 0 : t.TotalBytes() / static_cast<size_t>(dims[0]);
  dims[0] = end - begin;
  Tensor out(t.dtype(), *TensorShape::FromDims(dims));
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + begin * row_bytes,
              row_bytes * static_cast<size_t>(end - begin));
  return out;
}

absl::StatusOr<std::vector<double>> EvaluateSums(Session* session, const TrainGraph& g,
                                                 const TrainerData& d) {
  const int64_t n = d.test_x.dim_size(0);
  double loss_sum = 0, acc_sum = 0;
  std::vector<Tensor> out;
  for (int64_t begin = 0; begin < n; begin += kEvalChunk) {
    const int64_t end = std::min(n, begin + kEvalChunk);
    const bool whole = begin == 0 && end == n;
    STRATA_RETURN_IF_ERROR(session->Run({{g.eval_x.name(), whole ? d.test_x : Rows(d.test_x, begin, end)},
                                         {g.eval_y.name(), whole ? d.test_y : Rows(d.test_y, begin, end)}},
                                        {g.eval_loss.name(), g.eval_accuracy.name()}, {}, &out));
    loss_sum += static_cast<double>(*out[0].data<float>()) * (end - begin);
    acc_sum += static_cast<double>(*out[1].data<float>()) * (end - begin);
  }
  return std::vector<double>{loss_sum, acc_sum, static_cast<double>(n)};
}

}  // namespace trainer
}  // namespace strata
