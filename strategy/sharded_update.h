// ShardedUpdates: ZeRO stage 1 (StrategyOptions::zero_stage = 1), the
// part of DistributedOptimizer that shards the optimizer's state: each of
// the N replicas keeps the slots (Adam's m and v, momentum) of its 1/N of
// the parameters only, and the model code does not change.
//
// In replica r's trace of ApplyGradients, for each dtype's group of
// variables (flattened in creation order, concatenated, zero-padded to N
// blocks of B elements; replica r owns block k = collective_rank()):
//   Scatter  the group's gradients are reduce-scattered (mean): the replica
//            gets gradient block k [B]. Block k of the replica's copy of the
//            parameters is copied into the group's shard variable (mirrored,
//            [B]: copy r holds block k). The optimizer updates the shard
//            variable with the gradient block and makes its slots for it:
//            [B] each, so a replica's optimizer state is 1/N of unsharded.
//   Finish   each replica's updated block is all-gathered and cut back into
//            the replica's copies of the parameters, which so stay the same
//            on every replica, as under plain mirroring.
// The updates are elementwise (SGD, Momentum, Adam, AdamW), so a block's
// update equals the unsharded update of those elements; only the order of
// the gradients' summation differs. Clipping by global norm sums the
// replicas' parts of the squared norm (CombineSquaredNorm).
//
// The slots carry ShardedContents (train/variable.h) naming the unsharded
// slots they stand for ("dense/kernel/Adam"), so a checkpoint saves what an
// unsharded run saves; the shard variable itself is scratch, not saved.
//
// Errors (InvalidArgument naming the option and the variable): a variable
// of a dtype reduce-scatter cannot average (not float or double).
//
// Thread-safety: as for train::Optimizer (build with one thread).
// Ownership: the shard variables belong to the graph's collection.
#ifndef STRATA_STRATEGY_SHARDED_UPDATE_H_
#define STRATA_STRATEGY_SHARDED_UPDATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "strategy/replica_context.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {

class ShardedUpdates {
 public:
  // `grads_and_vars`: the optimizer's checked pairs (the strategy's
  // variables). Returns one pair per group: (the gradient block, this
  // replica's copy of the group's shard variable), made in replica 0's
  // trace under "<optimizer_name>/zero_<dtype>".
  absl::StatusOr<std::vector<train::GradAndVar>> Scatter(
      const Scope& scope, ReplicaContext& ctx, const std::string& optimizer_name,
      const std::vector<train::GradAndVar>& grads_and_vars);
  // After the optimizer's updates of Scatter's pairs: the all-gathers and
  // the assignments of the replica's parameter copies.
  absl::StatusOr<std::vector<Node*>> Finish(const Scope& scope, ReplicaContext& ctx,
                                            const std::vector<Node*>& updates);
  // Whether this trace's gradients are sharded (between Scatter and Finish).
  bool sharding() const { return !pending_.empty(); }

  // The mirrored shard variable whose copy `component` is, and which copy;
  // {nullptr, -1} for any other variable.
  std::pair<train::Variable*, int> ShardOf(const train::Variable* component) const;
  // Replica 0 made `slots` for shard variable `shard`: marks what they hold.
  absl::Status MarkSlots(const train::Variable* shard, const std::vector<train::Variable*>& slots) const;

 private:
  struct Group {
    DataType dtype;
    std::vector<train::Variable*> vars;  // the strategy's variables, in flat order
    std::vector<int64_t> offsets;
    int64_t total = 0;
    int64_t block = 0;
    train::Variable* shard = nullptr;  // mirrored [block]
    std::vector<int> component_of_block;
  };
  // This trace's groups and the replica's copies of their variables.
  struct Pending {
    const Group* group;
    std::vector<train::Variable*> copies;
    train::Variable* shard_copy;
  };

  absl::StatusOr<Group*> FindOrMakeGroup(const Scope& scope, ReplicaContext& ctx,
                                         const std::string& optimizer_name, DataType dtype,
                                         const std::vector<train::Variable*>& vars);

  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<Pending> pending_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_SHARDED_UPDATE_H_
