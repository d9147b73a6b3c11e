// AllReduceDirect: all-reduce for ranks that share one address space (the
// virtual CPU devices of one process). Rather than moving chunks through the
// transport, the ranks exchange only the addresses of their input and output
// buffers (one small message to each peer); then rank r reduces its 1/n
// slice of the element range by reading all n inputs directly, in one pass
// (ReduceInputs: every input read once, the result written once, Div fused),
// and writes the slice to every distinct output buffer. A final exchange of
// empty messages is the barrier after which no rank reads a peer's buffers,
// so each rank may return (and its peers free their buffers).
//
// When every rank passes the same output buffer (LocalCollectiveExecutor
// hands all ranks one shared host tensor), each element is written exactly
// once; with distinct outputs (the N-rank test harness) each slice is also
// copied to the n-1 other outputs.
//
//   AlgorithmParams p = ...;  p.same_address_space = true;
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(kAllReduce, "direct", p));
//   STRATA_RETURN_IF_ERROR(alg->Run(transport, input, shared_output));
//
// When the caller already knows every rank's input and gives all ranks one
// output (AlgorithmParams::peer_inputs; LocalCollectiveExecutor does), the
// address exchange is skipped and the barrier is the only synchronization.
//
// Every rank ends with bitwise the same result: each element is reduced by
// one rank, in rank order. Create fails (FailedPrecondition) unless
// params.same_address_space: addresses mean nothing across processes.
//
// Thread-safety: one object per rank per collective. Ownership: none; the
// peers' buffers are read only between the two exchanges.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_DIRECT_H_
#define STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_DIRECT_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllReduceDirect : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllReduceDirect(const AlgorithmParams& p) : p_(p) {}
  int64_t SliceBegin(int r) const;  // element offset of rank r's slice

  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_DIRECT_H_
