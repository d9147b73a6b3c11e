#include "runtime/collective/algorithms/all_reduce_recursive_doubling.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "recursive_doubling",
                                     AllReduceRecursiveDoubling);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceRecursiveDoubling::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  if (p.size < 1 || (p.size & (p.size - 1)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("all-reduce by recursive doubling needs a group of 2^k ranks, not ", p.size));
  }
  std::unique_ptr<AllReduceRecursiveDoubling> a(new AllReduceRecursiveDoubling(p));
  if (p.size > 1) {
    STRATA_ASSIGN_OR_RETURN(a->scratch_,
                            AllocateScratch(p, p.num_elements * DataTypeSize(p.dtype)));
  }
  return std::unique_ptr<CollectiveAlgorithm>(std::move(a));
}

absl::Status AllReduceRecursiveDoubling::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t bytes = p_.num_elements * DataTypeSize(p_.dtype);
  if (input != output) CopyBytes(output, input, bytes);
  for (int k = 0, dist = 1; dist < n; ++k, dist <<= 1) {
    const int peer = r ^ dist;
    PendingOps ops;
    auto post = [&] {
      t.RecvAsync(peer, k, scratch_.raw_data(), bytes, ops.Add());
      t.SendAsync(peer, k, output, bytes, ops.Add());
    };
    // Up to 1 MiB moves on this thread where the transport lets it (TCP's
    // DriveUntil).
    STRATA_RETURN_IF_ERROR(ops.PostAndWait(t, static_cast<int64_t>(bytes), post));
    MergeInto(p_.merge_op, p_.dtype, output, scratch_.raw_data(), p_.num_elements);
  }
  if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, output, p_.num_elements, n);
  return absl::OkStatus();
}

}  // namespace strata
