#include "runtime/collective/algorithm.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

absl::StatusOr<std::string> SelectAlgorithm(CollectiveType type, const std::string& hint,
                                            int group_size, int64_t bytes_per_rank,
                                            bool same_address_space,
                                            const std::string& transport_kind) {
  // A shared-memory communicator brings its own all-reduce (AllReduceShm,
  // in //runtime/collective:shm_algorithms; only when that is linked in).
  const bool shm_all_reduce = type == CollectiveType::kAllReduce && transport_kind == "shm" &&
                              GetRegistry().count({type, "shm"}) > 0;
  std::string wanted;
  if (hint == "ring") {
    wanted = "ring";
  } else if (hint == "reduce_to_one" || hint == "local") {
    wanted = "reduce_to_one";
  } else if (hint == "direct" || hint == "shared_memory") {
    if (same_address_space) wanted = "direct";
    if (shm_all_reduce) wanted = "shm";
  } else if (hint != "auto" && hint != "nccl" && !hint.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communication_hint '", hint,
        "' is not one of auto, ring, reduce_to_one, local, direct, shared_memory, nccl"));
  }
  if (!wanted.empty() && GetRegistry().count({RegistryType(type), wanted}) > 0) return wanted;
  // Auto: a function of (type, group_size, bytes_per_rank), all equal on
  // every rank.
  switch (type) {
    case CollectiveType::kAllReduce:
      // In one address space, direct reads every input once and writes the
      // result once, with no chunk copied through the transport
      // (collective_bench: faster than ring and reduce_to_one at every size
      // from 4 KiB to 64 MiB, 2 and 4 ranks; docs/performance.md). Across
      // address spaces the ring was as fast or faster than reduce_to_one.
      // bytes_per_rank is kept in the signature for transports where
      // latency favours fewer hops.
      // Over shared memory, AllReduceShm reduces in the segment itself
      // (cross_process_bench: faster than ring over the same transport at
      // every size).
      (void)group_size;
      (void)bytes_per_rank;
      if (shm_all_reduce) return std::string("shm");
      return std::string(same_address_space ? "direct" : "ring");
    case CollectiveType::kAllGather:
      return std::string("ring");
    case CollectiveType::kBroadcastSend:
    case CollectiveType::kBroadcastRecv:
      return std::string("tree");
  }
  return absl::InternalError("unknown collective type");
}

}  // namespace strata
