// What layers need to know about the step they are built into, beyond their
// input: whether it trains (Keras's `training` argument), and, under a
// distribution strategy, which replica they are traced for and how to sum
// over the replicas. Layers whose behaviour depends on them (Dropout,
// BatchNormalization: train/phase_layers.h) read both when applied; the
// rest ignore them.
//
//   {
//     train::TrainingPhase training(true);        // fit::Fit sets this in its step
//     Output h = *dropout.Apply(root, x);         // drops, scales by 1 / (1 - rate)
//   }
//   Output y = *dropout.Apply(eval, x);           // inference (the default): x
//
// The replica is set by Strategy::Run while it traces each replica's step
// (strategy/strategy.h); outside Run there is one replica and nothing to
// reduce.
//
// Both are per thread and nest as stack objects (destroy in reverse order
// of creation). Thread-safety: per thread by construction. Ownership: the
// objects refer to nothing they do not own; the replica's all_reduce_sum
// must stay valid while its ReplicaScope lives.
#ifndef STRATA_TRAIN_PHASE_H_
#define STRATA_TRAIN_PHASE_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"

namespace strata {
namespace train {

// While alive, layers applied on this thread build their training form.
class TrainingPhase {
 public:
  explicit TrainingPhase(bool training);
  ~TrainingPhase();
  TrainingPhase(const TrainingPhase&) = delete;
  TrainingPhase& operator=(const TrainingPhase&) = delete;

 private:
  const bool previous_;
};

// True inside a TrainingPhase(true) (the innermost one decides); false
// otherwise.
bool InTrainingPhase();

// The replica a step is being traced for.
struct ReplicaInfo {
  int replica_id = 0;    // in [0, num_replicas): unique over every worker
  int num_replicas = 1;  // replicas training in lockstep (all workers)
  // Sums each value elementwise over the replicas (same dtype and shape on
  // each; float or double); every replica must call it the same number of
  // times in the same order. Differentiable: the gradient of an input is
  // the sum over the replicas of the gradients of the output. Null with
  // one replica.
  std::function<absl::StatusOr<std::vector<Output>>(const Scope& scope, const std::vector<Output>& values)>
      all_reduce_sum;
};

// While alive, CurrentReplica() on this thread is `info`.
class ReplicaScope {
 public:
  explicit ReplicaScope(ReplicaInfo info);
  ~ReplicaScope();
  ReplicaScope(const ReplicaScope&) = delete;
  ReplicaScope& operator=(const ReplicaScope&) = delete;

 private:
  const ReplicaInfo info_;
  const ReplicaInfo* const previous_;
};

// The innermost ReplicaScope's info, or replica 0 of 1 outside any.
const ReplicaInfo& CurrentReplica();

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_PHASE_H_
