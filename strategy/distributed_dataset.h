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
// Several workers (MultiWorkerMirroredStrategy): the input is auto-sharded
// as tf.distribute does (data::AutoShard, train/data/auto_shard.h), by the
// policy of DistributeOptions (AUTO by default):
//   FILE  where the pipeline reads at least as many files as there are
//         workers (LoadCsv under transformations of transforms.h, with a
//         Batch): each worker's pipeline reads only its share of the files
//         and its Batch(B) becomes Batch(B / workers); each element is then
//         this worker's batch, split over its local replicas.
//   DATA  otherwise: every worker reads every global batch and its global
//         replica g = worker * local + r takes part g of it, as replica g of
//         one process with every device would: the cluster trains on the
//         examples one process would.
//   OFF   (asked for only) every worker reads every example, in per-worker
//         batches of B / workers.
// policy() says which was applied (OFF for one worker: nothing changes),
// reason() why, files() the worker's files under FILE. No two workers train
// on the same example within an epoch under FILE or DATA. Under FILE the
// iterator state (SaveState) is this worker's own: each worker restores the
// state it saved. DistributeDatasetsFromFunction (as tf.distribute's) leaves
// the sharding to a function that makes each worker's pipeline of
// per-worker batches (policy() is then OFF: nothing is rewritten).
//
// Uneven batches (a last partial batch, a global batch size that is not a
// multiple of the replica count, workers whose files hold different numbers
// of examples) would give replicas batches of different sizes, and the mean
// of their mean gradients would not be the gradient of the global batch's
// mean loss. By default (PartialBatches::kError) GetNext returns
// InvalidArgument naming the sizes. With PartialBatches::kWeighted (as
// PyTorch's Join, which tf.distribute lacks) they train exactly, nothing
// dropped or repeated: the step's K examples are split as evenly as
// possible over the N replicas of the cluster (replica g gets k_g of them,
// k_g differing by at most one; one row of the batch where k_g = 0), and
// replica g is fed a weight k_g * N / K (weights(), a float scalar per
// replica) by which the step multiplies its mean loss (WeightedLoss), so
// the all-reduced mean of the weighted losses and of their gradients is the
// mean over the K examples. Full batches get weight 1 exactly, training bit
// for bit as unweighted ones. K is the global batch's size for DATA and one
// worker; a per-worker pipeline (a function's, several workers) must end
// each element with one more component than the specs, an int64 [2]
// {n, K}: its first n rows are examples (the rest, at least one row when
// n = 0, are padding), K the step's examples over every worker. FILE
// sharding by Create cannot know K and is refused in this mode. Other
// errors: a
// batch whose component count, dtype or per-replica shape does not match the
// specs (InvalidArgument), GetNext before Inputs (FailedPrecondition), the
// pipeline's own errors.
//
// Thread-safety: one thread at a time (as DatasetIterator). Ownership: holds
// the pipeline; the strategy must outlive it.
#ifndef STRATA_STRATEGY_DISTRIBUTED_DATASET_H_
#define STRATA_STRATEGY_DISTRIBUTED_DATASET_H_

#include <cstdint>
#include <functional>
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
#include "train/data/auto_shard.h"
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

struct DistributeOptions {
  // How the input is sharded across workers (ignored with one worker):
  // AUTO (FILE where it applies, else DATA), FILE (an error where it does
  // not apply), DATA or OFF, as tf.data.experimental.AutoShardPolicy.
  data::AutoShardPolicy auto_shard_policy = data::AutoShardPolicy::kAuto;
  // Batches that do not split evenly over the replicas: an error, or
  // weighted (see the file comment).
  enum class PartialBatches { kError, kWeighted };
  PartialBatches partial_batches = PartialBatches::kError;
};

// `loss` (a replica's mean loss, float or double) times that replica's
// weight of DistributedDataset::weights() (float), cast to the loss's dtype.
Output WeightedLoss(const strata::Scope& scope, Output loss, Output weight);

// What a DistributeDatasetsFromFunction function is told about its input
// pipeline (tf.distribute.InputContext).
struct InputContext {
  int num_input_pipelines = 1;  // one per worker
  int input_pipeline_id = 0;    // this worker's index
  int num_replicas_in_sync = 1;
  // global_batch / num_replicas_in_sync; InvalidArgument if it does not
  // divide.
  absl::StatusOr<int64_t> PerReplicaBatchSize(int64_t global_batch) const;
};
// A DatasetFn (strategy.h) returns this worker's pipeline; its elements are
// this worker's batches (e.g. Batch(global / num_input_pipelines) over its
// own shard).

class DistributedDataset {
 public:
  // InvalidArgument for no specs, an empty or repeated name, or a spec of
  // rank 0 (a batch needs a dimension 0 to split); with several workers,
  // AutoShard's errors (a global batch that does not split over the
  // workers, FILE where it does not apply).
  static absl::StatusOr<std::unique_ptr<DistributedDataset>> Create(
      const Strategy& strategy, data::DatasetPtr batches, std::vector<InputSpec> specs,
      const DistributeOptions& options = DistributeOptions());
  // `fn`'s pipeline gives this worker's batches, split over its local
  // replicas. The specs' errors as Create; fn's own, annotated.
  // options.partial_batches applies; its auto_shard_policy does not.
  static absl::StatusOr<std::unique_ptr<DistributedDataset>> CreateFromFunction(
      const Strategy& strategy, const DatasetFn& fn, std::vector<InputSpec> specs,
      const DistributeOptions& options = DistributeOptions());

  // One PerReplica per spec: placeholders "<name>/replica_<r>" (under
  // `scope`) on replica r's device. Made on the first call; later calls
  // return the same ones.
  absl::StatusOr<std::vector<PerReplica>> Inputs(const strata::Scope& scope);
  // PartialBatches::kWeighted: each replica's weight, float scalar
  // placeholders "replica_weight/replica_<r>" made by Inputs (empty before,
  // and in the default mode).
  const PerReplica& weights() const { return weights_; }
  bool weighted() const { return partial_ == DistributeOptions::PartialBatches::kWeighted; }

  // The next batch as per-replica feeds for Session::Run, or
  // *end_of_sequence. Errors: see the file comment.
  absl::Status GetNext(std::vector<std::pair<std::string, Tensor>>* feeds, bool* end_of_sequence);

  // The iterator's position (for checkpoints), as DatasetIterator's.
  absl::StatusOr<std::string> SaveState() const { return iterator_->SaveState(); }
  absl::Status RestoreState(const std::string& state) { return iterator_->RestoreState(state); }

  const std::vector<InputSpec>& specs() const { return specs_; }
  // The sharding applied (FILE, DATA or OFF), why, and this worker's files
  // under FILE.
  data::AutoShardPolicy policy() const { return shard_.policy; }
  const std::string& reason() const { return shard_.reason; }
  const std::vector<std::string>& files() const { return shard_.files; }
  // True when each element is this worker's batch (FILE, OFF, a function's
  // pipeline, one worker); false when it is a global batch of which this
  // worker keeps its part (DATA).
  bool per_worker_batches() const { return shard_.policy != data::AutoShardPolicy::kData; }

 private:
  DistributedDataset(const Strategy& strategy, std::vector<InputSpec> specs,
                     data::AutoShardResult shard, std::unique_ptr<data::DatasetIterator> iterator,
                     DistributeOptions::PartialBatches partial, bool counts)
      : strategy_(strategy), specs_(std::move(specs)), shard_(std::move(shard)),
        iterator_(std::move(iterator)), partial_(partial), counts_(counts) {}

  // Checks a batch's components against the specs; with `counts`, the
  // element's trailing {n, K} (removed from `batch`) into *n, *k.
  absl::Status CheckBatch(data::Example* batch, bool counts, int64_t* n, int64_t* k) const;
  // PartialBatches::kWeighted: the local replicas' parts and weights.
  absl::Status FeedWeighted(const data::Example& batch, int64_t n, int64_t k,
                            std::vector<std::pair<std::string, Tensor>>* feeds) const;

  const Strategy& strategy_;
  const std::vector<InputSpec> specs_;
  const data::AutoShardResult shard_;
  std::unique_ptr<data::DatasetIterator> iterator_;
  const DistributeOptions::PartialBatches partial_;
  const bool counts_;  // elements end with {n, K} (a weighted function's, several workers)
  std::vector<PerReplica> inputs_;  // made by the first Inputs
  PerReplica weights_;              // kWeighted: made by the first Inputs
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_DISTRIBUTED_DATASET_H_
