#include "runtime/collective/algorithm.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/collective/algorithms/all_reduce_recursive_doubling.h"

namespace strata {

namespace {

using Registry = std::map<std::pair<CollectiveType, std::string>, CollectiveAlgorithmFactory>;

// Function-local so that registrations from other translation units can run
// in any static-initialization order.
Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

// Both sides of a broadcast run one algorithm, registered as kBroadcastSend.
CollectiveType RegistryType(CollectiveType t) {
  return t == CollectiveType::kBroadcastRecv ? CollectiveType::kBroadcastSend : t;
}

}  // namespace

void RegisterCollectiveAlgorithm(CollectiveType type, const std::string& name,
                                 CollectiveAlgorithmFactory factory) {
  if (!GetRegistry().emplace(std::make_pair(RegistryType(type), name), factory).second) {
    std::fprintf(stderr, "collective algorithm %s/%s registered twice\n", CollectiveTypeName(type),
                 name.c_str());
    std::abort();
  }
}

std::vector<std::string> RegisteredAlgorithms(CollectiveType type) {
  std::vector<std::string> names;
  for (const auto& kv : GetRegistry()) {
    if (kv.first.first == RegistryType(type)) names.push_back(kv.first.second);
  }
  return names;
}

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> CreateCollectiveAlgorithm(
    CollectiveType type, const std::string& name, const AlgorithmParams& params) {
  auto it = GetRegistry().find({RegistryType(type), name});
  if (it == GetRegistry().end()) {
    return absl::NotFoundError(absl::StrCat("no ", CollectiveTypeName(type), " algorithm '", name,
                                            "' (registered: ",
                                            absl::StrJoin(RegisteredAlgorithms(type), ", "), ")"));
  }
  return it->second(params);
}

absl::StatusOr<Tensor> AllocateScratch(const AlgorithmParams& params, int64_t bytes) {
  Allocator* a = params.scratch_allocator != nullptr ? params.scratch_allocator : CpuAllocator();
  return Tensor::Allocate(a, DT_UINT8, TensorShape{bytes});
}

absl::Status ExchangeWithPeers(Transport& t, uint64_t tag, const void* mine, void* all, size_t bytes) {
  const int n = t.size(), r = t.rank();
  // A barrier passes no data, but the transports get real addresses.
  char none = 0;
  char* slots = bytes == 0 ? &none : static_cast<char*>(all);
  if (bytes == 0) mine = &none;
  PendingOps ops;
  // Receives first: a send may complete only when matched.
  for (int q = 0; q < n; ++q) {
    if (q != r) t.RecvAsync(q, tag, slots + q * bytes, bytes, ops.Add());
  }
  for (int q = 0; q < n; ++q) {
    if (q != r) t.SendAsync(q, tag, mine, bytes, ops.Add());
  }
  return ops.Wait();
}

absl::StatusOr<SharedWorkspace*> WorkspaceFor(Transport& t, int size, int rank, const std::string& what) {
  SharedWorkspace* ws = t.shared_workspace();
  if (ws == nullptr || t.size() != size || t.rank() != rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " runs over a transport with a shared workspace of ", size,
        " ranks; this communicator's transport is '", t.kind(), "' with ", t.size(), " ranks",
        ws == nullptr ? " and no shared workspace" : ""));
  }
  return ws;
}

absl::Status CheckWorkspaceDescs(Transport& t, SharedWorkspace* ws, const WorkspaceDesc& desc) {
  absl::Status s = ws->CheckDescs(desc);
  if (!s.ok()) t.Abort(s);
  return s;
}

namespace {

// The one selection table: what hint "auto" runs, first matching row wins.
// Every column is a value each rank of the group has checked to be equal
// (the collective, the transport's kind, whether the ranks share an address
// space), so every rank picks the same algorithm. A row applies only when
// its algorithm is linked in (AllReduceShm and AllReducePipelinedRing live
// in their own libraries). Why each row wins where it does is measured in
// docs/perf/notes/ (inprocess.md, crossprocess.md).
struct AutoChoice {
  CollectiveType type;
  const char* transport_kind;  // nullptr: any
  enum { kAny, kShared } address_space;
  const char* algorithm;
  bool power_of_two_groups = false;  // only for groups of 2^k ranks
  int64_t max_bytes = -1;            // >= 0: only up to this many bytes per rank
  int max_group = 0;                 // > 0: only for groups of at most this many ranks
};
constexpr AutoChoice kAutoChoices[] = {
    // Over TCP, small tensors in log2(n) exchanges of the whole (4
    // processes, 4-256 KiB: docs/perf/notes/crossprocess.md), larger ones
    // in pieces pipelined through the ring, receives posted early.
    {CollectiveType::kAllReduce, "tcp", AutoChoice::kAny, "recursive_doubling", true,
     AllReduceRecursiveDoubling::kMaxBytes},
    {CollectiveType::kAllReduce, "tcp", AutoChoice::kAny, "pipelined_ring"},
    // Over shared memory, reduced in the segment itself (faster than the
    // ring over the same transport at every size).
    {CollectiveType::kAllReduce, "shm", AutoChoice::kAny, "shm"},
    // In one address space, every input read once and the result written
    // once, no chunk through the transport (faster than ring and
    // reduce_to_one from 4 KiB to 64 MiB, 2 and 4 ranks).
    {CollectiveType::kAllReduce, nullptr, AutoChoice::kShared, "direct"},
    // Across address spaces the ring was as fast or faster than reduce_to_one.
    {CollectiveType::kAllReduce, nullptr, AutoChoice::kAny, "ring"},
    // In the shared-memory segment: faster than the ring over the same
    // transport from 256 KiB at 4 ranks (2 ranks: a draw). Reading the
    // peers' inputs by cross-memory attach (process_vm_readv, Open MPI's
    // single copy) measured 2-3x slower than either here.
    {CollectiveType::kAllGather, "shm", AutoChoice::kAny, "shm"},
    // Over TCP, log2(n) exchanges instead of the ring's n-1 steps: 4
    // processes on loopback, 4-64 KiB 0.51-0.59x -> 0.75-0.98x of Open MPI,
    // >= 1 MiB 0.91-1.15x -> 1.09-1.29x (docs/perf/notes/crossprocess.md).
    // Past 4 MiB a rank the ring's n-1 equal steps won at 4 processes (8
    // MiB: 20 vs 24.5 ms, 16 MiB: 49 vs 55 ms); 2 processes make one
    // exchange either way.
    {CollectiveType::kAllGather, "tcp", AutoChoice::kAny, "recursive_doubling", true,
     int64_t{4} << 20},
    {CollectiveType::kAllGather, "tcp", AutoChoice::kAny, "recursive_doubling", true, -1, 2},
    {CollectiveType::kAllGather, nullptr, AutoChoice::kAny, "ring"},
    // Reduce-scatter as all-reduce's first half: in the segment over shared
    // memory, from the peers' inputs in one address space, else the ring.
    {CollectiveType::kReduceScatter, "shm", AutoChoice::kAny, "shm"},
    // Over TCP, log2(n) exchanges instead of the ring's n-1 steps (the same
    // bytes), as all-gather's recursive doubling.
    {CollectiveType::kReduceScatter, "tcp", AutoChoice::kAny, "recursive_halving", true},
    {CollectiveType::kReduceScatter, nullptr, AutoChoice::kShared, "direct"},
    {CollectiveType::kReduceScatter, nullptr, AutoChoice::kAny, "ring"},
    {CollectiveType::kBroadcastSend, nullptr, AutoChoice::kAny, "tree"},
    {CollectiveType::kBroadcastRecv, nullptr, AutoChoice::kAny, "tree"},
};

bool Registered(CollectiveType type, const std::string& name) {
  return GetRegistry().count({RegistryType(type), name}) > 0;
}

}  // namespace

absl::StatusOr<std::string> SelectAlgorithm(CollectiveType type, const std::string& hint,
                                            int group_size, int64_t bytes_per_rank,
                                            bool same_address_space,
                                            const std::string& transport_kind) {
  const bool power_of_two = group_size >= 1 && (group_size & (group_size - 1)) == 0;
  std::string wanted;
  if (hint == "ring") {
    wanted = "ring";
  } else if (hint == "reduce_to_one" || hint == "local") {
    wanted = "reduce_to_one";
  } else if (hint == "direct" || hint == "shared_memory") {
    // The in-memory reduction of whichever memory the ranks share.
    if (same_address_space) wanted = "direct";
    if (type != CollectiveType::kBroadcastSend && type != CollectiveType::kBroadcastRecv &&
        transport_kind == "shm") {
      wanted = "shm";
    }
  } else if (hint != "auto" && hint != "nccl" && !hint.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communication_hint '", hint,
        "' is not one of auto, ring, reduce_to_one, local, direct, shared_memory, nccl"));
  }
  if (!wanted.empty() && Registered(type, wanted)) return wanted;
  // "auto", "nccl" (on CPU devices, as in TensorFlow) and hints that name
  // nothing usable here.
  for (const AutoChoice& c : kAutoChoices) {
    if (c.type != type) continue;
    if (c.transport_kind != nullptr && transport_kind != c.transport_kind) continue;
    if (c.address_space == AutoChoice::kShared && !same_address_space) continue;
    if (c.power_of_two_groups && !power_of_two) continue;
    if (c.max_bytes >= 0 && bytes_per_rank > c.max_bytes) continue;
    if (c.max_group > 0 && group_size > c.max_group) continue;
    if (!Registered(type, c.algorithm)) continue;
    return std::string(c.algorithm);
  }
  return absl::InternalError(absl::StrCat("no ", CollectiveTypeName(type), " algorithm is linked in"));
}

}  // namespace strata
