#include "strategy/distributed_dataset.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
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
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it,
                          data::DatasetIterator::Create(shard->dataset));
  return std::unique_ptr<DistributedDataset>(
      new DistributedDataset(strategy, std::move(specs), *std::move(shard), std::move(it)));
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributedDataset::CreateFromFunction(
    const Strategy& strategy, const DatasetFn& fn, std::vector<InputSpec> specs) {
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
  return std::unique_ptr<DistributedDataset>(
      new DistributedDataset(strategy, std::move(specs), std::move(shard), std::move(it)));
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
  inputs_ = out;
  return out;
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
  const int local = strategy_.num_local_replicas();
  // The parts the batch is cut into: the local replicas' of a per-worker
  // batch, every replica's of a global one.
  const int n = per_worker_batches() ? local : strategy_.num_replicas_in_sync();
  if (batch.size() != specs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("DistributedDataset: a batch has ",
                                                   batch.size(), " components, the specs ",
                                                   specs_.size()));
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    const Tensor& t = batch[k];
    const InputSpec& spec = specs_[k];
    if (t.dtype() != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: input '", spec.name, "' is ", DataTypeString(t.dtype()),
          ", its spec says ", DataTypeString(spec.dtype)));
    }
    if (t.dims() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: input '", spec.name, "' is a scalar, not a batch"));
    }
    if (t.dim_size(0) % n != 0) {
      if (per_worker_batches() && strategy_.num_workers() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DistributedDataset: this worker's batch of ", t.dim_size(0), " examples (input '",
            spec.name, "', ", data::AutoShardPolicyName(policy()), " sharding) does not split evenly over its ",
            n, " local replicas; use a global batch size that is a multiple of ",
            strategy_.num_replicas_in_sync(), " and batch with drop_remainder"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: the global batch of ", t.dim_size(0), " examples (input '",
          spec.name, "') does not split evenly over ", n,
          " replicas; use a global batch size that is a multiple of ", n,
          " and batch with drop_remainder"));
    }
  }
  // DATA: global replica g = worker * local + r takes part g of the global
  // batch, as replica g of one worker with n devices would: the cluster
  // trains on the examples one process would, and no two workers share an
  // example. Per-worker batches: local replica r takes part r.
  const int first = per_worker_batches() ? 0 : strategy_.worker_index() * local;
  STRATA_ASSIGN_OR_RETURN(std::vector<data::Example> parts,
                          data::SplitBatch(batch, n, first, local));
  for (size_t k = 0; k < specs_.size(); ++k) {
    for (int r = 0; r < local; ++r) {
      const Tensor& t = parts[r][k];
      if (!specs_[k].shape.IsCompatibleWith(t.shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DistributedDataset: replica ", r, "'s slice of input '", specs_[k].name, "' has shape ",
            t.shape().DebugString(), ", its spec says ", specs_[k].shape.DebugString()));
      }
      feeds->emplace_back(inputs_[k][r].name(), t);
    }
  }
  return absl::OkStatus();
}

}  // namespace distribute
}  // namespace strata
