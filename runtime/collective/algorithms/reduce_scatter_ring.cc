#include "runtime/collective/algorithms/reduce_scatter_ring.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kReduceScatter, "ring", ReduceScatterRing);

absl::Status CheckReduceScatter(const AlgorithmParams& p, const char* name) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  if (p.size < 1 || p.num_elements < 0 || p.num_elements % p.size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduce-scatter '", name, "': ", p.num_elements,
                                                   " elements do not split into ", p.size,
                                                   " equal blocks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> ReduceScatterRing::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReduceScatter(p, "ring"));
  std::unique_ptr<ReduceScatterRing> a(new ReduceScatterRing(p));
  if (p.size > 1) {
    const int64_t bytes = p.num_elements / p.size * DataTypeSize(p.dtype);
    for (Tensor& t : a->scratch_) {
      STRATA_ASSIGN_OR_RETURN(t, AllocateScratch(p, bytes));
    }
  }
  return std::unique_ptr<CollectiveAlgorithm>(std::move(a));
}

absl::Status ReduceScatterRing::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const int64_t block = p_.num_elements / n;
  const size_t block_bytes = block * DataTypeSize(p_.dtype);
  const char* in = static_cast<const char*>(input);
  auto own = [&](int b) { return in + b * block_bytes; };
  if (n == 1) {
    CopyBytes(output, in, block_bytes);
    return absl::OkStatus();  // Div by 1 changes nothing
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Blocks of up to 1 MiB move on this thread where the transport lets it
  // (TCP's DriveUntil), as the ring all-gather's: each step's hand-off from
  // an I/O thread would cost two thread wake-ups.
  for (int s = 0; s < n - 1; ++s) {
    const int send_b = (r - s - 1 + n) % n, recv_b = (r - s - 2 + 2 * n) % n;
    // The first step sends the input's own block; later ones the partial
    // received (and merged) in the step before. The last receives straight
    // into the output.
    const void* send = s == 0 ? own(send_b) : scratch_[(s - 1) % 2].raw_data();
    void* recv = s == n - 2 ? output : scratch_[s % 2].raw_data();
    PendingOps ops;
    auto post = [&] {
      t.RecvAsync(left, s, recv, block_bytes, ops.Add());
      t.SendAsync(right, s, send, block_bytes, ops.Add());
    };
    STRATA_RETURN_IF_ERROR(ops.PostAndWait(t, static_cast<int64_t>(block_bytes), post));
    MergeInto(p_.merge_op, p_.dtype, recv, own(recv_b), block);
  }
  if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, output, block, n);
  return absl::OkStatus();
}

}  // namespace strata
