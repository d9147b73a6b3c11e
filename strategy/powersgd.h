// PowerSGD gradient compression (StrategyOptions::gradient_compression =
// "powersgd"; Vogels et al., "PowerSGD: Practical Low-Rank Gradient
// Compression for Distributed Optimization", 2019; the algorithm of
// PyTorch's powerSGD_hook): each replica's gradient matrix M [n, m] is
// replaced on the wire by two thin factors.
//
// In replica r's trace, for the gradient of each variable it compresses
// (rank >= 2, float or double, and worth it: n m >= min_compression_rate *
// (n + m) * rank, where n is the product of all dims but the last and m the
// last):
//   M = grad (reshaped [n, m]) + error      error feedback: what earlier
//                                           steps' approximations missed
//   P = M Q;        P all-reduced (mean)    Q [m, rank]: warm-started, the
//   P = Qr(P).q                             previous step's reduced Q
//   Q = M^T P;      Q all-reduced (mean)
//   approx = P Q^T  (the same on every replica: the update's gradient)
//   error = M - approx
// (Q is kept transposed, [rank, m], so that each product streams M by rows:
// P^T M rather than M^T P.)
// The P's of all matrices travel together (with the gradients that are not
// compressed, all-reduced as they are), then the Q's, in buckets of
// gradient_bucket_bytes. For the first powersgd_start_step steps every
// gradient is all-reduced as it is (a conditional on a step counter,
// graph/ops/core_ops.h Switch/Merge): early gradients change too fast for a
// low-rank approximation.
//
// State: per compressed variable a mirrored Q (seeded normal, identical on
// every replica and worker) and an error buffer (each replica's own), and
// one step counter; all scratch, left out of checkpoints (a resumed run
// restarts compression with a zero error and fresh Q, after start_step
// plain steps again), so checkpoints stay those of an uncompressed run.
//
// Errors (InvalidArgument naming the option and the variable): a name in
// powersgd_variables that is no variable of the step, or that names a
// vector (PowerSGD compresses matrices); a rank < 1; start_step < 0.
//
// Thread-safety: as for train::Optimizer (build with one thread).
// Ownership: the state variables belong to the graph's collection.
#ifndef STRATA_STRATEGY_POWERSGD_H_
#define STRATA_STRATEGY_POWERSGD_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "strategy/gradient_bucketing.h"
#include "strategy/replica_context.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {

class PowerSgd {
 public:
  // InvalidArgument naming the option for out-of-range powersgd_* options.
  static absl::Status CheckOptions(const StrategyOptions& options);

  // The mean over the replicas of each gradient (its approximation for the
  // compressed ones), in the order of `grads_and_vars` (this replica's
  // gradients, the strategy's variables). The options must have passed
  // CheckOptions.
  absl::StatusOr<OutputList> AllReduce(const Scope& scope, ReplicaContext& ctx,
                                       const std::vector<train::GradAndVar>& grads_and_vars);

  // The variables compressed so far (for tests and logs).
  std::vector<const train::Variable*> compressed() const;

 private:
  struct Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t rank = 0;                  // powersgd_rank, at most rows and cols
    train::Variable* q = nullptr;      // mirrored Q^T [rank, cols]
    train::Variable* error = nullptr;  // mirrored [rows, cols], each copy its replica's
  };
  // Replica 0 decides and makes the state for each variable; the others
  // find it. nullptr: sent uncompressed.
  absl::StatusOr<const Matrix*> MatrixOf(const Scope& scope, ReplicaContext& ctx,
                                         const train::Variable* var);
  absl::Status MakeStep(const Scope& scope, ReplicaContext& ctx);
  // The compressed branch: `grads` (those with a matrix compressed, the
  // others all-reduced with the P factors), each of `shapes`.
  absl::StatusOr<OutputList> Compressed(const Scope& c, ReplicaContext& ctx,
                                        const std::vector<const Matrix*>& matrix,
                                        const std::vector<GradientSpec>& specs,
                                        const std::vector<TensorShape>& shapes,
                                        const OutputList& grads);

  absl::flat_hash_map<const train::Variable*, std::unique_ptr<Matrix>> matrices_;
  std::vector<const train::Variable*> order_;
  train::Variable* step_ = nullptr;  // mirrored int64 scalar
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_POWERSGD_H_
