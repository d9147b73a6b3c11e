#include "runtime/collective/algorithms/all_gather_recursive_doubling.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllGather, "recursive_doubling",
                                     AllGatherRecursiveDoubling);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllGatherRecursiveDoubling::Create(
    const AlgorithmParams& p) {
  if (p.size < 1 || (p.size & (p.size - 1)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("all-gather by recursive doubling needs a group of 2^k ranks, not ", p.size));
  }
  return std::unique_ptr<CollectiveAlgorithm>(new AllGatherRecursiveDoubling(p));
}

absl::Status AllGatherRecursiveDoubling::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t block_bytes = p_.num_elements * DataTypeSize(p_.dtype);
  char* out = static_cast<char*>(output);
  CopyBytes(out + r * block_bytes, input, block_bytes);
  // Step k: the aligned run of 2^k blocks holding this rank's goes to
  // r ^ 2^k, whose run arrives beside it. Blocks up to 1 MiB move on this
  // thread where the transport lets it (TCP's DriveUntil).
  for (int k = 0, dist = 1; dist < n; ++k, dist <<= 1) {
    const int peer = r ^ dist;
    const size_t run_bytes = dist * block_bytes;
    char* mine = out + (r & ~(dist - 1)) * block_bytes;
    char* theirs = out + (peer & ~(dist - 1)) * block_bytes;
    PendingOps ops;
    auto post = [&] {
      t.RecvAsync(peer, k, theirs, run_bytes, ops.Add());
      t.SendAsync(peer, k, mine, run_bytes, ops.Add());
    };
    STRATA_RETURN_IF_ERROR(ops.PostAndWait(t, static_cast<int64_t>(block_bytes), post));
  }
  return absl::OkStatus();
}

}  // namespace strata
