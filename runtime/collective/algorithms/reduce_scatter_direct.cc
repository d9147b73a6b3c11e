#include "runtime/collective/algorithms/reduce_scatter_direct.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/algorithms/reduce_scatter_ring.h"
#include "runtime/collective/reduction.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kReduceScatter, "direct", ReduceScatterDirect);

namespace {
constexpr uint64_t kTagAddress = 0;
constexpr uint64_t kTagDone = 1;
}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> ReduceScatterDirect::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReduceScatter(p, "direct"));
  if (!p.same_address_space) {
    return absl::FailedPreconditionError(
        "reduce-scatter algorithm 'direct' reads the peers' inputs, so every rank must share one "
        "address space; this group's transport does not (use ring)");
  }
  return std::unique_ptr<CollectiveAlgorithm>(new ReduceScatterDirect(p));
}

absl::Status ReduceScatterDirect::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const int64_t block = p_.num_elements / n;
  const size_t block_bytes = block * DataTypeSize(p_.dtype);
  if (block == 0) return absl::OkStatus();  // the same on every rank
  // 1. Every rank's input address.
  std::vector<const void*> inputs(n);
  inputs[r] = input;
  STRATA_RETURN_IF_ERROR(
      ExchangeWithPeers(t, kTagAddress, &inputs[r], inputs.data(), sizeof(void*)));
  // 2. Block r of every input, reduced into this rank's output.
  for (const void*& in : inputs) in = static_cast<const char*>(in) + r * block_bytes;
  ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, inputs.data(), n, 0, block, output, n);
  // 3. Once every rank is done, nobody reads a peer's input any more.
  return ExchangeWithPeers(t, kTagDone, nullptr, nullptr, 0);
}

}  // namespace strata
