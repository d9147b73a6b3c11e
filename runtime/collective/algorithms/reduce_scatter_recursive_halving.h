// ReduceScatterRecursiveHalving: reduce-scatter in log2(n) steps for a
// group whose size is a power of two. Each rank starts with all n blocks
// to reduce; in each step it halves the range it works on: it sends the
// half without its own block to rank r xor (half the range's blocks), whose
// own block lies there, receives that rank's partial of its own half and
// merges it in. After log2(n) steps it holds block r reduced over every
// rank (merge_op, then final_op). Each rank sends n-1 blocks in all, as in
// the ring, in log2(n) exchanges instead of n-1: fewer round trips where
// each costs more than the bytes (small blocks over TCP).
//
// Create fails as ReduceScatterRing's does, and with FailedPrecondition for
// a group size that is not a power of two (SelectAlgorithm picks it only
// for those).
// Thread-safety: one object per rank per collective. Ownership: two
// scratch buffers of n/2 blocks of its own.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RECURSIVE_HALVING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RECURSIVE_HALVING_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class ReduceScatterRecursiveHalving : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit ReduceScatterRecursiveHalving(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
  Tensor scratch_[2];  // the partials of the range kept, and what arrives
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RECURSIVE_HALVING_H_
