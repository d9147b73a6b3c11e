// Input pipelines: a Dataset describes a sequence of examples (each a tuple
// of Tensors: features float32 [d] and label int32 [] for the bundled
// sources, anything for FromTensors), built from a source and composed
// transformations; a DatasetIterator walks it and can save and restore its
// exact position as a string (for checkpoint metadata).
//
//   STRATA_ASSIGN_OR_RETURN(DatasetPtr ds, LoadCsv({"data/digits/digits.csv.gz"}));
//   STRATA_ASSIGN_OR_RETURN(ds, Shuffle(ds, /*seed=*/42));        // new order each epoch
//   STRATA_ASSIGN_OR_RETURN(ds, Batch(ds, 32, /*drop_remainder=*/true));
//   STRATA_ASSIGN_OR_RETURN(ds, Repeat(ds));                      // forever
//   STRATA_ASSIGN_OR_RETURN(ds, Prefetch(ds, 2));                 // background thread
//   STRATA_ASSIGN_OR_RETURN(auto it, DatasetIterator::Create(ds));
//   Example batch; bool end = false;
//   STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));  // batch[0]: float [32,64], batch[1]: int32 [32]
//   STRATA_ASSIGN_OR_RETURN(std::string pos, it->SaveState());  // into checkpoint metadata
//   ... later, in a new process with the same pipeline:
//   STRATA_RETURN_IF_ERROR(it->RestoreState(pos));      // continues with the same batches
//
// Sources are random access (Get(i)): in-memory tensors, CSV files (loaded
// into memory), a synthetic generator. Shuffle needs a random-access input
// and draws a full permutation from (seed, epoch); Map, Take, Skip and Shard
// keep random access, Batch, Repeat and Prefetch stream. Restoring state
// continues exactly where the saved iterator stood because every iterator's
// state is its position (epoch and index), never the data: a pipeline built
// the same way from the same data reproduces the same sequence.
//
// Determinism: a pipeline's sequence depends only on its data and its seeds,
// never on timing or thread counts (Prefetch changes when work is done, not
// its order).
//
// Thread-safety: a Dataset is immutable after creation and may be shared by
// threads and by many iterators. A DatasetIterator is used by one thread at
// a time (GetNext, SaveState and RestoreState must not overlap); Prefetch's
// background thread is internal and stopped by the iterator's destructor.
// Ownership: DatasetPtr is shared; each dataset holds its inputs, each
// DatasetIterator holds its dataset.
#ifndef STRATA_TRAIN_DATA_DATASET_H_
#define STRATA_TRAIN_DATA_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"

namespace strata {
namespace data {

// One element of a dataset: a tuple of tensors.
using Example = std::vector<Tensor>;

inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

// Iterator state is a flat sequence of integers and byte strings.
class StateWriter {
 public:
  void WriteInt(int64_t v);
  void WriteBytes(absl::string_view s);
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

// InvalidArgument for truncated or malformed state.
class StateReader {
 public:
  explicit StateReader(absl::string_view data) : data_(data) {}
  absl::Status ReadInt(int64_t* v);
  // Reads an int and checks lo <= v <= hi, naming `what` otherwise.
  absl::Status ReadIntInRange(int64_t lo, int64_t hi, absl::string_view what, int64_t* v);
  absl::Status ReadBytes(std::string* s);
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

// The iterator interface datasets implement. Users hold a DatasetIterator.
class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // Sets *end_of_sequence, or fills *out with the next element.
  virtual absl::Status GetNext(Example* out, bool* end_of_sequence) = 0;
  // Writes the position such that Restore on an iterator of the same
  // dataset continues with the same elements.
  virtual absl::Status Save(StateWriter* w) const = 0;
  virtual absl::Status Restore(StateReader* r) = 0;
};

class Dataset;
using DatasetPtr = std::shared_ptr<const Dataset>;

// A dataset seen as one node of its pipeline, for rewrites that rebuild a
// pipeline with some nodes changed (auto_shard.h), as tf.data rewrites its
// dataset graph: what the node is, what it reads, the arguments a rewrite
// may change, and how to make it again from them.
struct DatasetNode {
  std::string op;                  // "Batch", "Shuffle", "Csv", ...
  std::vector<DatasetPtr> inputs;  // the datasets it reads (none for a source)
  std::vector<std::string> files;  // a file source's files, in reading order
  int64_t batch_size = 0;          // Batch's
  // Makes the dataset again from `node`: this node with some of the fields
  // above changed (the others it keeps from the original).
  std::function<absl::StatusOr<DatasetPtr>(const DatasetNode& node)> rebuild;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Number of elements, kInfiniteCardinality or kUnknownCardinality.
  virtual int64_t Cardinality() const = 0;
  // True if Get works for every index in [0, Cardinality()).
  virtual bool RandomAccess() const { return false; }
  // Element `index` of a random-access dataset; thread-safe.
  virtual absl::Status Get(int64_t index, Example* out) const;
  // A fresh iterator for pass number `epoch` over this dataset (0 for the
  // first; Repeat makes one per pass). Shuffle's order depends on it.
  virtual absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const = 0;
  // Describes the pipeline, sizes and seeds included: saved state carries a
  // hash of it, so state is never restored into a different pipeline.
  virtual std::string DebugString() const = 0;
  // This dataset as a pipeline node; nullopt for one that rewrites cannot
  // see through or rebuild (the default: in-memory sources, custom
  // datasets). The transformations of transforms.h and the CSV source are
  // nodes.
  virtual std::optional<DatasetNode> AsNode() const { return std::nullopt; }
};

// Base of random-access datasets: the iterator walks indices 0..n-1.
class RandomAccessDataset : public Dataset {
 public:
  bool RandomAccess() const override { return true; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(int64_t epoch) const override;
};

// The iterator of a random-access dataset `ds` (which must outlive it):
// indices 0..Cardinality()-1 in order; its state is the next index.
std::unique_ptr<IteratorBase> MakeRandomAccessIterator(const Dataset* ds);

// What a training loop holds: the iterator of a whole pipeline.
class DatasetIterator {
 public:
  static absl::StatusOr<std::unique_ptr<DatasetIterator>> Create(DatasetPtr dataset);

  absl::Status GetNext(Example* out, bool* end_of_sequence);
  // The position as an opaque string (bytes, not text).
  absl::StatusOr<std::string> SaveState() const;
  // InvalidArgument if `state` is malformed or was saved from a pipeline
  // with a different DebugString; the iterator is then unchanged.
  absl::Status RestoreState(absl::string_view state);

  const DatasetPtr& dataset() const { return dataset_; }

 private:
  DatasetIterator(DatasetPtr ds, std::unique_ptr<IteratorBase> it)
      : dataset_(std::move(ds)), impl_(std::move(it)) {}
  const DatasetPtr dataset_;
  std::unique_ptr<IteratorBase> impl_;
};

// Reads a whole finite dataset (InvalidArgument if infinite).
absl::StatusOr<std::vector<Example>> CollectAll(const DatasetPtr& dataset);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_DATASET_H_
