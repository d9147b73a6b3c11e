// Preprocessing helpers: per-feature standardization, a seeded train/test
// split, and the split of a global batch into per-replica batches.
//
//   auto [train, test] = *TrainTestSplit(all, /*test_fraction=*/0.2, /*seed=*/1);
//   STRATA_ASSIGN_OR_RETURN(FeatureStats stats, ComputeFeatureStats(train));  // train split only
//   STRATA_ASSIGN_OR_RETURN(train, Standardize(train, stats));
//   STRATA_ASSIGN_OR_RETURN(test, Standardize(test, stats));     // same statistics
//   ...
//   STRATA_ASSIGN_OR_RETURN(std::vector<Example> per_replica, SplitBatch(batch, 4));
//
// Thread-safety: pure functions over immutable datasets.
#ifndef STRATA_TRAIN_DATA_PREPROCESS_H_
#define STRATA_TRAIN_DATA_PREPROCESS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "train/data/dataset.h"

namespace strata {
namespace data {

// Per-feature mean and population standard deviation (float tensors with
// the component's element shape).
struct FeatureStats {
  Tensor mean;
  Tensor stddev;
};

// One pass over a finite dataset, accumulating in double (Welford).
// InvalidArgument if the dataset is infinite or empty, if the component is
// missing or not float32, or if element shapes differ.
absl::StatusOr<FeatureStats> ComputeFeatureStats(const DatasetPtr& dataset, int component = 0);

// Maps component `component` to (x - mean) / stddev, dividing by 1 where the
// stddev is below 1e-6 (a constant feature becomes 0 instead of inf/nan).
// GetNext reports InvalidArgument for an element of another dtype or shape.
absl::StatusOr<DatasetPtr> Standardize(DatasetPtr dataset, const FeatureStats& stats,
                                       int component = 0);

// Splits a finite random-access dataset into (train, test): a permutation
// drawn from `seed` puts round(n * test_fraction) examples in test and the
// rest in train, each kept in the original order. Same seed, same split.
absl::StatusOr<std::pair<DatasetPtr, DatasetPtr>> TrainTestSplit(DatasetPtr dataset,
                                                                 double test_fraction,
                                                                 uint64_t seed);

// Rows [begin, begin + count) of every component of a batch (copied); the
// caller keeps them within every component's dimension 0.
Example SliceRows(const Example& batch, int64_t begin, int64_t count);

// Splits every component of a batch along dimension 0 into `num_replicas`
// consecutive parts whose sizes differ by at most one (the first
// batch % num_replicas parts get the extra example). InvalidArgument if a
// component is a scalar or the components disagree on the batch size.
absl::StatusOr<std::vector<Example>> SplitBatch(const Example& batch, int num_replicas);
// Only parts [first, first + count) of that split (a worker's replicas of a
// cluster-wide batch), copying nothing else. InvalidArgument if the range is
// not within [0, num_replicas).
absl::StatusOr<std::vector<Example>> SplitBatch(const Example& batch, int num_replicas, int first,
                                                int count);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_PREPROCESS_H_
