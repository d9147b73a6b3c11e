#include "runtime/collective/algorithms/all_gather_ring.h"

#include <cstring>

#include "base/status.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllGather, "ring", AllGatherRing);


absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllGatherRing::Create(const AlgorithmParams& p) {
  return std::unique_ptr<CollectiveAlgorithm>(new AllGatherRing(p));
}

absl::Status AllGatherRing::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t block_bytes = p_.num_elements * DataTypeSize(p_.dtype);
  char* out = static_cast<char*>(output);
  auto block = [&](int b) { return out + b * block_bytes; };
  CopyBytes(block(r), input, block_bytes);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Step s: forward block (r - s), receive block (r - s - 1). Blocks of up
  // to 1 MiB move on this thread where the transport lets it (TCP's
  // DriveUntil): handing each step from its I/O thread to this one costs two
  // thread wake-ups.
  for (int s = 0; s < n - 1; ++s) {
    PendingOps ops;
    auto post = [&] {
      t.RecvAsync(left, s, block((r - s - 1 + 2 * n) % n), block_bytes, ops.Add());
      t.SendAsync(right, s, block((r - s + n) % n), block_bytes, ops.Add());
    };
    STRATA_RETURN_IF_ERROR(ops.PostAndWait(t, static_cast<int64_t>(block_bytes), post));
  }
  return absl::OkStatus();
}

}  // namespace strata
