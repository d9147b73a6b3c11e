#include "runtime/collective/algorithms/reduce_scatter_recursive_halving.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/algorithms/reduce_scatter_ring.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kReduceScatter, "recursive_halving",
                                     ReduceScatterRecursiveHalving);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> ReduceScatterRecursiveHalving::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReduceScatter(p, "recursive_halving"));
  if ((p.size & (p.size - 1)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "reduce-scatter by recursive halving needs a group of 2^k ranks, not ", p.size));
  }
  std::unique_ptr<ReduceScatterRecursiveHalving> a(new ReduceScatterRecursiveHalving(p));
  if (p.size > 1) {
    const int64_t bytes = p.num_elements / 2 * DataTypeSize(p.dtype);
    for (Tensor& t : a->scratch_) {
      STRATA_ASSIGN_OR_RETURN(t, AllocateScratch(p, bytes));
    }
  }
  return std::unique_ptr<CollectiveAlgorithm>(std::move(a));
}

absl::Status ReduceScatterRecursiveHalving::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const int64_t block = p_.num_elements / n;
  const size_t block_bytes = block * DataTypeSize(p_.dtype);
  if (n == 1) {
    CopyBytes(output, input, block_bytes);
    return absl::OkStatus();
  }
  // `partial` holds the partials of blocks [lo, lo + span): at first the
  // input itself, then a scratch buffer. Each step receives the peer's
  // partial of the half kept into `incoming`, merges the kept half of
  // `partial` into it, and that becomes the new `partial` (the last step's
  // goes straight to the output).
  const char* partial = static_cast<const char*>(input);
  int lo = 0;
  int step = 0;
  for (int half = n / 2; half >= 1; half /= 2, ++step) {
    const int peer = r ^ half;
    const bool upper = (r & half) != 0;  // this rank's block in the upper half
    const int keep_lo = upper ? lo + half : lo, send_lo = upper ? lo : lo + half;
    const size_t bytes = half * block_bytes;
    const char* keep = partial + (keep_lo - lo) * block_bytes;
    const char* send = partial + (send_lo - lo) * block_bytes;
    char* incoming =
        half == 1 ? static_cast<char*>(output) : static_cast<char*>(scratch_[step % 2].raw_data());
    PendingOps ops;
    auto post = [&] {
      t.RecvAsync(peer, step, incoming, bytes, ops.Add());
      t.SendAsync(peer, step, send, bytes, ops.Add());
    };
    // Up to 1 MiB moves on this thread where the transport lets it (TCP's
    // DriveUntil).
    STRATA_RETURN_IF_ERROR(ops.PostAndWait(t, static_cast<int64_t>(bytes), post));
    MergeInto(p_.merge_op, p_.dtype, incoming, keep, half * block);
    partial = incoming;
    lo = keep_lo;
  }
  if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, output, block, n);
  return absl::OkStatus();
}

}  // namespace strata
