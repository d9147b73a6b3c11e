// AllReduceReduceToOne: all-reduce by funnelling through rank 0, like
// tf.distribute's ReductionToOneDevice: every other rank sends its tensor to
// rank 0, which merges them in rank order (so the float result does not
// depend on arrival order), applies the final op and sends the result back
// to every rank. Two hops whatever the group size, so it wins for small
// tensors; rank 0 moves 2(n-1) tensors, so the ring wins for large ones.
//
// Thread-safety: one object per rank per collective. Ownership: rank 0 owns
// one tensor-sized scratch buffer.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_REDUCE_TO_ONE_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_REDUCE_TO_ONE_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllReduceReduceToOne : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllReduceReduceToOne(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
  Tensor scratch_;  // rank 0: one peer's tensor
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_REDUCE_TO_ONE_H_
