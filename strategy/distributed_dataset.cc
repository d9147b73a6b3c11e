#include "strategy/distributed_dataset.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/core_ops.h"
#include "graph/status.h"
#include "train/data/preprocess.h"

namespace strata {
namespace distribute {

absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributedDataset::Create(
    const Strategy& strategy, data::DatasetPtr batches, std::vector<InputSpec> specs) {
  if (batches == nullptr) return absl::InvalidArgumentError("DistributeDataset: no dataset");
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
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it,
                          data::DatasetIterator::Create(std::move(batches)));
  return std::unique_ptr<DistributedDataset>(
      new DistributedDataset(strategy, std::move(specs), std::move(it)));
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
  const int n = strategy_.num_replicas_in_sync();
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
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataset: the global batch of ", t.dim_size(0), " examples (input '",
          spec.name, "') does not split evenly over ", n,
          " replicas; use a global batch size that is a multiple of ", n,
          " and batch with drop_remainder"));
    }
  }
  // Global replica g = worker * local + r takes part g of the global batch,
  // as replica g of one worker with n devices would: the cluster trains on
  // the examples one process would, and no two workers share an example.
  const int local = strategy_.num_local_replicas();
  STRATA_ASSIGN_OR_RETURN(std::vector<data::Example> parts,
                          data::SplitBatch(batch, n, strategy_.worker_index() * local, local));
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
