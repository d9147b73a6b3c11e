#include "runtime/collective/algorithms/broadcast_tree.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kBroadcastSend, "tree", BroadcastTree);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> BroadcastTree::Create(const AlgorithmParams& p) {
  if (p.root < 0 || p.root >= p.size) {
    return absl::InternalError(absl::StrCat("broadcast root ", p.root, " in a group of ", p.size));
  }
  return std::unique_ptr<CollectiveAlgorithm>(new BroadcastTree(p));
}

absl::Status BroadcastTree::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size;
  const int v = (p_.rank - p_.root + n) % n;
  const size_t bytes = p_.num_elements * DataTypeSize(p_.dtype);
  auto real = [&](int vr) { return (vr + p_.root) % n; };
  // 1. Receive from the parent (the root copies its input instead).
  int mask = 1;
  if (v == 0) {
    CopyBytes(output, input, bytes);
    while (mask < n) mask <<= 1;
  } else {
    mask = v & -v;  // lowest set bit: the parent is v - mask
    PendingOps ops;
    t.RecvAsync(real(v - mask), 0, output, bytes, ops.Add());
    STRATA_RETURN_IF_ERROR(ops.Wait());
  }
  // 2. Send to the children v + m for m < mask, all at once.
  PendingOps ops;
  for (int m = mask >> 1; m > 0; m >>= 1) {
    if (v + m < n) t.SendAsync(real(v + m), 0, output, bytes, ops.Add());
  }
  return ops.Wait();
}

}  // namespace strata
