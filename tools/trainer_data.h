// The trainer's data (internal to tools/trainer_lib): the source a --data
// spec names, loaded and split into a training and a test set held in
// memory as two tensors each, standardized with the training split's
// statistics, and the training input pipeline over it.
//
//   STRATA_ASSIGN_OR_RETURN(SourceSpec spec, ParseDataSpec("synthetic:1000:20:3"));
//   STRATA_ASSIGN_OR_RETURN(TrainerData d, LoadTrainerData(spec, digits_path, 0.2, seed));
//   STRATA_RETURN_IF_ERROR(StandardizeInPlace(&d, stats));     // stats = ComputeStats(d)
//   STRATA_ASSIGN_OR_RETURN(auto it, MakeTrainIterator(d, /*batch=*/32, seed, /*prefetch=*/2));
//
// Thread-safety: plain values and pure functions; the iterator is used by
// one thread. Ownership: TrainerData's tensors are shared with the datasets
// built on them (they are never written after StandardizeInPlace).
#ifndef STRATA_TOOLS_TRAINER_DATA_H_
#define STRATA_TOOLS_TRAINER_DATA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "train/data/dataset.h"

namespace strata {
namespace trainer {

struct SourceSpec {
  enum class Kind { kDigits, kCsv, kSynthetic };
  Kind kind = Kind::kDigits;
  std::string path;            // kCsv
  int64_t num_examples = 0;    // kSynthetic
  int64_t num_features = 64;   // kSynthetic
  int64_t num_classes = 10;    // kSynthetic
  std::string description;     // as given, for messages and pipeline names
};

// "digits", "csv:PATH", "synthetic:N[:FEATURES[:CLASSES]]"; InvalidArgument
// naming --data otherwise.
absl::StatusOr<SourceSpec> ParseDataSpec(const std::string& text);

struct TrainerData {
  Tensor train_x, train_y;  // float [n, d], int32 [n]
  Tensor test_x, test_y;    // float [m, d], int32 [m] (m may be 0)
  int64_t num_features = 0;
  int64_t num_classes = 0;
  std::string name;         // identifies source, split and preprocessing
};

// Loads the source (the digits from `digits_path`), checks labels (integers
// in [0, classes), classes >= 2) and splits off round(n * test_fraction)
// test examples with a permutation drawn from `seed`.
absl::StatusOr<TrainerData> LoadTrainerData(const SourceSpec& spec, const std::string& digits_path,
                                            double test_fraction, uint64_t seed);

// Per-feature mean and stddev of the training split (float [d] each).
absl::StatusOr<std::pair<Tensor, Tensor>> ComputeStats(const TrainerData& data);

// Replaces both splits' features by (x - mean) / stddev (a stddev below
// 1e-6 counts as 1, as data::Standardize does).
absl::Status StandardizeInPlace(TrainerData* data, const Tensor& mean, const Tensor& stddev);

// Batches of the training split, forever: each epoch a permutation drawn
// from (seed, epoch), cut into n / batch batches (the remainder is dropped),
// then Prefetch(prefetch) if prefetch > 0. An iterator's state is (epoch,
// batch). InvalidArgument if the split has fewer than `batch` examples.
absl::StatusOr<data::DatasetPtr> MakeTrainBatches(const TrainerData& data, int64_t batch,
                                                  uint64_t seed, int64_t prefetch);
// An iterator over MakeTrainBatches(data, batch, seed, prefetch).
absl::StatusOr<std::unique_ptr<data::DatasetIterator>> MakeTrainIterator(const TrainerData& data,
                                                                         int64_t batch,
                                                                         uint64_t seed,
                                                                         int64_t prefetch);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_DATA_H_
