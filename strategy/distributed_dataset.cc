#include "strategy/distributed_dataset.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "train/data/preprocess.h"

namespace strata {
namespace distribute {

namespace {

absl::Status CheckSpecs(const std::vector<InputSpec>& specs) {
  if (specs.empty()) {
    return absl::InvalidArgumentError("DistributeDataset: no input specs (one per component)");
  }
  absl::flat_hash_set<std::string> names;
  for (const InputSpec& s : specs) {
    if (s.name.empty()) return absl::InvalidArgumentError("DistributeDataset: an input has no name");
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("DistributeDataset: two inputs are named '", s.name, "'"));
    }
    if (!s.shape.unknown_rank() && s.shape.dims() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributeDataset: input '", s.name, "' is a scalar; batches need a dimension 0"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Output WeightedLoss(const strata::Scope& scope, Output loss, Output weight) {
  if (!loss.ok() || !weight.ok()) return Output();
  const DataType dt = loss.node()->output_type(loss.index());
  if (dt != DT_FLOAT) weight = ops::Cast(scope.WithOpName("replica_weight_cast"), weight, dt);
  return ops::Mul(scope.WithOpName("weighted_loss"), loss, weight);
}

absl::StatusOr<int64_t> InputContext::PerReplicaBatchSize(int64_t global_batch) const {
  if (num_replicas_in_sync < 1 || global_batch % num_replicas_in_sync != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the global batch size ", global_batch, " is not a multiple of the ", num_replicas_in_sync,
        " replicas in sync"));
  }
  return global_batch / num_replicas_in_sync;
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributedDataset::Create(
    const Strategy& strategy, data::DatasetPtr batches, std::vector<InputSpec> specs,
    const DistributeOptions& options) {
  if (batches == nullptr) return absl::InvalidArgumentError("DistributeDataset: no dataset");
  STRATA_RETURN_IF_ERROR(CheckSpecs(specs));
  // Every worker makes the same choice: the pipeline and the cluster's size
  // are the same everywhere, so FILE is chosen on all workers or on none.
  absl::StatusOr<data::AutoShardResult> shard = data::AutoShard(
      std::move(batches), strategy.num_workers(), strategy.worker_index(), options.auto_shard_policy);
  if (!shard.ok()) return AnnotateStatus(shard.status(), "DistributeDataset: ");
  if (options.partial_batches == DistributeOptions::PartialBatches::kWeighted &&
      shard->policy == data::AutoShardPolicy::kFile) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributeDataset: weighted partial batches under FILE sharding (", shard->reason,
        ") need every worker's example count per step, which the workers' own files do not "
        "give; use DistributeDatasetsFromFunction with {n, K} counts, or the DATA policy"));
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it,
                          data::DatasetIterator::Create(shard->dataset));
  return std::unique_ptr<DistributedDataset>(new DistributedDataset(
      strategy, std::move(specs), *std::move(shard), std::move(it), options.partial_batches,
      /*counts=*/false));
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributedDataset::CreateFromFunction(
    const Strategy& strategy, const DatasetFn& fn, std::vector<InputSpec> specs,
    const DistributeOptions& options) {
  if (!fn) return absl::InvalidArgumentError("DistributeDatasetsFromFunction: no function");
  STRATA_RETURN_IF_ERROR(CheckSpecs(specs));
  InputContext ctx;
  ctx.num_input_pipelines = strategy.num_workers();
  ctx.input_pipeline_id = strategy.worker_index();
  ctx.num_replicas_in_sync = strategy.num_replicas_in_sync();
  absl::StatusOr<data::DatasetPtr> ds = fn(ctx);
  if (!ds.ok()) {
    return AnnotateStatus(ds.status(), absl::StrCat("DistributeDatasetsFromFunction: input pipeline ",
                                                    ctx.input_pipeline_id, ": "));
  }
  if (*ds == nullptr) {
    return absl::InvalidArgumentError("DistributeDatasetsFromFunction: the function returned no dataset");
  }
  data::AutoShardResult shard;
  shard.dataset = *ds;
  shard.policy = data::AutoShardPolicy::kOff;
  shard.reason = "the dataset function makes this worker's pipeline";
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it,
                          data::DatasetIterator::Create(*std::move(ds)));
  return std::unique_ptr<DistributedDataset>(new DistributedDataset(
      strategy, std::move(specs), std::move(shard), std::move(it), options.partial_batches,
      /*counts=*/options.partial_batches == DistributeOptions::PartialBatches::kWeighted &&
          strategy.num_workers() > 1));
}

absl::StatusOr<std::vector<PerReplica>> DistributedDataset::Inputs(const strata::Scope& scope) {
  if (!inputs_.empty()) return inputs_;
  STRATA_RETURN_IF_ERROR(scope.status());
  std::vector<PerReplica> out;
  for (const InputSpec& spec : specs_) {
    const strata::Scope s = scope.NewSubScope(spec.name);
    std::vector<Output> per;
    for (int r = 0; r < strategy_.num_local_replicas(); ++r) {
      per.push_back(ops::Placeholder(
          s.WithOpName(absl::StrCat("replica_", r)).WithDevice(strategy_.devices()[r]), spec.dtype,
          spec.shape));
    }
    STRATA_RETURN_IF_ERROR(scope.status());
    out.emplace_back(std::move(per));
  }
  if (weighted()) {
    const strata::Scope s = scope.NewSubScope("replica_weight");
    std::vector<Output> per;
    for (int r = 0; r < strategy_.num_local_replicas(); ++r) {
      per.push_back(ops::Placeholder(
          s.WithOpName(absl::StrCat("replica_", r)).WithDevice(strategy_.devices()[r]), DT_FLOAT,
          PartialTensorShape({})));
    }
    STRATA_RETURN_IF_ERROR(scope.status());
    weights_ = PerReplica(std::move(per));
  }
  inputs_ = out;
  return out;
}

absl::Status DistributedDataset::CheckBatch(data::Example* batch, bool counts, int64_t* n,
                                            int64_t* k) const {
  const size_t want = specs_.size() + (counts ? 1 : 0);
  if (batch->size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataset: a batch has ", batch->size(), " components, the specs ", specs_.size(),
        counts ? " and the trailing {n, K} counts of a weighted per-worker pipeline" : ""));
  }
  if (counts) {
    const Tensor c = batch->back();
    batch->pop_back();
    if (c.dtype() != DT_INT64 || c.NumElements() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: a weighted per-worker batch must end with int64 [2] {examples in "
          "it, examples in the step over every worker}, got ",
          DataTypeString(c.dtype()), " ", c.shape().DebugString()));
    }
    *n = c.data<int64_t>()[0];
    *k = c.data<int64_t>()[1];
  }
  for (size_t i = 0; i < batch->size(); ++i) {
    const Tensor& t = (*batch)[i];
    const InputSpec& spec = specs_[i];
    if (t.dtype() != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: input '", spec.name, "' is ", DataTypeString(t.dtype()),
          ", its spec says ", DataTypeString(spec.dtype)));
    }
    if (t.dims() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: input '", spec.name, "' is a scalar, not a batch"));
    }
    if (t.dim_size(0) != (*batch)[0].dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: input '", spec.name, "' has ", t.dim_size(0), " rows, input '",
          specs_[0].name, "' ", (*batch)[0].dim_size(0)));
    }
  }
  const int64_t rows = (*batch)[0].dim_size(0);
  if (!counts) {
    *n = rows;
    // A per-worker batch without counts: one worker, or OFF (every worker
    // the same batch size).
    *k = per_worker_batches() ? rows * strategy_.num_workers() : rows;
  }
  if (*n < 0 || *n > rows || (*n == 0 && rows == 0) || *k < *n || *k < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataset: a batch of ", rows, " rows says it holds ", *n,
        " examples of the step's ", *k,
        " (need 0 <= n <= rows, at least one row, and 1 <= K, n <= K)"));
  }
  return absl::OkStatus();
}

absl::Status DistributedDataset::FeedWeighted(
    const data::Example& batch, int64_t n, int64_t k,
    std::vector<std::pair<std::string, Tensor>>* feeds) const {
  const int local = strategy_.num_local_replicas();
  const int64_t replicas = strategy_.num_replicas_in_sync();
  // The parts the examples are cut into: the local replicas' of a
  // per-worker batch, every replica's of a global one (DATA: global replica
  // g = worker * local + r takes part g, as in one process).
  const int64_t parts = per_worker_batches() ? local : replicas;
  const int64_t first =
      per_worker_batches() ? 0 : static_cast<int64_t>(strategy_.worker_index()) * local;
  for (int r = 0; r < local; ++r) {
    const int64_t p = first + r;
    const int64_t count = n / parts + (p < n % parts ? 1 : 0);
    const int64_t begin = p * (n / parts) + std::min(p, n % parts);
    // A replica without examples runs on one row, weighted 0.
    const data::Example part =
        count > 0 ? data::SliceRows(batch, begin, count) : data::SliceRows(batch, 0, 1);
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (!specs_[i].shape.IsCompatibleWith(part[i].shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DistributedDataset: replica ", r, "'s slice of input '", specs_[i].name, "' has shape ",
            part[i].shape().DebugString(), ", its spec says ", specs_[i].shape.DebugString()));
      }
    }
    for (size_t i = 0; i < specs_.size(); ++i) feeds->emplace_back(inputs_[i][r].name(), part[i]);
    const double w = static_cast<double>(count * replicas) / static_cast<double>(k);
    feeds->emplace_back(weights_[r].name(), Tensor::Scalar<float>(static_cast<float>(w)));
  }
  return absl::OkStatus();
}

absl::Status DistributedDataset::GetNext(std::vector<std::pair<std::string, Tensor>>* feeds,
                                         bool* end_of_sequence) {
  if (inputs_.empty()) {
    return absl::FailedPreconditionError(
        "DistributedDataset::GetNext before Inputs: the placeholders to feed do not exist yet");
  }
  feeds->clear();
  data::Example batch;
  STRATA_RETURN_IF_ERROR(iterator_->GetNext(&batch, end_of_sequence));
  if (*end_of_sequence) return absl::OkStatus();
  int64_t n = 0, k = 0;
  STRATA_RETURN_IF_ERROR(CheckBatch(&batch, counts_, &n, &k));
  if (weighted()) return FeedWeighted(batch, n, k, feeds);
  const int local = strategy_.num_local_replicas();
  // The parts the batch is cut into: the local replicas' of a per-worker
  // batch, every replica's of a global one.
  const int parts = per_worker_batches() ? local : strategy_.num_replicas_in_sync();
  if (n % parts != 0) {
    const std::string fix = absl::StrCat(
        "; use a global batch size that is a multiple of ", strategy_.num_replicas_in_sync(),
        " and batch with drop_remainder, or weighted partial batches");
    if (per_worker_batches() && strategy_.num_workers() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: this worker's batch of ", n, " examples (input '", specs_[0].name,
          "', ", data::AutoShardPolicyName(policy()), " sharding) does not split evenly over its ",
          parts, " local replicas", fix));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataset: the global batch of ", n, " examples (input '", specs_[0].name,
        "') does not split evenly over ", parts, " replicas", fix));
  }
  // DATA: global replica g = worker * local + r takes part g of the global
  // batch, as replica g of one worker with n devices would: the cluster
  // trains on the examples one process would, and no two workers share an
  // example. Per-worker batches: local replica r takes part r.
  const int first = per_worker_batches() ? 0 : strategy_.worker_index() * local;
  STRATA_ASSIGN_OR_RETURN(std::vector<data::Example> split,
                          data::SplitBatch(batch, parts, first, local));
  for (size_t i = 0; i < specs_.size(); ++i) {
    for (int r = 0; r < local; ++r) {
      const Tensor& t = split[r][i];
      if (!specs_[i].shape.IsCompatibleWith(t.shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DistributedDataset: replica ", r, "'s slice of input '", specs_[i].name, "' has shape ",
            t.shape().DebugString(), ", its spec says ", specs_[i].shape.DebugString()));
      }
      feeds->emplace_back(inputs_[i][r].name(), t);
    }
  }
  return absl::OkStatus();
}

}  // namespace distribute
}  // namespace strata
