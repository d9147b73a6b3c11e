// Dataset sources held in memory: slices of tensors, and a seeded synthetic
// classification problem. Both are random access (see dataset.h); CSV files
// are in csv.h.
//
//   // 100 examples: features float [100, 4] -> element float [4]; labels int32 [100] -> [].
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr ds, FromTensors({features, labels}));
//   SyntheticOptions o;
//   o.num_examples = 1000; o.num_features = 20; o.num_classes = 3; o.seed = 7;
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr syn, Synthetic(o));
//
// Thread-safety and ownership: as every Dataset (immutable; tensors are
// copied out of the shared buffers on each Get).
#ifndef STRATA_TRAIN_DATA_SOURCES_H_
#define STRATA_TRAIN_DATA_SOURCES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "train/data/dataset.h"

namespace strata {
namespace data {

// Element i is (components[0][i], components[1][i], ...): every component
// must be an initialized numeric tensor of rank >= 1 with the same leading
// dimension (InvalidArgument naming the component otherwise). `name` labels
// the source in DebugString ("Csv(digits.csv.gz)"); the default describes
// the tensors. The tensors are shared, not copied: do not write them after.
absl::StatusOr<DatasetPtr> FromTensors(std::vector<Tensor> components, std::string name = "");

struct SyntheticOptions {
  int64_t num_examples = 1000;
  int64_t num_features = 10;
  int num_classes = 2;
  uint64_t seed = 0;
};

// A learnable classification problem: features float32 [num_features]
// drawn from N(0, 1) and label int32 = argmax_c (W x)_c for a matrix W
// [num_classes, num_features] drawn from N(0, 1), everything a pure function
// of (seed, example index), so any example is generated on demand and the
// same on every machine.
absl::StatusOr<DatasetPtr> Synthetic(const SyntheticOptions& options);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_SOURCES_H_
