// ReduceScatterDirect: reduce-scatter for ranks that share one address
// space (LocalCollectiveExecutor's devices, threads of one process). The
// ranks exchange their inputs' addresses, then rank r reduces block r from
// every input straight into its output (ReduceInputs: one pass over each
// input's block, Div fused), and a closing exchange makes sure no rank
// frees its input while a peer still reads it. Each input byte is read
// once, each output byte written once, nothing goes through the transport
// but addresses.
//
// Create fails (FailedPrecondition) unless same_address_space, and as
// CheckReduceScatter (reduce_scatter_ring.h).
//
// Thread-safety: one object per rank per collective. Ownership: none.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_DIRECT_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_DIRECT_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class ReduceScatterDirect : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit ReduceScatterDirect(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_REDUCE_SCATTER_DIRECT_H_
