// AllGatherShm: all-gather for ranks that share a shared-memory transport
// (processes on one host), through the segment's workspace as
// ReduceScatterShm does, one workspace chunk of each rank's block at a
// time, the chunks alternating between the workspace's two slot sets:
//
//   1. each rank copies its chunk of its input into its slot of the set;
//   2. barrier;
//   3. each rank copies every rank's slot into that rank's block of its
//      output.
//
// One barrier per chunk (the next chunk fills the other set, and every rank
// finished reading this set before it reached the barrier after that).
// Where every rank may read the others' memory (SharedWorkspace::
// peers_readable) and blocks are at least 32 KiB, each rank instead copies
// every peer's block straight from the peer's input into its output
// (process_vm_readv) between two barriers: each block crosses once, not
// into the segment and out again.
// Each rank writes its input once and reads every block once; nothing goes
// through a ring. The first barrier also checks that every rank runs the
// same all-gather (elements, dtype); a mismatch is InvalidArgument naming
// the rank and aborts the communicator.
//
// Run fails (FailedPrecondition) on a transport without a shared workspace.
//
// Thread-safety: one object per rank per collective; workspace collectives
// of one communicator run one at a time, in the same order on every rank.
// Ownership: none.
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_SHM_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_SHM_H_

#include <memory>

#include "runtime/collective/algorithm.h"

namespace strata {

class AllGatherShm : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllGatherShm(const AlgorithmParams& p) : p_(p) {}
  const AlgorithmParams p_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_GATHER_SHM_H_
