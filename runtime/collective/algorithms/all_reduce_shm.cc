#include "runtime/collective/algorithms/all_reduce_shm.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/shared_workspace.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "shm", AllReduceShm);

namespace {
// Up to this many bytes per chunk, every rank reduces the whole chunk.
constexpr int64_t kWholeChunkBytes = 64 << 10;
}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceShm::Create(const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  if (p.num_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("all-reduce 'shm': negative element count ", p.num_elements));
  }
  return std::unique_ptr<CollectiveAlgorithm>(new AllReduceShm(p));
}

absl::Status AllReduceShm::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t elem = DataTypeSize(p_.dtype);
  const int64_t total = p_.num_elements;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (total == 0) return absl::OkStatus();  // the same on every rank
  if (n == 1) {
    CopyBytes(out, in, total * elem);
    return absl::OkStatus();  // Div by 1 changes nothing
  }
  STRATA_ASSIGN_OR_RETURN(SharedWorkspace* shm, WorkspaceFor(t, n, r, "all-reduce 'shm'"));
  const WorkspaceDesc desc{total, p_.dtype, p_.merge_op, p_.final_op,
                               static_cast<int32_t>(CollectiveType::kAllReduce)};
  shm->PublishDesc(desc);
  std::vector<const void*> slots(n);
  char* result = shm->result();
  const int64_t chunk = static_cast<int64_t>(shm->chunk_bytes() / elem);
  // Slices start on 64-byte boundaries, so no two ranks write one cache line
  // of the result.
  const int64_t align = std::max<int64_t>(1, 64 / static_cast<int64_t>(elem));
  bool first = true;
  for (int64_t off = 0; off < total; off += chunk) {
    const int64_t c = std::min(chunk, total - off);
    const int set = shm->NextSet();
    for (int q = 0; q < n; ++q) slots[q] = shm->slot(q, set);
    // 1. This rank's chunk into its slot.
    CopyBytes(shm->slot(r, set), in + off * elem, c * elem);
    // 2. Every slot is full.
    STRATA_RETURN_IF_ERROR(shm->Barrier());
    if (first) {
      first = false;
      STRATA_RETURN_IF_ERROR(CheckWorkspaceDescs(t, shm, desc));
    }
    // With 2 ranks, or a chunk small enough that reading all of it costs
    // less than a second barrier, every rank reduces the whole chunk
    // straight into its output: one barrier per chunk (the other slot set
    // is the next chunk's, so nobody overwrites a slot a peer still reads).
    if (n == 2 || c * static_cast<int64_t>(elem) <= kWholeChunkBytes) {
      ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, slots.data(), n, 0, c, out + off * elem, n);
      continue;
    }
    // 3. This rank's slice, reduced from all slots into the result.
    const int64_t per = (c + n - 1) / n;
    const int64_t slice = (per + align - 1) / align * align;
    const int64_t b = std::min(c, r * slice), e = std::min(c, (r + 1) * slice);
    if (b < e) {
      ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, slots.data(), n, b, e, result, n);
      CopyBytes(out + (off + b) * elem, result + b * elem, (e - b) * elem);
    }
    // 4. Every slice is reduced.
    STRATA_RETURN_IF_ERROR(shm->Barrier());
    // 5. The other slices to this rank's output.
    CopyBytes(out + off * elem, result, b * elem);
    CopyBytes(out + (off + e) * elem, result + e * elem, (c - e) * elem);
  }
  return absl::OkStatus();
}

}  // namespace strata
