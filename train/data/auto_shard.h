// Auto-sharding: rewrites an input pipeline so that each worker of a
// cluster reads its own share of the data, as tf.data's auto-sharding
// (tf.data.experimental.AutoShardPolicy) does for tf.distribute's
// multi-worker strategies.
//
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr ds, LoadCsv(files));  // 8 files
//   STRATA_ASSIGN_OR_RETURN(ds, Shuffle(ds, /*seed=*/7));
//   STRATA_ASSIGN_OR_RETURN(ds, Batch(ds, 64, /*drop_remainder=*/true));  // global batch
//   STRATA_ASSIGN_OR_RETURN(ds, Repeat(ds));
//   STRATA_ASSIGN_OR_RETURN(AutoShardResult r, AutoShard(ds, /*num_workers=*/2, /*worker_index=*/1));
//   r.policy;   // kFile: this worker reads files 1, 3, 5 and 7
//   r.dataset;  // Repeat(-1)<-Batch(32,drop)<-Shuffle(seed=7)<-Csv(f1,f3,f5,f7;...)
//
// Policies (what `policy` asks for; the result says what was applied):
//   kFile  Every source of the pipeline must be a file source (LoadCsv) with
//          at least num_workers files, reached through transformations that
//          are pipeline nodes (dataset.h's DatasetNode: all of transforms.h),
//          under a Batch. Each file source is replaced by its ShardFiles
//          share (files[i] for i % num_workers == worker_index) and the
//          outermost Batch(B) by Batch(B / num_workers): the worker's
//          pipeline yields per-worker batches of its own examples, and no
//          two workers see the same example. Everything else is kept:
//          Shuffle shuffles the worker's examples with the same seed;
//          Take/Skip/Shard below the Batch count the worker's examples,
//          above it its batches.
//   kData  The dataset is returned unchanged: every worker reads every
//          global batch and keeps its own part of it (DistributedDataset in
//          strategy/ does that), so the cluster trains on exactly the
//          examples one process would, and every worker pays for reading
//          all of them.
//   kOff   No sharding: only Batch(B) becomes Batch(B / num_workers); every
//          worker reads every example (as TensorFlow's OFF).
//   kAuto  kFile where it applies, else kData (TensorFlow's AUTO).
// With one worker nothing is rewritten (the result's policy is kOff).
//
// The rewritten pipeline is made again from the nodes' arguments (a file
// source loads its share of the files then), so its DebugString, and hence
// its saved iterator state, is the worker's own: a worker restores the state
// it saved, not another worker's. With files of different sizes the
// workers' epochs differ in length; a finite pipeline then ends sooner on
// some workers than on others (repeat it, as training loops do).
//
// Errors (InvalidArgument): a null dataset, num_workers < 1, worker_index
// outside [0, num_workers), a global batch that is not a multiple of
// num_workers (naming both), kFile where it does not apply (saying why),
// kOff without a Batch to rewrite; a file source's own errors when it loads
// its share.
//
// Thread-safety: pure functions; datasets are immutable.
#ifndef STRATA_TRAIN_DATA_AUTO_SHARD_H_
#define STRATA_TRAIN_DATA_AUTO_SHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "train/data/dataset.h"

namespace strata {
namespace data {

enum class AutoShardPolicy { kOff, kAuto, kFile, kData };

// "OFF", "AUTO", "FILE", "DATA" (TensorFlow's names).
const char* AutoShardPolicyName(AutoShardPolicy policy);
// "off", "auto", "file" or "data", any case; InvalidArgument otherwise.
absl::StatusOr<AutoShardPolicy> ParseAutoShardPolicy(absl::string_view text);

// The policy applied to a pipeline over `num_files` files (0: not
// file-based) when `requested` is asked for: kAuto becomes kFile if there
// are at least as many files as workers, else kData; one worker gives kOff.
// InvalidArgument for kFile over too few files (naming both counts) or
// num_workers < 1.
absl::StatusOr<AutoShardPolicy> ResolveAutoShardPolicy(AutoShardPolicy requested,
                                                       int64_t num_files, int64_t num_workers);

struct AutoShardResult {
  DatasetPtr dataset;                  // this worker's pipeline
  AutoShardPolicy policy = AutoShardPolicy::kOff;  // applied: kFile, kData or kOff
  std::vector<std::string> files;      // kFile: this worker's files, in order
  std::string reason;                  // why this policy, for logs
};

// Rewrites `dataset` for worker `worker_index` of `num_workers` (see the
// file comment).
absl::StatusOr<AutoShardResult> AutoShard(DatasetPtr dataset, int64_t num_workers,
                                          int64_t worker_index,
                                          AutoShardPolicy policy = AutoShardPolicy::kAuto);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_AUTO_SHARD_H_
