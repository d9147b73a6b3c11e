// AllReduceShm: all-reduce for ranks that share a shared-memory transport (processes on
// one host). Instead of moving chunks through the transport's rings, every
// rank uses the segment's workspace as the reduction buffer, one chunk at a
// time (SharedWorkspace::chunk_bytes(), small enough to stay in cache), the
// chunks alternating between the workspace's two slot sets:
//
//   1. each rank copies its chunk of the input into its slot of the set;
//   2. barrier;
//   3a. with 2 ranks, or a chunk of at most 64 KiB: each rank reduces the
//       whole chunk from all slots (ReduceInputs: one pass, Div fused)
//       straight into its output. One barrier per chunk: the next chunk
//       fills the other set, and every rank finished reading this set
//       before it reached the barrier after that.
//   3b. otherwise: rank r reduces its 1/n slice from all slots into the
//       shared result and copies it to its output; barrier; each rank copies
//       the other slices of the result to its output (each rank reads its
//       chunk n times less than in 3a, for a second barrier).
//
// Each rank touches its input once and its output once; no staging copy
// goes through a ring, and the slots, reused chunk after chunk, stay in
// cache. The first barrier also checks that every rank runs the same
// all-reduce (elements, dtype, ops): a mismatch is InvalidArgument naming
// the rank, and aborts the communicator.
//
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(kAllReduce, "shm", params));
//   STRATA_RETURN_IF_ERROR(alg->Run(shm_transport, input, output));
//
// Every rank ends with bitwise the same result (each element is reduced in
// rank order by the same code, whether by one rank or by all). Run fails
// (FailedPrecondition) on a transport without a shared workspace
// (Transport::shared_workspace()). SelectAlgorithm picks it under hint auto
// when the transport's kind() is "shm".
//
// Thread-safety: one object per rank per collective; workspace collectives
// of one communicator run one at a time, in the same order on every rank.
// Ownership: none.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_SHM_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_SHM_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllReduceShm : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllReduceShm(const AlgorithmParams& p) : p_(p) {}

  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_SHM_H_
