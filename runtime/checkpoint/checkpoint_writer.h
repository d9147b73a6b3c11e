// SaveCheckpoint: writes named tensors and string metadata as one checkpoint
// (format in checkpoint_format.h), atomically.
//
//   std::vector<std::pair<std::string, Tensor>> vars = {{"dense/kernel", w}, {"dense/bias", b}};
//   absl::Status s = SaveCheckpoint("/tmp/run/ckpt-100", vars, {{"global_step", "100"}});
//
// Commit protocol (the index is the commit point):
//   1. write <prefix>.data-<id>.tmp, fsync, rename to <prefix>.data-<id>;
//   2. write <prefix>.index.tmp-<id>, fsync, rename over <prefix>.index;
//   3. fsync the directory;
//   4. delete other <prefix>.data-* files (an overwritten save's data, a
//      crashed save's leftovers).
// A crash before step 2's rename leaves the previous checkpoint at this
// prefix (if any) intact and loadable; after it, the new one. No reader ever
// sees an index whose data is missing or partial.
//
// A sharded save (several processes, each holding part of some tensors):
// each process first writes its shard with SaveCheckpointShard, at
// ShardPrefix(prefix, <a name of its own, fresh per save>); then one
// process saves the checkpoint naming the shards (SaveCheckpoint with
// `shards`), which checks that they hold every element of every sliced
// tensor exactly once and commits. Overwriting a prefix deletes the shards
// its old index named, after the commit.
//
// Errors: InvalidArgument naming the tensor for an empty or duplicate name or
// an uninitialized / non-numeric tensor; DataLoss naming the shard for a
// shard that cannot be read or whose pieces do not fit the sliced tensors;
// the file's error for I/O failures.
// Thread-safety: concurrent saves to different prefixes are fine; one
// prefix must have one writer at a time. The tensors are only read.
#ifndef STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
#define STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/env.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

// A tensor a sharded checkpoint holds in its shards.
struct SlicedTensor {
  std::string name;
  DataType dtype = DT_INVALID;
  TensorShape shape;
};

// The shards of a sharded save: the tensors they hold, and their prefixes
// (each ShardPrefix(prefix, ...), written by SaveCheckpointShard).
struct CheckpointShards {
  std::vector<SlicedTensor> tensors;
  std::vector<std::string> prefixes;
};

// A piece of a sliced tensor: its elements [element_offset, + values'
// elements), flattened.
struct TensorPiece {
  std::string name;
  int64_t element_offset = 0;
  Tensor values;
};

// Creates the prefix's directory if needed. Every file is written through
// `env` (null: Env::Default()), here and in the functions below.
absl::Status SaveCheckpoint(const std::string& prefix,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::map<std::string, std::string>& metadata,
                            const CheckpointShards& shards = {}, Env* env = nullptr);

// The prefix of shard `name` (a file name part, no '/') of the
// checkpoint at `prefix`.
std::string ShardPrefix(const std::string& prefix, const std::string& name);

// Writes a shard: `pieces` (one per tensor at most) as 1-D tensors, with
// their offsets. InvalidArgument naming the piece for a name given twice, a
// negative offset or a tensor that cannot be saved.
absl::Status SaveCheckpointShard(const std::string& shard_prefix,
                                 const std::vector<TensorPiece>& pieces, Env* env = nullptr);

// A piece made a block at a time, so that no more than a block of it is in
// memory while its shard is written (a large variable read from the device
// or task that holds it): `read(first, count, &values)` gives its elements
// [first, first + count) (any shape of that many, of `dtype`), called for
// consecutive ranges of `block` elements (the last one shorter) from 0.
struct StreamedPiece {
  std::string name;
  DataType dtype = DT_INVALID;
  int64_t element_offset = 0;
  int64_t num_elements = 0;
  int64_t block = 0;
  std::function<absl::Status(int64_t first, int64_t count, Tensor* values)> read;
};

// Writes a shard holding one streamed piece. InvalidArgument naming the
// piece for a bad offset, count, block or dtype, or a read that gives
// other values than asked for; a read's own error, annotated.
absl::Status SaveCheckpointShard(const std::string& shard_prefix, const StreamedPiece& piece,
                                 Env* env = nullptr);

// Deletes a checkpoint: its index first (so it is no longer committed), then
// its data files. OK if it does not exist.
absl::Status DeleteCheckpoint(const std::string& prefix, Env* env = nullptr);

namespace internal {

// The points at which a save can be interrupted, in order.
enum class SaveStage {
  kDataWritten,   // data file written and synced under its temporary name
  kDataRenamed,   // data file under its final name, index not yet written
  kIndexWritten,  // index written and synced under its temporary name
  kCommitted,     // index renamed into place and directory synced
  kDone,          // stale data files deleted
};

// SaveCheckpoint that stops right after `stop` as if the process died there
// (no cleanup), returning Aborted unless stop == kDone. For crash tests.
absl::Status SaveCheckpointUntil(const std::string& prefix,
                                 const std::vector<std::pair<std::string, Tensor>>& tensors,
                                 const std::map<std::string, std::string>& metadata,
                                 const CheckpointShards& shards, SaveStage stop,
                                 Env* env = nullptr);

}  // namespace internal
}  // namespace strata

#endif  // STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
