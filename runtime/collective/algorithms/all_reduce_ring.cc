#include "runtime/collective/algorithms/all_reduce_ring.h"

#include <algorithm>
#include <cstring>

#include "base/status.h"
#include "runtime/collective/reduction.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "ring", AllReduceRing);

AllReduceRing::AllReduceRing(const AlgorithmParams& p)
    : p_(p), elem_bytes_(DataTypeSize(p.dtype)) {}

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceRing::Create(const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  std::unique_ptr<AllReduceRing> a(new AllReduceRing(p));
  STRATA_ASSIGN_OR_RETURN(a->scratch_, AllocateScratch(p, a->ChunkSize(0) * a->elem_bytes_));
  return std::unique_ptr<CollectiveAlgorithm>(std::move(a));
}

int64_t AllReduceRing::ChunkBegin(int c) const {
  // The first n % size chunks hold one element more.
  const int64_t base = p_.num_elements / p_.size, extra = p_.num_elements % p_.size;
  return c * base + std::min<int64_t>(c, extra);
}

absl::Status AllReduceRing::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  char* out = static_cast<char*>(output);
  CopyBytes(out, input, p_.num_elements * elem_bytes_);
  if (n > 1) {
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto chunk = [&](int c) { return out + ChunkBegin(c) * elem_bytes_; };
    auto bytes = [&](int c) { return ChunkSize(c) * elem_bytes_; };
    // 1. Reduce-scatter: in step s rank r passes on chunk (r - s) (its own
    // partial sum of it) and merges chunk (r - s - 1) from the left into its
    // copy. After n-1 steps rank r holds chunk (r + 1) fully reduced.
    for (int s = 0; s < n - 1; ++s) {
      const int send_c = (r - s + n) % n, recv_c = (r - s - 1 + 2 * n) % n;
      PendingOps ops;
      t.RecvAsync(left, s, scratch_.raw_data(), bytes(recv_c), ops.Add());
      t.SendAsync(right, s, chunk(send_c), bytes(send_c), ops.Add());
      STRATA_RETURN_IF_ERROR(ops.Wait());
      MergeInto(p_.merge_op, p_.dtype, chunk(recv_c), scratch_.raw_data(), ChunkSize(recv_c));
    }
    // 2. The owner finishes its chunk, so Div runs once per element.
    const int own = (r + 1) % n;
    if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, chunk(own), ChunkSize(own), n);
    // 3. All-gather: in step s rank r passes on chunk (r + 1 - s), final,
    // and receives chunk (r - s) in place.
    for (int s = 0; s < n - 1; ++s) {
      const int send_c = (r + 1 - s + n) % n, recv_c = (r - s + n) % n;
      PendingOps ops;
      t.RecvAsync(left, n + s, chunk(recv_c), bytes(recv_c), ops.Add());
      t.SendAsync(right, n + s, chunk(send_c), bytes(send_c), ops.Add());
      STRATA_RETURN_IF_ERROR(ops.Wait());
    }
  }
  return absl::OkStatus();
}

}  // namespace strata
