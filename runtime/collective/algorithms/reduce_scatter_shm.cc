#include "runtime/collective/algorithms/reduce_scatter_shm.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/algorithms/reduce_scatter_ring.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/shared_workspace.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kReduceScatter, "shm", ReduceScatterShm);

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> ReduceScatterShm::Create(
    const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReduceScatter(p, "shm"));
  return std::unique_ptr<CollectiveAlgorithm>(new ReduceScatterShm(p));
}

absl::Status ReduceScatterShm::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t elem = DataTypeSize(p_.dtype);
  const int64_t total = p_.num_elements, block = total / n;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (total == 0) return absl::OkStatus();  // the same on every rank
  if (n == 1) {
    CopyBytes(out, in, total * elem);
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(SharedWorkspace * shm, WorkspaceFor(t, n, r, "reduce-scatter 'shm'"));
  const WorkspaceDesc desc{total, p_.dtype, p_.merge_op, p_.final_op,
                           static_cast<int32_t>(CollectiveType::kReduceScatter)};
  shm->PublishDesc(desc);
  std::vector<const void*> slots(n);
  const int64_t chunk = static_cast<int64_t>(shm->chunk_bytes() / elem);
  const int64_t mine_begin = r * block, mine_end = mine_begin + block;
  bool first = true;
  for (int64_t off = 0; off < total; off += chunk) {
    const int64_t c = std::min(chunk, total - off);
    const int set = shm->NextSet();
    CopyBytes(shm->slot(r, set), in + off * elem, c * elem);
    STRATA_RETURN_IF_ERROR(shm->Barrier());
    if (first) {
      first = false;
      STRATA_RETURN_IF_ERROR(CheckWorkspaceDescs(t, shm, desc));
    }
    // This rank's block within the chunk: [b, e) of the chunk's elements.
    const int64_t b = std::max(off, mine_begin) - off, e = std::min(off + c, mine_end) - off;
    if (b >= e) continue;
    for (int q = 0; q < n; ++q) slots[q] = shm->slot(q, set) + b * elem;
    ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, slots.data(), n, 0, e - b,
                 out + (off + b - mine_begin) * elem, n);
  }
  return absl::OkStatus();
}

}  // namespace strata
