// DistributedDataset: feeds a Mirrored step from a batched input pipeline,
// as tf.distribute's experimental_distribute_dataset. Each element of the
// pipeline is one global batch; it is split along dimension 0 into one
// consecutive slice per replica (replica r gets examples [r*b, (r+1)*b) with
// b = global batch / replicas), fed to per-replica placeholders on the
// replicas' devices.
//
//   STRATA_ASSIGN_OR_RETURN(auto dist, strategy->DistributeDataset(
//       batches, {{"x", DT_FLOAT, PartialTensorShape({-1, 64})},
//                 {"y", DT_INT32, PartialTensorShape({-1})}}));
//   STRATA_ASSIGN_OR_RETURN(std::vector<PerReplica> in, dist->Inputs(root));  // x, y
//   RunResult step = *strategy->Run(root, step_fn, in);
//   ...
//   std::vector<std::pair<std::string, Tensor>> feeds;
//   bool end = false;
//   STRATA_RETURN_IF_ERROR(dist->GetNext(&feeds, &end));
//   STRATA_RETURN_IF_ERROR(session->Run(feeds, {}, {step.op->name()}, nullptr));
//
// Uneven batches are an error, not silently re-weighted: a global batch
// whose size is not a multiple of the replica count would give replicas
// batches of different sizes, and the mean of their mean gradients would
// not be the gradient of the global batch's mean loss, so GetNext returns
// InvalidArgument naming the sizes (batch with drop_remainder and a global
// batch size that is a multiple of the replica count). Other errors: a
// batch whose component count, dtype or per-replica shape does not match the
// specs (InvalidArgument), GetNext before Inputs (FailedPrecondition), the
// pipeline's own errors.
//
// Thread-safety: one thread at a time (as DatasetIterator). Ownership: holds
// the pipeline; the strategy must outlive it.
#ifndef STRATA_STRATEGY_DISTRIBUTED_DATASET_H_
#define STRATA_STRATEGY_DISTRIBUTED_DATASET_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "strategy/strategy.h"
#include "train/data/dataset.h"

namespace strata {
namespace distribute {

// One component of the pipeline's elements: the placeholders' base name, its
// dtype and the shape of one replica's slice (dim 0 may be -1).
struct InputSpec {
  std::string name;
  DataType dtype = DT_FLOAT;
  PartialTensorShape shape;
};

class DistributedDataset {
 public:
  // InvalidArgument for no specs, an empty or repeated name, or a spec of
  // rank 0 (a batch needs a dimension 0 to split).
  static absl::StatusOr<std::unique_ptr<DistributedDataset>> Create(const Strategy& strategy,
                                                                    data::DatasetPtr batches,
                                                                    std::vector<InputSpec> specs);

  // One PerReplica per spec: placeholders "<name>/replica_<r>" (under
  // `scope`) on replica r's device. Made on the first call; later calls
  // return the same ones.
  absl::StatusOr<std::vector<PerReplica>> Inputs(const strata::Scope& scope);

  // The next global batch as per-replica feeds for Session::Run, or
  // *end_of_sequence. Errors: see the file comment.
  absl::Status GetNext(std::vector<std::pair<std::string, Tensor>>* feeds, bool* end_of_sequence);

  // The iterator's position (for checkpoints), as DatasetIterator's.
  absl::StatusOr<std::string> SaveState() const { return iterator_->SaveState(); }
  absl::Status RestoreState(const std::string& state) { return iterator_->RestoreState(state); }

  const std::vector<InputSpec>& specs() const { return specs_; }

 private:
  DistributedDataset(const Strategy& strategy, std::vector<InputSpec> specs,
                     std::unique_ptr<data::DatasetIterator> iterator)
      : strategy_(strategy), specs_(std::move(specs)), iterator_(std::move(iterator)) {}

  const Strategy& strategy_;
  const std::vector<InputSpec> specs_;
  std::unique_ptr<data::DatasetIterator> iterator_;
  std::vector<PerReplica> inputs_;  // made by the first Inputs
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_DISTRIBUTED_DATASET_H_
