// MirroredVariable: one logical variable kept as one copy (component) per
// replica device, as tf.distribute.MirroredVariable. MirroredStrategy makes
// them through the variable-creator hook; model code sees a train::Variable.
//
//   StrategyScope in_scope = strategy->Scope();
//   Variable* w = CreateVariable(root, "w", TensorShape{3}, DT_FLOAT, GlorotUniform(1));
//   w->num_replicas();         // one copy per replica
//   w->replica(1)->name();     // "w/replica_1", on devices()[1]
//   w->distributed_by();       // the strategy
//
// Components: component 0 ("w", the primary) is made with the variable's
// initializer; component r > 0 ("w/replica_r") is initialised with an
// Identity of component 0's initial value (copied to device r), so every
// copy starts bitwise identical; initializer() runs them all.
//
// Reads and writes: inside Strategy::Run (a replica context of the owning
// strategy), Read/Assign/AssignAdd/AssignSub use the tracing replica's own
// component (a write must then have the same value on every replica, e.g.
// an all-reduced one, or the copies drift apart). Outside Run, Read reads
// the primary and the writes update every component (the returned NoOp runs
// after all of them): a checkpoint restore through Assign restores all
// copies. handle() and device() are the primary's. Inside the Run of another
// strategy, the reads and writes fail (InvalidArgument in the scope).
//
// Thread-safety: as for train::Variable. Ownership: the MirroredVariable owns
// its components; the graph's collection owns the MirroredVariable.
#ifndef STRATA_STRATEGY_MIRRORED_VARIABLE_H_
#define STRATA_STRATEGY_MIRRORED_VARIABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/scope.h"
#include "train/variable.h"

namespace strata {
namespace distribute {

class Strategy;

class MirroredVariable : public train::Variable {
 public:
  // `components[r]` lives on the strategy's device r; component 0's handle,
  // name and device are the variable's. `initializer` runs every
  // component's. `creation_index` orders variables by creation (gradient
  // buckets are formed from the last made).
  MirroredVariable(const Strategy* strategy, std::vector<std::unique_ptr<train::Variable>> components,
                   Node* initializer, int64_t creation_index);

  const Strategy* strategy() const { return strategy_; }
  int num_components() const { return static_cast<int>(components_.size()); }
  train::Variable* component(int replica) const { return components_[replica].get(); }
  int64_t creation_index() const override { return creation_index_; }

  // train::Variable's view of the components.
  int num_replicas() const override { return num_components(); }
  train::Variable* replica(int replica) const override { return component(replica); }
  const void* distributed_by() const override { return strategy_; }

  Output Read(const Scope& scope) const override;
  Node* Assign(const Scope& scope, Output value) const override;
  Node* AssignAdd(const Scope& scope, Output value) const override;
  Node* AssignSub(const Scope& scope, Output value) const override;

 private:
  enum class WriteKind { kAssign, kAdd, kSub };
  // The component of the replica being traced, 0 outside Run, or -1 (error
  // recorded in `scope`) inside another strategy's Run.
  int LocalComponent(const Scope& scope) const;
  Node* Write(const Scope& scope, Output value, WriteKind kind) const;

  const Strategy* const strategy_;
  const std::vector<std::unique_ptr<train::Variable>> components_;
  const int64_t creation_index_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_MIRRORED_VARIABLE_H_
