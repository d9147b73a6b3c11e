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
// Errors: InvalidArgument naming the tensor for an empty or duplicate name or
// an uninitialized / non-numeric tensor; the file's error for I/O failures.
// Thread-safety: concurrent saves to different prefixes are fine; one
// prefix must have one writer at a time. The tensors are only read.
#ifndef STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
#define STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "graph/tensor.h"

namespace strata {

// Creates the prefix's directory if needed.
absl::Status SaveCheckpoint(const std::string& prefix,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::map<std::string, std::string>& metadata);

// Deletes a checkpoint: its index first (so it is no longer committed), then
// its data files. OK if it does not exist.
absl::Status DeleteCheckpoint(const std::string& prefix);

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
                                 SaveStage stop);

}  // namespace internal
}  // namespace strata

#endif  // STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
