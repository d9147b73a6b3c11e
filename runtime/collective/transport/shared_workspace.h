// SharedWorkspace: a Transport's optional capability (Transport::
// shared_workspace()): buffers that every rank of the communicator maps at
// once, a barrier over all ranks, and an announcement channel by which rank 0
// fixes the order of workspace collectives. The shared-memory transport
// (shm_transport.h) offers it; AllReduceShm reduces in it, and the
// cross-worker executor orders its collectives through it.
//
//   SharedWorkspace* ws = transport.shared_workspace();
//   if (ws == nullptr) { /* another algorithm */ }
//   ws->PublishDesc(desc);
//   const int set = ws->NextSet();
//   memcpy(ws->slot(rank, set), chunk, bytes);
//   STRATA_RETURN_IF_ERROR(ws->Barrier());          // every slot is full
//   STRATA_RETURN_IF_ERROR(ws->CheckDescs(desc));   // first barrier only
//
// The workspace: two sets of `size` slots of chunk_bytes() each (used
// alternately, so a rank may fill the next set while its peers still read
// the last one) plus one result buffer of chunk_bytes(). Collectives that use
// it must run in the same order on every rank and one at a time per
// communicator. Where they start in different orders on different ranks
// (each rank's graph reaches them when it does), rank 0 Announce()s an id
// before each, and every other rank takes the ids in that order from
// NextAnnouncement().
//
// Failure: a barrier or announcement fails with the transport's abort
// status; a dead peer or a timeout aborts the communicator (as its
// Transport's operations do).
//
// Thread-safety: one thread per rank at a time. Ownership: the transport
// owns the workspace; pointers into it are valid for the transport's
// lifetime.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHARED_WORKSPACE_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHARED_WORKSPACE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/types.h"
#include "kernels/collective.h"

namespace strata {

// What every rank of one workspace collective passes, checked to be equal
// on every rank at its first barrier.
struct WorkspaceDesc {
  int64_t num_elements = 0;
  DataType dtype = DT_INVALID;
  MergeOp merge_op = MergeOp::kAdd;
  FinalOp final_op = FinalOp::kId;
  int32_t collective = 0;  // which collective (CollectiveType)
  // This rank's own data, which peers may read with ReadPeer until the next
  // barrier (not compared between ranks).
  const void* buffer = nullptr;
};

class SharedWorkspace {
 public:
  // Bytes of each slot and of the result buffer.
  virtual size_t chunk_bytes() const = 0;
  virtual char* slot(int rank, int set) = 0;  // set 0 or 1
  virtual char* result() = 0;
  // The set the next chunk uses: 0, 1, 0, ... (the same on every rank while
  // every rank runs the same chunks).
  virtual int NextSet() = 0;
  // Publishes this rank's descriptor for the next workspace collective; the
  // peers' become readable after the next Barrier().
  virtual void PublishDesc(const WorkspaceDesc& desc) = 0;
  // InvalidArgument naming the first rank whose published descriptor differs
  // from `desc` (call after the barrier that follows PublishDesc).
  virtual absl::Status CheckDescs(const WorkspaceDesc& desc) = 0;
  // Whether every rank may copy straight from every other's memory (Linux
  // cross-memory attach), as probed when the transport connected: the same
  // answer on every rank.
  virtual bool peers_readable() const { return false; }
  // With peers_readable(): copies `bytes` from `offset` bytes into the
  // buffer rank `q` published with its descriptor (WorkspaceDesc::buffer)
  // to `to`, between the barrier after PublishDesc and the next one. A
  // failed read aborts the communicator and returns its status.
  virtual absl::Status ReadPeer(int q, size_t offset, void* to, size_t bytes) {
    (void)q, (void)offset, (void)to, (void)bytes;
    return absl::FailedPreconditionError("this workspace cannot read its peers' memory");
  }
  // Returns once every rank has called its matching Barrier(): writes to
  // the workspace before it are visible to every rank after it. Fails with
  // the abort status, or aborts the communicator on timeout / dead peer.
  virtual absl::Status Barrier() = 0;
  // Rank 0 only: `id` names the next workspace collective. Waits (rarely)
  // while a peer has yet to read the announcement 64 before this one.
  // Fails like Barrier().
  virtual absl::Status Announce(uint64_t id) = 0;
  // Ranks other than 0: waits for rank 0's next announcement and returns
  // it; every rank reads every announcement, in order. Fails like Barrier()
  // (DeadlineExceeded after the transport's operation timeout without one).
  virtual absl::StatusOr<uint64_t> NextAnnouncement() = 0;

 protected:
  ~SharedWorkspace() = default;  // owned by its transport
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHARED_WORKSPACE_H_
