// BroadcastTree: broadcast from the root along a binomial tree. With ranks
// renumbered so that the root is 0 (v = (rank - root) mod n), rank v > 0
// receives from v minus its lowest set bit, then sends to v + 2^k for every
// 2^k below that bit; ceil(log2 n) rounds, every rank sending the tensor at
// most log2 n times and receiving it once.
//
// Thread-safety: one object per rank per collective. Ownership: no buffers.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_BROADCAST_TREE_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_BROADCAST_TREE_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class BroadcastTree : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit BroadcastTree(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_BROADCAST_TREE_H_
