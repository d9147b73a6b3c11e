// AllReduceShm: all-reduce for ranks that share a ShmTransport (processes on
// one host). Instead of moving chunks through the transport's rings, every
// rank uses the segment's workspace as the reduction buffer, one chunk at a
// time (ShmTransport::chunk_bytes(), small enough to stay in cache):
//
//   1. each rank copies its chunk of the input into its own slot;
//   2. barrier;
//   3. rank r reduces its 1/n slice of the chunk from all n slots in one
//      pass (ReduceInputs: every slot read once, Div fused) into the shared
//      result, and copies that slice to its output;
//   4. barrier;
//   5. each rank copies the other ranks' slices of the result to its output.
//
// Each rank touches its input once and its output once, and memory sees no
// staging copy through a ring; the slots are reused chunk after chunk, so
// they stay in cache. Two barriers per chunk (spin, then yield, then futex).
// Step 1 of the next chunk may follow step 5 without a third barrier: every
// rank finished reading the slots before the barrier of step 4, and no rank
// writes the result again before every rank has passed the next step 2.
// Every rank's first barrier also checks that all ranks run the same
// all-reduce (elements, dtype, ops); a mismatch is InvalidArgument naming the
// rank, and aborts the communicator.
//
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(kAllReduce, "shm", params));
//   STRATA_RETURN_IF_ERROR(alg->Run(shm_transport, input, output));
//
// Every rank ends with bitwise the same result (one rank reduces each
// element, in rank order). Run fails (FailedPrecondition) on a transport that
// is not a ShmTransport. SelectAlgorithm picks it under hint auto when the
// transport's kind() is "shm".
//
// Thread-safety: one object per rank per collective; workspace collectives
// of one communicator run one at a time, in the same order on every rank.
// Ownership: none.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_SHM_H_
#define STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_SHM_H_

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

#endif  // STRATA_RUNTIME_COLLECTIVE_ALL_REDUCE_SHM_H_
