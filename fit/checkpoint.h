// Checkpoint objects, as tf.train.Checkpoint and tf.train.CheckpointManager:
// a Checkpoint tracks a model's variables (weights, optimizer slots, the
// step counter) and any state of the program's own (the input pipeline's
// position, a fingerprint of the configuration, feature statistics); a
// CheckpointManager keeps numbered checkpoints of it in a directory, saves
// atomically, keeps the newest N and restores the newest intact one,
// skipping a corrupt newer one (runtime/checkpoint/ writes and verifies the
// files).
//
//   // After the step and the optimizer exist (so that the slots do), before
//   // the Session is made:
//   STRATA_ASSIGN_OR_RETURN(auto ckpt, fit::Checkpoint::Create(root,
//   train::GlobalVariables(root))); ckpt->TrackString("input", [&] { return dataset->SaveState();
//   },
//                     [&](const std::string& s) { return dataset->RestoreState(s); });
//   STRATA_ASSIGN_OR_RETURN(auto session, Session::Create(root, options));
//   STRATA_ASSIGN_OR_RETURN(auto manager, fit::CheckpointManager::Create(ckpt.get(), dir, 3));
//   STRATA_ASSIGN_OR_RETURN(fit::Restored r, manager->RestoreOrInitialize(session.get(), init));
//   for (int64_t step = r.step; step < steps; ++step) {
//     ...
//     if (is_chief && (step + 1) % 100 == 0) manager->Save(session.get(), step + 1);
//   }
//
// Every variable is saved once under its name on one device ("dense/kernel",
// "dense/kernel/Adam/m", "Adam/iter"): a mirrored variable is read from its
// first copy and restored into every copy, so a checkpoint written under
// one strategy or replica count resumes under another. Sharded optimizer
// state (StrategyOptions::zero_stage) is saved as the unsharded slots it
// stands for, gathered from the process's copies, and restored into any
// sharding. Across several workers each holds some blocks, and the
// checkpoint is sharded (runtime/checkpoint/checkpoint_writer.h): every
// worker takes part in each save (every_process_saves()): each writes the
// pieces of the slots it holds to a shard of its own (SaveShard; the
// chief's in Save), the workers exchange their shards' names and whether
// they were written (one small all-gather), and the chief commits the
// index naming every shard, or fails naming the worker whose shard is
// missing. No worker sends its state to another. A restore reads the
// slots whole from the shards, so it fits any replica count, sharded or
// not. Scratch (ShardedContents::saved false: ZeRO's shard variables,
// PowerSGD's state) is not saved; a restore runs its initializer.
// A variable in partitions (train::PartitionedVariable: a table spread
// over ps tasks) is saved as one tensor under its name, but no process
// holds it whole: the saving process reads one partition at a time and
// writes it to a shard of its own (the checkpoint is then sharded), and a
// restore reads and assigns one partition's rows at a time, so it restores
// into any partitioning or none, and an unpartitioned variable's checkpoint
// into partitions.
//
// Errors: restoring a checkpoint that lacks a tracked variable or holds it
// with another dtype or shape (a checkpoint of another model) is
// FailedPrecondition naming the checkpoint and the variable, and changes
// nothing; a corrupt checkpoint is skipped for an older intact one (each
// skip reported); a tracked state's own restore error is returned naming
// its key.
//
// Thread-safety: build (Create, Track*) with the thread that builds the
// graph; Save and Restore with one thread at a time. In a multi-worker run
// only the chief saves (one committer per directory; where
// every_process_saves() the others run SaveShard at the same steps); every
// worker restores.
// Ownership: the Checkpoint must outlive its managers; the callbacks'
// captures must outlive the Checkpoint's use.
#ifndef STRATA_FIT_CHECKPOINT_H_
#define STRATA_FIT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "runtime/checkpoint/checkpoint_manager.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"
#include "runtime/session.h"
#include "train/variable.h"

namespace strata {
namespace fit {

class Checkpoint {
 public:
  // Adds to `scope`'s graph, under the sub-scope "checkpoint", a read of
  // every variable and a placeholder and an assignment of every variable,
  // grouped by one NoOp. Call it before the Session is made. InvalidArgument
  // if `variables` is empty, holds a null or two variables of one name.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Create(const Scope& scope,
                                                            const std::vector<train::Variable*>& variables);

  // State of the program's own, saved as the checkpoint's metadata under
  // `key` (any bytes; stored base64-encoded, read back by
  // ReadTrackedString) or as a tensor `name` of that dtype and shape. `restore`
  // runs in Restore after the variables are assigned, in tracking order. A
  // key or name may be tracked once and may not be a variable's name.
  absl::Status TrackString(const std::string& key, std::function<absl::StatusOr<std::string>()> save,
                           std::function<absl::Status(const std::string&)> restore);
  absl::Status TrackTensor(const std::string& name, DataType dtype, const TensorShape& shape,
                           std::function<absl::StatusOr<Tensor>()> save,
                           std::function<absl::Status(const Tensor&)> restore);

  // What a save writes: every variable's value (read in `session`) and every
  // tracked tensor; the tracked strings as metadata; where state is sharded
  // over the processes (every_process_saves()), this process's `pieces` of
  // it, in the same Session::Run (FailedPrecondition without `pieces`).
  absl::Status Collect(Session* session, std::vector<std::pair<std::string, Tensor>>* tensors,
                       std::map<std::string, std::string>* metadata,
                       std::vector<TensorPiece>* pieces = nullptr) const;

  // Whether a save needs every process of the run: optimizer state sharded
  // over the workers goes into a sharded checkpoint, to which every worker
  // writes its shard.
  bool every_process_saves() const { return every_process_saves_; }
  // This process's pieces of the sharded state (a worker's shard).
  absl::Status ReadPieces(Session* session, std::vector<TensorPiece>* pieces) const;
  // The partitions of the partitioned variables, in order, as pieces of
  // their variables read from `session` a block of rows at a time: what the
  // saving process writes, each to a shard of its own. The pieces refer to
  // this Checkpoint and `session`.
  std::vector<StreamedPiece> PartitionPieces(Session* session) const;
  // The most bytes of a partition read or restored at once (whole rows, at
  // least one): 4 MiB unless set. InvalidArgument if < 1.
  absl::Status set_block_bytes(int64_t bytes);
  // The tensors the shards hold (the pieces' and the partitions').
  std::vector<SlicedTensor> sliced_tensors() const;
  // Every process's report (its shard's `name` and whether it was
  // `written`), gathered in process order as pairs of doubles: every
  // process runs it together, once per save.
  absl::StatusOr<std::vector<double>> ExchangeReports(Session* session, double name, bool written) const;

  // Assigns every variable from `reader`, then restores the tracked state.
  absl::Status Restore(Session* session, const CheckpointReader& reader) const;

  const std::vector<train::Variable*>& variables() const { return variables_; }

 private:
  struct TrackedString {
    std::string key;
    std::function<absl::StatusOr<std::string>()> save;
    std::function<absl::Status(const std::string&)> restore;
  };
  struct TrackedTensor {
    std::string name;
    CheckpointReader::TensorInfo info;
    std::function<absl::StatusOr<Tensor>()> save;
    std::function<absl::Status(const Tensor&)> restore;
  };
  Checkpoint() = default;
  bool Taken(const std::string& name) const;

  // One saved tensor: a variable, or one of the tensors a sharded one holds.
  struct Entry {
    std::string name;
    DataType dtype;
    TensorShape shape;
    std::string read;  // the output that reads it
    std::string feed;  // the placeholder its restore is fed to
  };
  // This process's piece of a tensor sharded over the processes: its
  // elements from element_offset, flattened.
  struct Piece {
    std::string name;
    std::string read;
    int64_t element_offset;
  };
  // A partition of a partitioned variable, read and written a block of
  // rows at a time: where its elements lie in the variable's; the read of
  // its rows [begin, begin + size) (feeds of every dimension's), flattened;
  // its restore's assignment of zeros, then of rows [first, limit) from a
  // flat feed of their values.
  struct Part {
    std::string name;  // the variable's
    DataType dtype = DT_INVALID;
    int dims = 0;
    int64_t element_offset = 0;
    int64_t rows = 0, row_elements = 0, row_bytes = 0;
    std::string begin_feed, size_feed, read;
    std::string zero, first_feed, limit_feed, values_feed, write;
  };
  absl::Status AddPartitioned(const Scope& save, const Scope& restore, train::Variable* v);
  // How many of `p`'s rows a block holds.
  int64_t BlockRows(const Part& p) const;
  // Assigns every partition from `reader`, a block of rows at a time.
  absl::Status RestorePartitions(Session* session, const CheckpointReader& reader) const;
  // The entries of sharded variable `v` (train::ShardedContents), and its
  // copies' assignments from them.
  absl::Status AddSharded(const Scope& save, const Scope& restore, train::Variable* v,
                          std::vector<Node*>* assigns);
  // The values of the entries read here (if `entries`), then of the pieces,
  // in order (one Session::Run).
  absl::Status ReadEntries(Session* session, bool entries, std::vector<Tensor>* values) const;

  std::vector<train::Variable*> variables_;
  std::vector<Entry> entries_;  // `read` empty: a sliced tensor, in pieces_
  std::vector<Piece> pieces_;
  std::vector<Entry> partitioned_;  // whole variables saved from parts_
  std::vector<Part> parts_;
  int64_t block_bytes_ = int64_t{4} << 20;
  std::string report_feed_, report_fetch_;
  bool every_process_saves_ = false;
  std::string restore_target_;
  std::vector<TrackedString> strings_;
  std::vector<TrackedTensor> tensors_;
};

// What RestoreOrInitialize did.
struct Restored {
  int64_t step = 0;            // the checkpoint's step; 0 when initialized
  std::string prefix;          // the checkpoint restored; "" when initialized
  std::vector<absl::Status> skipped;  // corrupt newer checkpoints passed over
};

class CheckpointManager {
 public:
  // Checkpoints of `checkpoint` in `dir` (made if needed), keeping the
  // newest `max_to_keep` (0: all). InvalidArgument for a negative count.
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(const Checkpoint* checkpoint,
                                                                   const std::string& dir, int max_to_keep);

  const Checkpoint& checkpoint() const { return *checkpoint_; }

  // Writes "<dir>/ckpt-<step>" atomically with every tracked value, its
  // metadata "global_step" = step; returns its prefix. Where
  // every_process_saves(), the chief's part: its shard, the exchange, the
  // commit (Aborted naming the worker whose shard was not written).
  absl::StatusOr<std::string> Save(Session* session, int64_t step);
  // Another worker's part in the chief's Save of `step` where
  // every_process_saves() (nothing otherwise): its shard and the exchange.
  absl::Status SaveShard(Session* session, int64_t step);

  // The newest intact checkpoint (corrupt newer ones skipped, each reported
  // in `skipped`); NotFound when the directory holds none.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenLatest(std::vector<absl::Status>* skipped = nullptr) const;

  // Restores the newest intact checkpoint, or runs `init` (the variables'
  // initializer) when there is none.
  absl::StatusOr<Restored> RestoreOrInitialize(Session* session, const Node* init);

  const std::string& directory() const { return files_->directory(); }
  std::vector<std::string> checkpoints() const { return files_->checkpoints(); }

 private:
  CheckpointManager(const Checkpoint* checkpoint, std::unique_ptr<::strata::CheckpointManager> files)
      : checkpoint_(checkpoint), files_(std::move(files)) {}
  // Writes this process's shard of `step` (unless `status`, the read's, is
  // an error) and exchanges the reports; returns them, or this process's
  // error.
  absl::StatusOr<std::vector<double>> WriteShard(Session* session, int64_t step, absl::Status status,
                                                 const std::vector<TensorPiece>& pieces);
  static std::string ShardName(double name);
  // A fresh shard name (48 random bits), as a double.
  static double FreshShardName();
  // Writes every partition of the partitioned variables to a shard of its
  // own, one at a time, appending the shards' prefixes to `prefixes`.
  absl::Status WritePartitions(Session* session, int64_t step, std::vector<std::string>* prefixes);
  const Checkpoint* const checkpoint_;
  const std::unique_ptr<::strata::CheckpointManager> files_;
};

// The value TrackString saved under `key` (decoded); FailedPrecondition
// naming the checkpoint and the key if absent, DataLoss if garbled.
absl::StatusOr<std::string> ReadTrackedString(const CheckpointReader& reader, const std::string& key);

// The step a checkpoint was saved at (its "global_step" metadata);
// DataLoss naming the checkpoint if it is missing or not a step.
absl::StatusOr<int64_t> CheckpointStep(const CheckpointReader& reader);

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_CHECKPOINT_H_
