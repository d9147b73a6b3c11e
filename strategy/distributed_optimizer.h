// DistributedOptimizer<Base>: one of the training optimizers (train::SGD,
// Momentum, Adam) that all-reduces gradients across the replicas of the
// strategy whose Run traces it, then applies the same update to every
// replica's copy of each variable. Outside a strategy it is exactly Base, so
// model code can always use it.
//
//   DistributedOptimizer<train::Adam> adam(1e-3);      // Base's constructors
//   // inside the step function of strategy->Run:
//   STRATA_ASSIGN_OR_RETURN(Node* train_op,
//                           train::Minimize(ctx.scope(), loss, model->reads(), &adam));
//
// What ApplyGradients does in replica r's trace: AggregateGradients (the
// hook of train::Optimizer) calls Strategy::AggregateGradients, which
// all-reduces the replica's gradients (mean; fused in buckets,
// gradient_bucketing.h) and pairs each with the replica's copy of its
// variable; Base's update ops then update that copy on the replica's
// device. The step counter and the slots are mirrored variables made once
// (in replica 0's trace, under the strategy); replica r > 0 updates the
// slots' component r. The graph's collection holds each slot once (the
// mirrored variable, named as on one device), so checkpoints look the same
// whatever the replica count. Under StrategyOptions::zero_stage 1 the
// slots are sharded instead (strategy/sharded_update.h).
//
// Errors (recorded in the scope; ApplyGradients returns nullptr): a variable
// not made under the strategy when there are several replicas; mirrored
// variables updated outside Run; replicas whose slots disagree.
//
// Thread-safety: as for train::Optimizer (build with one thread).
// Ownership: as for train::Optimizer; the optimizer must outlive its
// ApplyGradients calls only.
#ifndef STRATA_STRATEGY_DISTRIBUTED_OPTIMIZER_H_
#define STRATA_STRATEGY_DISTRIBUTED_OPTIMIZER_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/scope.h"
#include "strategy/sharded_update.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {

// The part of DistributedOptimizer that does not depend on Base.
class ReplicaUpdates {
 public:
  ReplicaUpdates() : side_(Scope::NewRootScope()) {}

  // The optimizer's AggregateGradients (errors recorded in `scope`); under
  // StrategyOptions::zero_stage 1, ShardedUpdates::Scatter.
  std::vector<train::GradAndVar> Aggregate(const Scope& scope, const std::string& optimizer_name,
                                           const std::vector<train::GradAndVar>& grads_and_vars);
  // The optimizer's AggregateSparseGradients: as given with one replica in
  // sync (parameter servers), InvalidArgument otherwise.
  std::vector<train::SparseGradient> AggregateSparse(
      const Scope& scope, const std::string& optimizer_name,
      const std::vector<train::SparseGradient>& sparse);
  // The optimizer's FinishUpdates and CombineSquaredNorm.
  std::vector<Node*> Finish(const Scope& scope, const std::vector<Node*>& updates);
  Output CombineSquaredNorm(const Scope& scope, Output part);

  // The optimizer's CreateSlots: `base` is Base::CreateSlots.
  void CreateSlots(const Scope& scope, train::Variable* var,
                   const std::function<void(const Scope&, train::Variable*)>& base);

 private:
  // Replica r > 0 updates copy r of a distributed variable: which.
  absl::flat_hash_map<const train::Variable*, std::pair<train::Variable*, int>> component_of_;
  // Sharded optimizer state (zero_stage 1).
  ShardedUpdates sharded_;
  // The slots replica 0 made for each distributed variable, in creation order.
  absl::flat_hash_map<const train::Variable*, std::vector<train::Variable*>> slots_;
  // The optimizer keeps one slot table per variable object, so the
  // components of replicas r > 0 need slot objects of their own: views of
  // the mirrored slots' components, registered in this private graph's
  // collection rather than the model's (see the .cc).
  Scope side_;
};

template <typename Base>
class DistributedOptimizer : public Base {
 public:
  using Base::Base;

  std::vector<train::GradAndVar> AggregateGradients(
      const Scope& scope, const std::vector<train::GradAndVar>& grads_and_vars) override {
    return updates_.Aggregate(scope, this->name(), grads_and_vars);
  }
  std::vector<train::SparseGradient> AggregateSparseGradients(
      const Scope& scope, const std::vector<train::SparseGradient>& sparse) override {
    return updates_.AggregateSparse(scope, this->name(), sparse);
  }
  std::vector<Node*> FinishUpdates(const Scope& scope, const std::vector<Node*>& updates) override {
    return updates_.Finish(scope, updates);
  }
  Output CombineSquaredNorm(const Scope& scope, Output part) override {
    return updates_.CombineSquaredNorm(scope, part);
  }

 protected:
  void CreateSlots(const Scope& scope, train::Variable* var) override {
    updates_.CreateSlots(scope, var,
                         [this](const Scope& s, train::Variable* v) { Base::CreateSlots(s, v); });
  }

 private:
  ReplicaUpdates updates_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_DISTRIBUTED_OPTIMIZER_H_
