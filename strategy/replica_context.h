// ReplicaContext: what a step function sees while Strategy::Run traces it for
// one replica (tf.distribute.ReplicaContext): the replica's id, device and
// scope, and all-reduce, reduce-scatter and all-gather across the replicas.
//
//   strategy->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>& in)
//                           -> absl::StatusOr<ReplicaResult> {
//     const Scope& s = ctx.scope();          // "replica_<id>/", on ctx.device()
//     Output local = ops::Sum(s, in[0], ops::Const(s, 0));
//     STRATA_ASSIGN_OR_RETURN(Output total, ctx.AllReduce(s, ReduceOp::kSum, local));
//     return ReplicaResult{{total}, {}};
//   });
//
// AllReduce adds one CollectiveReduce (CollectiveReduceV2) node per value on
// the replica's device, with the strategy's group key, the replica count as
// group size, and the next instance key of this trace: every replica's trace
// starts from the same key, so the k-th collective of each replica meets the
// k-th of the others. kMean is merge Add with final Div. With one replica no
// collective is made: the value passes through an Identity.
//
// Thread-safety: a context exists only during Run, on the tracing thread;
// ReplicaContext::Current() is per thread. Ownership: Run owns the context;
// the strategy outlives it.
#ifndef STRATA_STRATEGY_REPLICA_CONTEXT_H_
#define STRATA_STRATEGY_REPLICA_CONTEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "strategy/strategy.h"

namespace strata {
namespace distribute {

class ReplicaContext {
 public:
  // The context of the replica being traced on this thread, or nullptr
  // outside Strategy::Run (the cross-replica context).
  static ReplicaContext* Current();

  ReplicaContext(const ReplicaContext&) = delete;
  ReplicaContext& operator=(const ReplicaContext&) = delete;

  Strategy* strategy() const { return strategy_; }
  int replica_id() const { return replica_id_; }
  int num_replicas_in_sync() const { return strategy_->num_replicas_in_sync(); }
  // The replica's device (full name).
  const std::string& device() const { return strategy_->devices()[replica_id_]; }
  // The replica's scope: name prefix "replica_<id>" (under Run's scope) and
  // the replica's device.
  const strata::Scope& scope() const { return scope_; }
  // The scope Run was called with (no replica prefix, no device).
  const strata::Scope& cross_replica_scope() const { return cross_replica_scope_; }
  // The node-name prefix of scope() ("replica_1" or "train/replica_1").
  const std::string& name_prefix() const { return name_prefix_; }

  // Sum or mean over the replicas of each value, elementwise (same dtype and
  // shape on every replica). Nodes are made in `scope` on this replica's
  // device. Errors: the scope's; InvalidArgument for a null value or a dtype
  // a collective cannot reduce, or kMean of an integer.
  // With `differentiable`, each collective also reserves the next instance
  // key for its gradient (graph/ops/collective_ops.h), so a loss computed
  // from the reduced value can be minimized: the gradient all-reduces the
  // output gradients over the replicas (as tf.distribute's
  // ReplicaContext.all_reduce under a GradientTape).
  absl::StatusOr<std::vector<Output>> AllReduce(const strata::Scope& scope, ReduceOp op,
                                                const std::vector<Output>& values, bool differentiable = false);
  absl::StatusOr<Output> AllReduce(const strata::Scope& scope, ReduceOp op, Output value);

  // This replica's rank in the strategy's collectives: its block of
  // ReduceScatter and its place in AllGather. Workers in order, and within
  // a worker its devices in name order (the executors' ranks), which is
  // the replicas' order unless a worker has more than 10 devices of a kind
  // ("CPU:10" sorts before "CPU:2").
  int collective_rank() const;
  // The sum or mean over the replicas of `value`, cut along dimension 0
  // into num_replicas_in_sync() equal blocks: this replica gets block
  // collective_rank() (CollectiveReduceScatterV2; as ZeRO shards gradients).
  // Errors as AllReduce's, and InvalidArgument for a scalar or a known
  // dimension 0 that does not split. With one replica: an Identity.
  absl::StatusOr<Output> ReduceScatter(const strata::Scope& scope, ReduceOp op, Output value);
  // Every replica's `value` concatenated along dimension 0 in
  // collective_rank() order (CollectiveGatherV2; tf.distribute's
  // ReplicaContext.all_gather with axis 0). InvalidArgument for a null or
  // scalar value or a dtype the collectives do not move.
  absl::StatusOr<Output> AllGather(const strata::Scope& scope, Output value);

  // One collective this trace made, for Run's cross-replica check.
  struct CollectiveRecord {
    int instance_key;
    DataType dtype;
    PartialTensorShape shape;
    std::string node;
  };
  const std::vector<CollectiveRecord>& collectives() const { return collectives_; }

 private:
  friend class Strategy;
  ReplicaContext(Strategy* strategy, int replica_id, strata::Scope scope,
                 strata::Scope cross_replica_scope, std::string name_prefix,
                 int first_instance_key);
  // Makes `ctx` this thread's current context; returns the previous one.
  static ReplicaContext* SetCurrent(ReplicaContext* ctx);

  Strategy* const strategy_;
  const int replica_id_;
  const strata::Scope scope_;
  const strata::Scope cross_replica_scope_;
  const std::string name_prefix_;
  int next_instance_key_;
  std::vector<CollectiveRecord> collectives_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_REPLICA_CONTEXT_H_
