#include "strategy/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "strategy/distributed_dataset.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/replica_context.h"
#include "train/data/csv.h"
#include "train/data/preprocess.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/losses.h"
#include "train/models.h"

namespace strata {
namespace distribute {
namespace testing {

DeviceOptions Machine(int n) {
  DeviceOptions m;
  m.num_cpu_devices = n;
  m.intra_op_threads_per_device = 1;
  return m;
}

std::vector<std::string> CpuSpecs(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("/cpu:", i));
  return out;
}

absl::StatusOr<std::vector<Tensor>> Fetch(Session& session, const std::vector<std::string>& names,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds) {
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR(session.Run(feeds, names, {}, &out));
  return out;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

double MaxRelativeDifference(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DT_FLOAT || b.dtype() != DT_FLOAT || !(a.shape() == b.shape())) return INFINITY;
  double worst = 0;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const double d = std::fabs(double{pa[i]} - double{pb[i]}) /
                     std::max(std::fabs(double{pb[i]}), 1e-3);
    worst = std::max(worst, d);
  }
  return worst;
}

namespace {

// Stacks a finite dataset's (x, y) examples into two tensors.
absl::StatusOr<std::pair<Tensor, Tensor>> Stack(const data::DatasetPtr& ds) {
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr batched,
                          data::Batch(ds, std::max<int64_t>(1, ds->Cardinality())));
  STRATA_ASSIGN_OR_RETURN(std::vector<data::Example> all, data::CollectAll(batched));
  if (all.size() != 1) return absl::InternalError("expected one batch");
  return std::make_pair(all[0][0], all[0][1]);
}

absl::StatusOr<Data> SplitAndStandardize(const data::DatasetPtr& all) {
  STRATA_ASSIGN_OR_RETURN(auto split, data::TrainTestSplit(all, 0.2, /*seed=*/7));
  STRATA_ASSIGN_OR_RETURN(data::FeatureStats stats, data::ComputeFeatureStats(split.first));
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr train, data::Standardize(split.first, stats));
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr test, data::Standardize(split.second, stats));
  Data d;
  STRATA_ASSIGN_OR_RETURN(auto tr, Stack(train));
  STRATA_ASSIGN_OR_RETURN(auto te, Stack(test));
  d.train_x = tr.first;
  d.train_y = tr.second;
  d.test_x = te.first;
  d.test_y = te.second;
  return d;
}

}  // namespace

absl::StatusOr<Data> LoadDigits() {
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr all, data::LoadCsv({"data/digits/digits.csv.gz"}));
  return SplitAndStandardize(all);
}

absl::StatusOr<Data> SyntheticData(int64_t train, int64_t test, int64_t features, int classes) {
  data::SyntheticOptions o;
  o.num_examples = train + test;
  o.num_features = features;
  o.num_classes = classes;
  o.seed = 3;
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr all, data::Synthetic(o));
  return SplitAndStandardize(all);
}

absl::StatusOr<TrainOutcome> TrainMlp(Strategy& strategy, const TrainConfig& c, const Data& d) {
  const int64_t features = d.train_x.dim_size(1);
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = strategy.Scope();

  // The input pipeline: shuffled global batches, forever.
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({d.train_x, d.train_y}));
  STRATA_ASSIGN_OR_RETURN(ds, data::Shuffle(ds, static_cast<uint64_t>(c.seed)));
  STRATA_ASSIGN_OR_RETURN(ds, data::Batch(ds, c.global_batch, /*drop_remainder=*/true));
  STRATA_ASSIGN_OR_RETURN(ds, data::Repeat(ds));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DistributedDataset> dist,
                          strategy.DistributeDataset(
                              ds, {{"x", DT_FLOAT, PartialTensorShape({-1, features})},
                                   {"y", DT_INT32, PartialTensorShape({-1})}}));
  STRATA_ASSIGN_OR_RETURN(std::vector<PerReplica> inputs, dist->Inputs(root));

  // The model code: the same under every strategy.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> model,
                          train::MakeMlp(c.hidden, c.num_classes, c.seed));
  std::unique_ptr<train::Optimizer> opt;
  if (c.optimizer == "sgd") {
    opt = std::make_unique<DistributedOptimizer<train::SGD>>(c.learning_rate);
  } else if (c.optimizer == "momentum") {
    opt = std::make_unique<DistributedOptimizer<train::Momentum>>(c.learning_rate, 0.9);
  } else {
    opt = std::make_unique<DistributedOptimizer<train::Adam>>(c.learning_rate);
  }
  opt->set_clip_global_norm(c.clip_global_norm);
  STRATA_ASSIGN_OR_RETURN(
      RunResult step,
      strategy.Run(
          root,
          [&](ReplicaContext& ctx, const std::vector<Output>& in) -> absl::StatusOr<ReplicaResult> {
            STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(ctx.scope(), in[0]));
            Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope(), in[1], logits);
            STRATA_ASSIGN_OR_RETURN(Node* train_op,
                                    train::Minimize(ctx.scope(), loss, model->reads(), opt.get()));
            return ReplicaResult{{loss}, {train_op}};
          },
          inputs));
  STRATA_ASSIGN_OR_RETURN(Output mean_loss, strategy.Reduce(root, ReduceOp::kMean, step.values[0]));

  // Evaluation outside Run reads the primary copies.
  const Scope eval = root.NewSubScope("eval");
  Output test_x = ops::Placeholder(eval.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, features}));
  Output test_y = ops::Placeholder(eval.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  STRATA_ASSIGN_OR_RETURN(Output test_logits, model->Build(eval, test_x));
  Output accuracy = train::Accuracy(eval, test_y, test_logits);

  TrainOutcome out;
  std::vector<std::string> weight_reads;
  std::vector<std::vector<std::string>> copy_reads(strategy.num_local_replicas());
  const Scope reads = root.NewSubScope("reads");
  for (train::Variable* v : model->variables()) {
    out.names.push_back(v->name());
    weight_reads.push_back(v->Read(reads).name());
    for (int r = 0; r < strategy.num_local_replicas(); ++r) {
      train::Variable* copy = v->distributed_by() != nullptr ? v->replica(r) : v;
      copy_reads[r].push_back(copy->Read(reads).name());
    }
  }
  Node* init = train::GlobalVariablesInitializer(root);
  STRATA_RETURN_IF_ERROR(root.status());

  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                          Session::Create(root, strategy.session_options()));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  for (int i = 0; i < c.steps; ++i) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = false;
    STRATA_RETURN_IF_ERROR(dist->GetNext(&feeds, &end));
    if (end) return absl::InternalError("the repeated pipeline ended");
    std::vector<Tensor> loss;
    STRATA_RETURN_IF_ERROR(session->Run(feeds, {mean_loss.name()}, {step.op->name()}, &loss));
    out.losses.push_back(*loss[0].data<float>());
  }
  STRATA_ASSIGN_OR_RETURN(out.weights, Fetch(*session, weight_reads));
  for (const auto& names : copy_reads) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> copy, Fetch(*session, names));
    out.copies.push_back(std::move(copy));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> acc,
                          Fetch(*session, {accuracy.name()},
                                {{test_x.name(), d.test_x}, {test_y.name(), d.test_y}}));
  out.test_accuracy = *acc[0].data<float>();
  return out;
}

std::unique_ptr<AdamStep> BuildAdamStep(Strategy& strategy, int64_t features,
                                        const std::vector<int64_t>& hidden, int64_t classes) {
  auto b = std::make_unique<AdamStep>();
  StrategyScope in_scope = strategy.Scope();
  std::vector<Output> xs, ys;
  for (int r = 0; r < strategy.num_replicas_in_sync(); ++r) {
    xs.push_back(ops::Placeholder(b->root, DT_FLOAT, PartialTensorShape({-1, features})));
    ys.push_back(ops::Placeholder(b->root, DT_INT32, PartialTensorShape({-1})));
  }
  absl::StatusOr<std::unique_ptr<train::Sequential>> model = train::MakeMlp(hidden, classes, 1);
  if (!model.ok()) {
    b->status = model.status();
    return b;
  }
  DistributedOptimizer<train::Adam> adam(1e-3);
  auto result = strategy.Run(
      b->root,
      [&](ReplicaContext& ctx, const std::vector<Output>& in) -> absl::StatusOr<ReplicaResult> {
        STRATA_ASSIGN_OR_RETURN(Output logits, (*model)->Build(ctx.scope(), in[0]));
        Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope(), in[1], logits);
        STRATA_ASSIGN_OR_RETURN(Node* op,
                                train::Minimize(ctx.scope(), loss, (*model)->reads(), &adam));
        return ReplicaResult{{loss}, {op}};
      },
      {PerReplica(xs), PerReplica(ys)});
  b->status = result.status();
  if (result.ok()) b->step = *result;
  b->xs = xs;
  b->ys = ys;
  return b;
}

}  // namespace testing
}  // namespace distribute
}  // namespace strata
