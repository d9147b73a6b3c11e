// CheckpointManager: numbered checkpoints "<dir>/ckpt-<step>" in one
// directory, keeping the newest `max_to_keep`, with a pointer file
// "<dir>/checkpoint" naming the latest (TensorFlow's text format:
// model_checkpoint_path: "ckpt-300" then one all_model_checkpoint_paths line
// per kept checkpoint, oldest first; paths relative to dir).
//
//   STRATA_ASSIGN_OR_RETURN(auto mgr, CheckpointManager::Create("/tmp/run", 3));
//   STRATA_ASSIGN_OR_RETURN(std::string prefix, mgr->Save(step, tensors, {{"input", pos}}));
//   ...after a restart:
//   STRATA_ASSIGN_OR_RETURN(auto mgr, CheckpointManager::Create("/tmp/run", 3));
//   auto reader = mgr->LoadLatestValid();  // skips a corrupt newest checkpoint
//
// Create scans the directory for committed checkpoints (ckpt-<step>.index),
// so a manager made after a restart (or a crash between a save's commit and
// its pointer update) sees every checkpoint on disk. Save adds the metadata
// key "global_step" (= step) unless the caller set it. Saving an existing
// step replaces it atomically. Checkpoints are ordered by step.
//
// Thread-safety: all methods may be called from any thread (a mutex orders
// them). Only one manager (one process: the chief) may write a directory;
// other processes write only shards of the checkpoint it is about to save
// (ShardPrefix), before it saves.
#ifndef STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_MANAGER_H_
#define STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {

class CheckpointManager {
 public:
  static constexpr char kPointerFile[] = "checkpoint";
  static constexpr char kMetadataGlobalStep[] = "global_step";

  // Creates `dir` if needed. max_to_keep == 0 keeps every checkpoint;
  // InvalidArgument if negative. Every file is written, listed and deleted
  // through `env` (null: Env::Default(); not owned, outlives the manager).
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(const std::string& dir,
                                                                   int max_to_keep,
                                                                   Env* env = nullptr);

  // Writes "<dir>/ckpt-<step>" (step >= 0), updates the pointer file, then
  // deletes the oldest checkpoints beyond max_to_keep and whatever a crashed
  // save or rotation left behind (temporary files, files of steps with no
  // kept checkpoint). Returns the prefix.
  // With `shards`, a sharded checkpoint (checkpoint_writer.h): the shards
  // were written first, at ShardPrefix(step, ...).
  absl::StatusOr<std::string> Save(int64_t step,
                                   const std::vector<std::pair<std::string, Tensor>>& tensors,
                                   const std::map<std::string, std::string>& metadata = {},
                                   const CheckpointShards& shards = {});

  // Where shard `name` of step `step`'s checkpoint is written (by any
  // process; the saving manager commits it).
  std::string ShardPrefix(int64_t step, const std::string& name) const;

  // The prefix of the newest checkpoint, if any (not verified).
  std::optional<std::string> Latest() const;
  // Prefixes of the kept checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;

  // Opens the newest checkpoint that passes CheckpointReader::VerifyAll,
  // trying older ones when a newer one is corrupt; each skipped checkpoint's
  // error is appended to `skipped` if given. NotFound if there are no
  // checkpoints; DataLoss listing every error if none is intact.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> LoadLatestValid(
      std::vector<absl::Status>* skipped = nullptr) const;

  const std::string& directory() const { return dir_; }

 private:
  CheckpointManager(std::string dir, int max_to_keep, Env* env)
      : dir_(std::move(dir)), max_to_keep_(max_to_keep), env_(env) {}
  std::string Prefix(int64_t step) const;
  absl::Status WritePointerFile();  // mu_ held
  absl::Status RemoveOrphans();     // mu_ held

  // Const after construction.
  const std::string dir_;
  const int max_to_keep_;
  Env* const env_;

  // std::mutex, not absl::Mutex: Debian's abseil is not TSan-instrumented.
  mutable std::mutex mu_;
  std::vector<int64_t> steps_;  // guarded by mu_; ascending
};

// The latest checkpoint's prefix according to `dir`'s pointer file (as
// tf.train.latest_checkpoint does). NotFound without a pointer file;
// DataLoss if it cannot be parsed.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);

}  // namespace strata

#endif  // STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_MANAGER_H_
