// The trainer's input sharding across workers (internal to
// tools/trainer_lib): which policy a multi-worker run applies (FILE or DATA,
// as data::AutoShard decides), and, for FILE, combining what every worker
// must agree on (class count, epoch length, feature statistics, test
// metrics) across the workers through the strategy's collectives.
//
//   STRATA_ASSIGN_OR_RETURN(InputPlan plan, PlanInput(config, spec, *strategy));
//   ... each worker loads plan.files (FILE) or everything (DATA) ...
//   STRATA_ASSIGN_OR_RETURN(auto counts, CombineShards(strategy, plan, batch / workers, &data));
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
// workers saw the same files and features and that each has `local_batch`
// training examples (naming the worker and its files otherwise); sets
// d->num_classes to the cluster's; returns the cluster's {train, test}
// example counts.
absl::StatusOr<std::pair<int64_t, int64_t>> CombineShards(distribute::Strategy* s,
                                                          const InputPlan& plan,
                                                          int64_t local_batch, TrainerData* d);

// FILE: the feature mean and stddev over every worker's training split.
absl::StatusOr<std::pair<Tensor, Tensor>> CombinedStats(distribute::Strategy* s,
                                                        const TrainerData& d);

// "a.csv, b.csv" for paths ".../a.csv", ".../b.csv".
std::string BaseNames(const std::vector<std::string>& paths);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_SHARDING_H_
