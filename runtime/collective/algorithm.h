// CollectiveAlgorithm: one rank's part of one collective, written only
// against Transport. Each algorithm lives in its own file, is named
// <Collective><Algorithm> (AllReduceRing, AllGatherRing, ...) and registers
// itself in one line under its collective type and hint name:
//
//   STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "ring", AllReduceRing);
//
// where AllReduceRing has
//   static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams&);
//   absl::Status Run(Transport& t, const void* input, void* output) override;
// Setup (checks, scratch buffers) goes in Create, the data movement in Run.
// Broadcast algorithms register as kBroadcastSend and run on both sides.
//
//   STRATA_ASSIGN_OR_RETURN(std::string name, SelectAlgorithm(type, hint, size, bytes));
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(type, name, params));
//   STRATA_RETURN_IF_ERROR(alg->Run(*transport, input, output));
//
// Every rank must run the same algorithm: SelectAlgorithm's result depends
// only on values that every member of the group has checked to be equal.
//
// Thread-safety: the registry is filled during static initialization and
// read-only afterwards. An algorithm object is used by one rank's thread.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHM_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHM_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "graph/types.h"
#include "kernels/collective.h"
#include "runtime/collective/transport/shared_workspace.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

struct AlgorithmParams {
  CollectiveType type = CollectiveType::kAllReduce;
  int rank = 0;
  int size = 1;
  int root = 0;  // broadcast: the sending rank
  DataType dtype = DT_INVALID;
  // Elements of one rank's input (the whole tensor for a broadcast). The
  // all-gather output holds size * num_elements, rank r's block at r.
  int64_t num_elements = 0;
  MergeOp merge_op = MergeOp::kAdd;
  FinalOp final_op = FinalOp::kId;
  // Where scratch buffers come from (not owned; outlives the algorithm);
  // nullptr: the host allocator. The device's allocator recycles large
  // buffers, so a repeated collective does not page-fault fresh memory.
  Allocator* scratch_allocator = nullptr;
  // True when every rank lives in this process, so a buffer's address means
  // the same to every rank (algorithms that read peers' buffers need it).
  bool same_address_space = false;
  // Optional, with same_address_space: every rank's input, indexed by rank,
  // known before the ranks start (LocalCollectiveExecutor knows them once
  // all have arrived), with every rank passing the same output buffer. Lets
  // AllReduceDirect skip exchanging addresses. Empty: not known.
  std::vector<const void*> peer_inputs;
};

// A scratch buffer of `bytes` bytes from params.scratch_allocator;
// ResourceExhausted if the allocator has no memory left.
absl::StatusOr<Tensor> AllocateScratch(const AlgorithmParams& params, int64_t bytes);

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  // Runs this rank's part. `input` is null on broadcast receivers; `output`
  // is this rank's output buffer. It may not overlap `input`, except that it
  // may be `input` itself where SupportsInPlace(). A transport error ends
  // the run with that error; the caller aborts the transport so that the
  // peers stop too.
  virtual absl::Status Run(Transport& transport, const void* input, void* output) = 0;
  // Whether Run accepts output == input (the result overwrites the input).
  virtual bool SupportsInPlace() const { return false; }
};

// Sends `bytes` at `mine` to every other rank and receives each one's into
// `all` + q * bytes (this rank's own slot left alone), with `tag`: an
// exchange among every rank of the transport, and with bytes = 0 a barrier.
absl::Status ExchangeWithPeers(Transport& t, uint64_t tag, const void* mine, void* all, size_t bytes);

// The transport's shared workspace for an algorithm of `size` ranks that
// works in it (`what`: "all-reduce 'shm'", for the message), or
// FailedPrecondition naming the transport when it has none or another
// shape.
absl::StatusOr<SharedWorkspace*> WorkspaceFor(Transport& t, int size, int rank, const std::string& what);
// After a workspace collective's first barrier: every rank published
// `desc` (SharedWorkspace::CheckDescs); a mismatch aborts the transport.
absl::Status CheckWorkspaceDescs(Transport& t, SharedWorkspace* ws, const WorkspaceDesc& desc);

// memcpy that accepts the null pointers of empty tensors.
inline void CopyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

using CollectiveAlgorithmFactory =
    absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> (*)(const AlgorithmParams&);

// Aborts on a duplicate (our bug, during static initialization).
void RegisterCollectiveAlgorithm(CollectiveType type, const std::string& name,
                                 CollectiveAlgorithmFactory factory);
// NotFound naming the registered algorithms of `type`.
absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> CreateCollectiveAlgorithm(
    CollectiveType type, const std::string& name, const AlgorithmParams& params);
std::vector<std::string> RegisteredAlgorithms(CollectiveType type);

// The algorithm for a communication hint: "ring", "reduce_to_one" (alias
// "local"), "direct" (alias "shared_memory": "direct" when
// same_address_space, "shm" over a shared-memory transport), or "auto" (and
// "nccl", which on CPU devices means "auto", as in TensorFlow), which takes
// the first row of the selection table in algorithm.cc that fits: for
// all-reduce "pipelined_ring" over TCP, "shm" over shared memory, "direct"
// when same_address_space, else "ring"; for reduce-scatter "shm", "direct"
// or "ring" likewise; for all-gather "shm" over shared memory,
// "recursive_doubling" over TCP for 2^k ranks (past 4 MiB a rank only for
// 2), else "ring"; "tree" for broadcast. A hint that names no usable algorithm of this collective
// falls back to auto; an unknown one is InvalidArgument. Depends only on group-wide values
// (same_address_space is a property of the executor, the same for every rank; every rank of a
// communicator has the same transport). `transport_kind` is Transport::kind() of the communicator
// the algorithm will run over ("" when not known yet).
absl::StatusOr<std::string> SelectAlgorithm(CollectiveType type, const std::string& hint,
                                            int group_size, int64_t bytes_per_rank,
                                            bool same_address_space = false,
                                            const std::string& transport_kind = "");

namespace collective_registration {
struct Registrar {
  Registrar(CollectiveType type, const char* name, CollectiveAlgorithmFactory f) {
    RegisterCollectiveAlgorithm(type, name, f);
  }
};
}  // namespace collective_registration

#define STRATA_REGISTER_COLLECTIVE_ALGORITHM(type, name, Class) \
  STRATA_REGISTER_COLLECTIVE_ALGORITHM_UNIQ_(__COUNTER__, type, name, Class)
#define STRATA_REGISTER_COLLECTIVE_ALGORITHM_UNIQ_(ctr, type, name, Class) \
  STRATA_REGISTER_COLLECTIVE_ALGORITHM_UNIQ2_(ctr, type, name, Class)
#define STRATA_REGISTER_COLLECTIVE_ALGORITHM_UNIQ2_(ctr, type, name, Class)          \
  static ::strata::collective_registration::Registrar strata_collective_alg_##ctr \
      __attribute__((unused))(type, name, &Class::Create)

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHM_H_
