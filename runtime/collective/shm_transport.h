// ShmTransport: the Transport for ranks that are processes (or threads) on
// one host, over one POSIX shared-memory segment per communicator. Rank 0
// creates the segment (shm_open + mmap), publishes its name through the
// KeyValueStore under `<key_prefix>/segment`, every rank maps it and marks
// itself attached, and rank 0 unlinks the name as soon as all have: from then
// on nothing is left in /dev/shm, even if every process is SIGKILLed. (A
// rank 0 killed before its peers attached leaves the name; the next rank 0
// on the host removes names whose creator has exited, once a minute old.)
//
//   ShmTransportOptions options;
//   options.key_prefix = "collective/group7";
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t,
//                           ConnectShmTransport(rank, size, kv, options));
//   PendingOps ops;
//   t->RecvAsync(left, /*tag=*/0, buf, bytes, ops.Add());
//   t->SendAsync(right, /*tag=*/0, chunk, bytes, ops.Add());
//   STRATA_RETURN_IF_ERROR(ops.Wait());
//
// Send/receive (Transport's semantics): per ordered pair of ranks the
// segment holds a control ring (fixed-size records) and a data ring (bytes),
// each single-producer/single-consumer. A send first posts a descriptor
// (tag, byte count); the receiver matches it against its posted receive by
// (src, tag) and answers clear-to-send, or rejects it (InvalidArgument naming
// the peer, on both ranks) when the byte counts differ, before any byte is
// copied or any buffer allocated. Cleared messages stream through the data
// ring in the order they were cleared, so receives may be posted in any
// order. Each rank runs one progress thread that polls its rings: it spins
// briefly, then yields, then sleeps on a futex in the segment that peers ring
// when they write to it (a sleeping rank costs 35-60 µs to wake on a VM).
//
// Collective workspace (for AllReduceShm): two sets of `size` slots of
// chunk_bytes() each (used alternately, so a rank may fill the next set
// while its peers still read the last one) plus one result buffer of
// chunk_bytes(), all in the segment, and a spin-then-sleep Barrier() over
// all ranks. Collectives that use it must be
// run in the same order on every rank and one at a time per communicator.
// Where collectives start in different orders on different ranks (each
// rank's graph reaches them when it does), rank 0 fixes the order: it
// Announce()s an id before each workspace collective, and every other rank
// takes the ids in that order from NextAnnouncement(). An announcement costs
// a few cache lines in the segment, no message (Horovod's coordinator sends
// one per tensor).
//
// Failure: Abort(status) writes the status into the segment and wakes every
// rank; every pending and later operation (sends, receives, barriers) of
// every rank then fails with it. A peer whose process has exited (found from
// its pid while a rank waits) aborts the communicator with Unavailable
// naming the rank; an operation pending longer than operation_timeout aborts
// it with DeadlineExceeded naming the peer. A frozen peer (SIGSTOP) is found
// only by the timeout or by the owner calling Abort.
//
// Thread-safety: Transport's methods may be called concurrently; the
// workspace and announcement methods by one thread per rank at a time. Ownership: buffers as
// for Transport; the KeyValueStore is used only during the connect.
#ifndef STRATA_RUNTIME_COLLECTIVE_SHM_TRANSPORT_H_
#define STRATA_RUNTIME_COLLECTIVE_SHM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "graph/types.h"
#include "kernels/collective.h"
#include "runtime/collective/transport.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {

struct ShmTransportOptions {
  // Namespaces the KeyValueStore key and the segment's name, so that two
  // communicators of one cluster never meet.
  std::string key_prefix = "shm";
  // How long a rank waits for rank 0's segment and for every rank to attach.
  absl::Duration connect_timeout = absl::Seconds(30);
  // How long one send, receive or barrier may wait for its peer before the
  // communicator is aborted with DeadlineExceeded.
  absl::Duration operation_timeout = absl::Minutes(5);
  // The rest is rank 0's choice; the other ranks take the segment's values.
  // Bytes of each ordered pair's data ring (rounded up to 4 KiB).
  size_t ring_bytes = size_t{1} << 20;
  // Bytes of each workspace slot: the all-reduce's pipeline chunk. Small
  // enough that size + 1 slots stay in cache.
  size_t chunk_bytes = size_t{256} << 10;
  // A waiting rank polls for spin_duration, then calls sched_yield until
  // yield_duration more has passed, then sleeps on a futex. With
  // adaptive_wait the durations are chosen at connect instead: when the
  // ranks fit on this process's CPUs (size <= CPUs it may run on), a rank
  // polls 20 ms and yields 100 µs, since its peers run at the same time, and
  // on a loaded machine a rank that sleeps or yields loses its core for a
  // whole time slice (measured, 2 ranks, load 4 on 2 cores: 4 KiB took
  // 74 µs polling 2 ms, 0.5 µs polling 20 ms); when they do not fit, it
  // yields at once (after a few dozen pause instructions) for up to 2 ms, so
  // a rank sharing a core with the peer it waits for lets that peer run
  // (measured, 4 ranks on 2 cores, load 6-10: 4 KiB in ~25 µs against
  // ~150 µs polling 20 µs first; 1 MiB 2.6 against 0.3 GB/s bus bandwidth).
  // Polling costs CPU time: a caller whose other threads compute while a
  // collective waits may prefer less.
  bool adaptive_wait = true;
  absl::Duration spin_duration = absl::Microseconds(50);
  absl::Duration yield_duration = absl::Microseconds(500);
};

// What every rank of one workspace collective passes, checked to be equal
// on every rank at its first barrier.
struct ShmCollectiveDesc {
  int64_t num_elements = 0;
  DataType dtype = DT_INVALID;
  MergeOp merge_op = MergeOp::kAdd;
  FinalOp final_op = FinalOp::kId;
  int32_t collective = 0;  // which collective (CollectiveType)
};

class ShmTransport : public Transport {
 public:
  // The workspace; valid for this object's lifetime.
  virtual size_t chunk_bytes() const = 0;
  virtual char* slot(int rank, int set) = 0;  // set 0 or 1
  virtual char* result() = 0;
  // The set the next chunk uses: 0, 1, 0, ... (the same on every rank while
  // every rank runs the same chunks).
  virtual int NextSet() = 0;
  // Publishes this rank's descriptor for the next workspace collective; the
  // peers' become readable after the next Barrier().
  virtual void PublishDesc(const ShmCollectiveDesc& desc) = 0;
  // InvalidArgument naming the first rank whose published descriptor differs
  // from `desc` (call after the barrier that follows PublishDesc).
  virtual absl::Status CheckDescs(const ShmCollectiveDesc& desc) = 0;
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
  // (DeadlineExceeded after operation_timeout without one).
  virtual absl::StatusOr<uint64_t> NextAnnouncement() = 0;
};

// Connects rank `rank` of `size` (1 <= size <= 64) on this host. Rank 0
// creates the segment; the others find it through `kv` within
// options.connect_timeout (DeadlineExceeded naming the ranks that never
// attached). The result's kind() is "shm"; dynamic_cast it to ShmTransport
// for the workspace.
absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const ShmTransportOptions& options);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_SHM_TRANSPORT_H_
