#include "runtime/collective/algorithms/all_gather_shm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/transport/shared_workspace.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllGather, "shm", AllGatherShm);

namespace {

// Blocks from this size on are read straight from the peers (when they may
// be); smaller ones go through the segment, whose copies cost less than the
// system call.
constexpr size_t kSingleCopyMinBytes = size_t{32} << 10;

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllGatherShm::Create(
    const AlgorithmParams& p) {
  if (p.num_elements < 0 || DataTypeSize(p.dtype) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("all-gather 'shm': ", p.num_elements,
                                                   " elements of ", DataTypeString(p.dtype)));
  }
  return std::unique_ptr<CollectiveAlgorithm>(new AllGatherShm(p));
}

absl::Status AllGatherShm::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t elem = DataTypeSize(p_.dtype);
  const int64_t block = p_.num_elements;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (block == 0) return absl::OkStatus();  // the same on every rank
  if (n == 1) {
    CopyBytes(out, in, block * elem);
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(SharedWorkspace * shm, WorkspaceFor(t, n, r, "all-gather 'shm'"));
  const WorkspaceDesc desc{block,
                           p_.dtype,
                           MergeOp::kAdd,
                           FinalOp::kId,
                           static_cast<int32_t>(CollectiveType::kAllGather),
                           input};
  shm->PublishDesc(desc);
  if (shm->peers_readable() && static_cast<size_t>(block) * elem >= kSingleCopyMinBytes) {
    // Every rank's input stays readable until the second barrier.
    STRATA_RETURN_IF_ERROR(shm->Barrier());
    STRATA_RETURN_IF_ERROR(CheckWorkspaceDescs(t, shm, desc));
    CopyBytes(out + r * block * elem, in, block * elem);
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;  // each rank starts at a different peer
      STRATA_RETURN_IF_ERROR(shm->ReadPeer(q, 0, out + q * block * elem, block * elem));
    }
    return shm->Barrier();
  }
  const int64_t chunk = static_cast<int64_t>(shm->chunk_bytes() / elem);
  bool first = true;
  for (int64_t off = 0; off < block; off += chunk) {
    const int64_t c = std::min(chunk, block - off);
    const int set = shm->NextSet();
    CopyBytes(shm->slot(r, set), in + off * elem, c * elem);
    // This rank's own block while the others fill their slots.
    CopyBytes(out + (r * block + off) * elem, in + off * elem, c * elem);
    STRATA_RETURN_IF_ERROR(shm->Barrier());
    if (first) {
      first = false;
      STRATA_RETURN_IF_ERROR(CheckWorkspaceDescs(t, shm, desc));
    }
    for (int q = 0; q < n; ++q) {
      if (q != r) CopyBytes(out + (q * block + off) * elem, shm->slot(q, set), c * elem);
    }
  }
  return absl::OkStatus();
}

}  // namespace strata
