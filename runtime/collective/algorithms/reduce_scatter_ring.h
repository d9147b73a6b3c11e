// ReduceScatterRing: reduce-scatter around the ring 0 -> 1 -> ... -> n-1 ->
// 0, over any Transport. The input is n equal blocks; rank r ends with
// block r reduced over every rank (merge_op, then final_op). In step s
// rank r passes its partial of block (r - s - 1) to its right neighbour
// and receives the partial of block (r - s - 2) from its left, merging its
// own input's block into it; after n - 1 steps it holds block r. Each rank
// sends (n - 1) blocks, all ranks in parallel: the bandwidth-optimal
// schedule, and the first half of AllReduceRing.
//
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(
//       CollectiveType::kReduceScatter, "ring", params));  // num_elements: the whole input's
//   STRATA_RETURN_IF_ERROR(alg->Run(transport, input, output));  // output: one block
//
// Create fails (InvalidArgument) unless num_elements is a multiple of the
// rank count, and for dtypes that cannot be reduced.
//
// Thread-safety: one object per rank per collective. Ownership: two
// scratch blocks of its own.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RING_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class ReduceScatterRing : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit ReduceScatterRing(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
  Tensor scratch_[2];  // partials in flight, one block each
};

// InvalidArgument unless `p` describes a reduce-scatter that splits: a
// reducible dtype and an input of a multiple of p.size elements. `name`
// is the algorithm's, for the message.
absl::Status CheckReduceScatter(const AlgorithmParams& p, const char* name);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_RING_H_
