// Dataset transformations (see dataset.h for the model). Each returns a new
// dataset over its input; InvalidArgument naming the transformation for bad
// arguments.
//
//   ds = *Shard(ds, num_workers, worker_index);   // this worker's examples
//   ds = *Shuffle(ds, seed);                      // order from (seed, epoch)
//   ds = *Batch(ds, global_batch, /*drop_remainder=*/true);
//   ds = *Repeat(ds);                             // forever
//   ds = *Prefetch(ds, 2);
//
// Random access is kept by Map, Take, Skip and Shard of a random-access
// input; Shuffle needs one (put it before Batch and Repeat).
//
// Thread-safety: as every Dataset. Map's function may be called from
// several iterators' threads at once (and from Prefetch's thread) and must
// be safe for that.
#ifndef STRATA_TRAIN_DATA_TRANSFORMS_H_
#define STRATA_TRAIN_DATA_TRANSFORMS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "train/data/dataset.h"

namespace strata {
namespace data {

// A full permutation of a finite random-access input, a new one per epoch:
// the order is a pure function of (seed, epoch).
absl::StatusOr<DatasetPtr> Shuffle(DatasetPtr input, uint64_t seed);

// Stacks `batch_size` consecutive elements: component c of the batch has
// shape [n, ...element shape]. The last batch is smaller (or dropped with
// drop_remainder). Elements of one batch must agree in dtypes and shapes
// (InvalidArgument from GetNext naming the component otherwise).
absl::StatusOr<DatasetPtr> Batch(DatasetPtr input, int64_t batch_size, bool drop_remainder = false);

// `count` passes over the input (kInfiniteCardinality = -1: forever), pass k
// being iterator epoch k, so a Shuffle inside reshuffles every pass. A pass
// that yields nothing ends the sequence (no endless loop on empty input).
absl::StatusOr<DatasetPtr> Repeat(DatasetPtr input, int64_t count = kInfiniteCardinality);

// The first `count` elements; the elements after the first `count`.
absl::StatusOr<DatasetPtr> Take(DatasetPtr input, int64_t count);
absl::StatusOr<DatasetPtr> Skip(DatasetPtr input, int64_t count);

// Every num_shards-th element starting at `index` (0 <= index < num_shards),
// e.g. one worker's share. Shard before Shuffle so that shards are disjoint
// in every epoch.
absl::StatusOr<DatasetPtr> Shard(DatasetPtr input, int64_t num_shards, int64_t index);

// Applies `fn` to each element in place. `name` identifies the function in
// DebugString (and so in saved iterator state).
using MapFn = std::function<absl::Status(Example* element)>;
absl::StatusOr<DatasetPtr> Map(DatasetPtr input, MapFn fn, std::string name);

// Computes up to `buffer_size` elements ahead on a background thread (one
// per iterator, started when the iterator is made and stopped by its
// destructor), in the same order and with the same errors as the input.
absl::StatusOr<DatasetPtr> Prefetch(DatasetPtr input, int64_t buffer_size);

}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_TRANSFORMS_H_
