#include "runtime/collective/all_reduce_direct.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "runtime/collective/reduction.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "direct", AllReduceDirect);

namespace {

// What a rank tells its peers: where its buffers are.
struct Buffers {
  const void* input;
  void* output;
};

constexpr uint64_t kTagAddresses = 0;
constexpr uint64_t kTagDone = 1;

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceDirect::Create(const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  if (!p.same_address_space) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all-reduce algorithm 'direct' reads the peers' buffers, so every rank must share one "
        "address space; this group's transport does not (use ring)"));
  }
  if (!p.peer_inputs.empty() && static_cast<int>(p.peer_inputs.size()) != p.size) {
    return absl::InvalidArgumentError(absl::StrCat("all-reduce 'direct' got ", p.peer_inputs.size(),
                                                   " peer inputs for ", p.size, " ranks"));
  }
    return std::unique_ptr<CollectiveAlgorithm>(new AllReduceDirect(p));
}

int64_t AllReduceDirect::SliceBegin(int r) const {
  // The first num_elements % size slices hold one element more.
  const int64_t base = p_.num_elements / p_.size, extra = p_.num_elements % p_.size;
  return r * base + std::min<int64_t>(r, extra);
}

absl::Status AllReduceDirect::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t elem = DataTypeSize(p_.dtype);
  if (p_.num_elements == 0) return absl::OkStatus();  // the same on every rank
  // 1. Exchange addresses unless the caller knows them. Receives are posted first (sends complete when
  // matched).
  std::vector<Buffers> peers(n);
  peers[r] = {input, output};
  if (!p_.peer_inputs.empty()) {
    // Known up front (one shared output): no exchange, so a rank starts
    // reducing without waiting for its peers to be scheduled.
    for (int q = 0; q < n; ++q) peers[q] = {p_.peer_inputs[q], output};
  } else {
    PendingOps ops;
    for (int q = 0; q < n; ++q) {
      if (q != r) t.RecvAsync(q, kTagAddresses, &peers[q], sizeof(Buffers), ops.Add());
    }
    for (int q = 0; q < n; ++q) {
      if (q != r) t.SendAsync(q, kTagAddresses, &peers[r], sizeof(Buffers), ops.Add());
    }
    STRATA_RETURN_IF_ERROR(ops.Wait());
  }
  // 2. Reduce this rank's slice from every input straight into its output,
  // then copy it to the outputs that are not the same buffer.
  const int64_t begin = SliceBegin(r), end = SliceBegin(r + 1);
  if (begin < end) {
    std::vector<const void*> inputs(n);
    for (int q = 0; q < n; ++q) inputs[q] = peers[q].input;
    ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, inputs.data(), n, begin, end, output, n);
    const char* slice = static_cast<const char*>(output) + begin * elem;
    for (int q = 0; q < n; ++q) {
      bool seen = peers[q].output == output;
      for (int j = 0; j < q && !seen; ++j) seen = peers[j].output == peers[q].output;
      if (!seen) CopyBytes(static_cast<char*>(peers[q].output) + begin * elem, slice, (end - begin) * elem);
    }
  }
  // 3. Barrier: once every rank has said it is done, every slice is written
  // everywhere and nobody reads a peer's buffers any more.
  PendingOps ops;
  char none = 0;
  for (int q = 0; q < n; ++q) {
    if (q != r) t.RecvAsync(q, kTagDone, &none, 0, ops.Add());
  }
  for (int q = 0; q < n; ++q) {
    if (q != r) t.SendAsync(q, kTagDone, &none, 0, ops.Add());
  }
  return ops.Wait();
}

}  // namespace strata
