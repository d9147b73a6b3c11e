// AllReduceRing: all-reduce as a reduce-scatter followed by an all-gather
// around the ring 0 -> 1 -> ... -> n-1 -> 0 (Baidu/Horovod/NCCL's ring). The
// tensor is cut into n near-equal chunks (sizes differ by at most one
// element; some are empty when there are fewer elements than ranks). Each
// rank sends and receives n-1 chunks in each phase, so it moves 2(n-1)/n of
// the tensor regardless of n, all ranks in parallel. Div is applied by the
// chunk's owner between the phases, once per element.
//
// Every rank ends with bitwise the same result: each chunk is reduced along
// one chain and then copied.
//
// Thread-safety: one object per rank per collective. Ownership: owns its
// scratch chunk.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_RING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_RING_H_

#include <memory>
#include <vector>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllReduceRing : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllReduceRing(const AlgorithmParams& p);
  int64_t ChunkBegin(int c) const;  // element offset of chunk c
  int64_t ChunkSize(int c) const { return ChunkBegin(c + 1) - ChunkBegin(c); }

  const AlgorithmParams p_;
  const size_t elem_bytes_;
  Tensor scratch_;  // one chunk received from the left
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_RING_H_
