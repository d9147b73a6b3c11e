// The trainer's input sharding across workers (internal to
// tools/trainer_lib): which policy a multi-worker run applies (FILE or DATA,
// as data::AutoShard decides), and, for FILE, combining what every worker
// must agree on (class count, epoch length, feature statistics, test
// metrics) across the workers through the strategy's collectives.
//
//   STRATA_ASSIGN_OR_RETURN(InputPlan plan, PlanInput(config, spec, *strategy));
//   ... each worker loads plan.files (FILE) or everything (DATA) ...
//   STRATA_ASSIGN_OR_RETURN(auto counts, CombineShards(strategy, plan, &data));
//   STRATA_ASSIGN_OR_RETURN(auto stats, CombinedStats(strategy, data));
//
// Every function that sums across workers is a collective of the worker
// group: every worker must call the same ones in the same order.
// Thread-safety: one thread (graph building and a session each). Ownership:
// the strategy is borrowed and must outlive the calls.
#ifndef STRATA_TOOLS_TRAINER_SHARDING_H_
#define STRATA_TOOLS_TRAINER_SHARDING_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "strategy/strategy.h"
#include "tools/trainer_data.h"
#include "tools/trainer_lib.h"
#include "train/data/auto_shard.h"

namespace strata {
namespace trainer {

// How this process reads the input.
struct InputPlan {
  data::AutoShardPolicy policy = data::AutoShardPolicy::kOff;  // OFF: one worker
  std::string why;                     // for the log line
  std::vector<std::string> all_files;  // --data=csv: every file, sorted per path
  std::vector<std::string> files;      // FILE: this worker's share
  int num_workers = 1;
  int worker = 0;
  bool by_file() const { return policy == data::AutoShardPolicy::kFile; }
};

// The policy --input_sharding asks for, resolved as data::AutoShard does:
// the same on every worker (same flags, same file list). InvalidArgument
// naming --input_sharding for FILE over fewer files than workers.
absl::StatusOr<InputPlan> PlanInput(const TrainerConfig& c, const SourceSpec& spec,
                                    const distribute::Strategy& s);

// Sums `local` element-wise over the workers of `s`; `local` itself with
// one worker.
absl::StatusOr<std::vector<double>> SumAcrossWorkers(distribute::Strategy* s,
                                                     const std::vector<double>& local);

// FILE, after each worker loaded its share into `d`: checks that the
// workers saw the same files and features and that each has a training
// example (naming the worker and its files otherwise); sets
// d->num_classes to the cluster's; returns the cluster's {train, test}
// example counts; `per_worker`, if given, gets every worker's training
// example count (uneven shards: UnevenEpoch).
absl::StatusOr<std::pair<int64_t, int64_t>> CombineShards(
    distribute::Strategy* s, const InputPlan& plan, TrainerData* d,
    std::vector<int64_t>* per_worker = nullptr);

// FILE: the feature mean and stddev over every worker's training split.
absl::StatusOr<std::pair<Tensor, Tensor>> CombinedStats(distribute::Strategy* s,
                                                        const TrainerData& d);

// Uneven shards (FILE sharding, workers holding different numbers of
// examples, or a number that is not a multiple of the batch), as PyTorch's
// Join: every worker runs the same number of steps per epoch, the most any
// worker needs (ceil(examples / batch)); in step s worker w trains on
// k_w(s) = clamp(n_w - s * batch, 0, batch) examples (a placeholder row
// when 0), its batches carrying {k_w(s), K(s)} (MakeUnevenTrainBatches), K(s)
// the examples of the step over every worker, so that DistributedDataset
// weighs each replica's loss by its share and every example counts once
// per epoch.
struct UnevenEpoch {
  std::vector<int64_t> examples;  // n_w by worker
  int64_t batch = 0;              // per worker
  int64_t steps = 0;              // per epoch: max_w ceil(n_w / batch)
  // The examples of worker w, and of every worker, in global step `step`
  // (0-based, epochs repeating).
  int64_t Examples(int worker, int64_t step) const;
  int64_t TotalExamples(int64_t step) const;
  // Whether the shards are even: every worker the same multiple of batch.
  bool even() const;
};
UnevenEpoch PlanUnevenEpoch(const std::vector<int64_t>& examples, int64_t batch);

// "a.csv, b.csv" for paths ".../a.csv", ".../b.csv".
std::string BaseNames(const std::vector<std::string>& paths);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_SHARDING_H_
