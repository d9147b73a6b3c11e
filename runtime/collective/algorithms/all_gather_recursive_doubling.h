// AllGatherRecursiveDoubling: all-gather in log2(n) steps for a group whose
// size is a power of two. After step k each rank holds the blocks of its
// aligned group of 2^(k+1) ranks; in step k it sends the 2^k blocks it
// holds (contiguous in the output) to rank r xor 2^k and receives that
// rank's 2^k into place. Each rank sends n-1 blocks in all, as in the ring,
// but waits for log2(n) exchanges instead of n-1: fewer round trips where
// each costs more than the bytes (small blocks over TCP).
//
// Errors: FailedPrecondition at Create for a group size that is not a
// power of two (SelectAlgorithm picks it only for those).
// Thread-safety: one object per rank per collective. Ownership: no buffers.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RECURSIVE_DOUBLING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RECURSIVE_DOUBLING_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllGatherRecursiveDoubling : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllGatherRecursiveDoubling(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_RECURSIVE_DOUBLING_H_
