#include "runtime/collective/algorithms/all_reduce_reduce_to_one.h"

#include <cstring>

#include "base/status.h"
#include "runtime/collective/reduction.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "reduce_to_one",
                                     AllReduceReduceToOne);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceReduceToOne::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  std::unique_ptr<AllReduceReduceToOne> a(new AllReduceReduceToOne(p));
  if (p.rank == 0 && p.size > 1) {
    STRATA_ASSIGN_OR_RETURN(a->scratch_, AllocateScratch(p, p.num_elements * DataTypeSize(p.dtype)));
  }
  return std::unique_ptr<CollectiveAlgorithm>(std::move(a));
}

absl::Status AllReduceReduceToOne::Run(Transport& t, const void* input, void* output) {
  const size_t bytes = p_.num_elements * DataTypeSize(p_.dtype);
  enum : uint64_t { kToRoot = 0, kFromRoot = 1 };
  if (p_.rank != 0) {
    // Send ours, then receive the result (posted first: the root's sends
    // wait for their receives).
    PendingOps ops;
    t.RecvAsync(0, kFromRoot, output, bytes, ops.Add());
    t.SendAsync(0, kToRoot, input, bytes, ops.Add());
    return ops.Wait();
  }
  // Rank 0: 1. merge the peers' tensors into ours, in rank order.
  CopyBytes(output, input, bytes);
  for (int peer = 1; peer < p_.size; ++peer) {
    PendingOps ops;
    t.RecvAsync(peer, kToRoot, scratch_.raw_data(), bytes, ops.Add());
    STRATA_RETURN_IF_ERROR(ops.Wait());
    MergeInto(p_.merge_op, p_.dtype, output, scratch_.raw_data(), p_.num_elements);
  }
  if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, output, p_.num_elements, p_.size);
  // 2. Send the result to every peer at once.
  PendingOps ops;
  for (int peer = 1; peer < p_.size; ++peer) t.SendAsync(peer, kFromRoot, output, bytes, ops.Add());
  return ops.Wait();
}

}  // namespace strata
