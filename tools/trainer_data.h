// The trainer's data (internal to tools/trainer_lib): the source a --data
// spec names, loaded and split into a training and a test set held in
// memory as two tensors each, standardized with the training split's
// statistics, and the training input pipeline over it.
//
//   STRATA_ASSIGN_OR_RETURN(SourceSpec spec, ParseDataSpec("synthetic:1000:20:3"));
//   STRATA_ASSIGN_OR_RETURN(TrainerData d, LoadTrainerData(spec, digits_path, 0.2, seed));
//   STRATA_RETURN_IF_ERROR(StandardizeInPlace(&d, stats));     // stats = ComputeStats(d)
//   STRATA_ASSIGN_OR_RETURN(auto it, MakeTrainIterator(d, /*batch=*/32, seed, /*prefetch=*/2));
//   // csv:a.csv,dir/,parts/*.csv.gz -> the files, sorted within a directory or pattern:
//   STRATA_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandCsvPaths(csv_spec));
//
// Thread-safety: plain values and pure functions; the iterator is used by
// one thread. Ownership: TrainerData's tensors are shared with the datasets
// built on them (they are never written after StandardizeInPlace).
#ifndef STRATA_TOOLS_TRAINER_DATA_H_
#define STRATA_TOOLS_TRAINER_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "train/data/dataset.h"

namespace strata {
namespace trainer {

struct SourceSpec {
  enum class Kind { kDigits, kCsv, kSynthetic };
  Kind kind = Kind::kDigits;
  std::vector<std::string> paths;  // kCsv: files, directories or glob patterns
  int64_t num_examples = 0;    // kSynthetic
  int64_t num_features = 64;   // kSynthetic
  int64_t num_classes = 10;    // kSynthetic
  std::string description;     // as given, for messages and pipeline names
};

// "digits", "csv:PATH[,PATH...]", "synthetic:N[:FEATURES[:CLASSES]]";
// InvalidArgument naming --data otherwise (an empty path included).
absl::StatusOr<SourceSpec> ParseDataSpec(const std::string& text);

struct TrainerData {
  Tensor train_x, train_y;  // float [n, d], int32 [n]
  Tensor test_x, test_y;    // float [m, d], int32 [m] (m may be 0)
  int64_t num_features = 0;
  int64_t num_classes = 0;
  std::string name;         // identifies source, split and preprocessing
};

// The CSV files of a kCsv spec, in order: each path as given if it is a
// file; a directory's regular files (names not starting with '.'), sorted;
// a glob pattern's matches (*, ? or [ in the path), sorted. NotFound for a
// missing path, an empty directory or a pattern without matches;
// InvalidArgument for a file listed twice.
absl::StatusOr<std::vector<std::string>> ExpandCsvPaths(const SourceSpec& spec);

// Loads the source (the digits from `digits_path`; for kCsv the files of
// ExpandCsvPaths, or `files` if given: a worker's share), checks labels
// (integers >= 0, and with `check_classes` at least 2 classes) and splits
// off round(n * test_fraction) test examples with a permutation drawn from
// `seed`. num_classes is the largest label + 1 (a worker's share may hold
// fewer classes than the whole: combine across workers, then check).
absl::StatusOr<TrainerData> LoadTrainerData(const SourceSpec& spec, const std::string& digits_path,
                                            double test_fraction, uint64_t seed,
                                            const std::vector<std::string>* files = nullptr,
                                            bool check_classes = true);

// Per-feature mean and stddev of the training split (float [d] each).
absl::StatusOr<std::pair<Tensor, Tensor>> ComputeStats(const TrainerData& data);

// The same statistics from sums that may span several workers' training
// splits, in two passes (each summed across workers by the caller):
// FeatureSums gives per-feature sums of x; StatsFromSums turns the
// cluster's sums and count into the mean; SquaredDeviationSums then gives
// the per-feature sums of (x - mean)^2, and StddevFromSums the stddev.
std::vector<double> FeatureSums(const TrainerData& data);
std::vector<double> SquaredDeviationSums(const TrainerData& data, const std::vector<double>& mean);
// mean (or stddev) as float [d] from `sums` over `count` examples.
Tensor MeanFromSums(const std::vector<double>& sums, double count);
Tensor StddevFromSums(const std::vector<double>& squared_deviation_sums, double count);

// Replaces both splits' features by (x - mean) / stddev (a stddev below
// 1e-6 counts as 1, as data::Standardize does).
absl::Status StandardizeInPlace(TrainerData* data, const Tensor& mean, const Tensor& stddev);

// How MakeTrainBatches and MakeUnevenTrainBatches cut the training split.
struct BatchLayout {
  int64_t batch = 0;            // examples of a full batch
  bool keep_remainder = false;  // each epoch's last partial batch too (else dropped)
  // A worker's part of each global batch (DATA over several workers): the
  // batch's examples split over num_shards * replicas_per_shard replicas as
  // evenly as possible (sizes differing by at most one, the first ones
  // larger, as DistributedDataset splits), this shard taking the rows of
  // replicas [shard * replicas_per_shard, (shard + 1) * replicas_per_shard).
  int64_t shard = 0, num_shards = 1, replicas_per_shard = 1;
  // A worker's own shard of uneven files (FILE): every epoch epoch_steps
  // batches; worker_examples holds every worker's example count.
  int64_t epoch_steps = 0;
  std::vector<int64_t> worker_examples;
  // Each element ends with int64 [2] {n, K}: its n examples (one
  // placeholder row when n = 0) of the step's K over every worker, as
  // DistributedDataset's weighted partial batches take per-worker batches.
  bool counts = false;
  // Batches per epoch over `examples` training examples.
  int64_t EpochSteps(int64_t examples) const;
};

// Batches of the training split, forever: each epoch a permutation drawn
// from (seed, epoch), cut into n / batch batches (the remainder dropped), or
// with keep_remainder ceil(n / batch) (the last one partial), then
// Prefetch(prefetch) if prefetch > 0. An iterator's state is (epoch,
// batch); a new iterator starts at batch `start_batch` of that sequence (not
// part of the pipeline's identity: saved states stay interchangeable).
// With num_shards > 1 each element is only shard `shard` of every batch
// (BatchLayout; without keep_remainder its rows [shard * batch /
// num_shards, ...), in order), gathered without building the rest: a
// worker's part of each global batch, ending with its {n, K} counts when
// keep_remainder. The shards' states are the unsharded pipeline's.
// InvalidArgument if the split has fewer than `batch` examples (without
// keep_remainder) or none, or the shards do not split `batch` evenly
// (without keep_remainder).
absl::StatusOr<data::DatasetPtr> MakeTrainBatches(const TrainerData& data, int64_t batch,
                                                  uint64_t seed, int64_t prefetch,
                                                  int64_t start_batch = 0, int64_t shard = 0,
                                                  int64_t num_shards = 1, bool keep_remainder = false,
                                                  int64_t replicas_per_shard = 1);
// A worker's batches when the workers hold different numbers of examples
// (FILE sharding of uneven files; `worker_examples` every worker's count,
// this one's among them): every epoch is `epoch_steps` batches (the most
// any worker needs); batch s holds rows [s * batch, (s + 1) * batch) of the
// epoch's shuffled order, fewer for its last, then a single placeholder row
// once they run out; each ends with its {n, K} counts, so that weighted
// (DistributedDataset) each example counts exactly once per epoch. The
// order of epoch e is MakeTrainBatches's, so with equal shards that are a
// multiple of the batch the batches are the same. InvalidArgument when the
// examples do not fit `epoch_steps` batches.
absl::StatusOr<data::DatasetPtr> MakeUnevenTrainBatches(const TrainerData& data, int64_t batch,
                                                        int64_t epoch_steps, uint64_t seed,
                                                        int64_t prefetch, int64_t start_batch,
                                                        std::vector<int64_t> worker_examples);
// An iterator over MakeTrainBatches(data, batch, seed, prefetch).
absl::StatusOr<std::unique_ptr<data::DatasetIterator>> MakeTrainIterator(const TrainerData& data,
                                                                         int64_t batch,
                                                                         uint64_t seed,
                                                                         int64_t prefetch);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_DATA_H_
