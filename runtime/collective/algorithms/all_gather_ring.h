// AllGatherRing: all-gather around the ring 0 -> 1 -> ... -> n-1 -> 0. The
// output holds n blocks, rank r's input in block r; in step s each rank
// forwards the block it received in step s-1 (its own first) to its right
// neighbour and receives the next one from its left, straight into place.
// n-1 steps, each rank sending (n-1) blocks, all in parallel.
//
// Thread-safety: one object per rank per collective. Ownership: no buffers.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RING_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllGatherRing : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllGatherRing(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RING_H_
