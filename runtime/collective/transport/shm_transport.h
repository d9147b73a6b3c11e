// The shared-memory Transport, for ranks that are processes (or threads) on
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
// The transport offers a SharedWorkspace (shared_workspace.h; for
// AllReduceShm): two sets of `size` slots of chunk_bytes() each plus one
// result buffer, all in the segment, a spin-then-sleep Barrier() over all
// ranks, and rank 0's announcements, each a few cache lines in the segment,
// no message (Horovod's coordinator sends one per tensor).
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
// workspace's methods by one thread per rank at a time. Ownership: buffers
// as for Transport; the KeyValueStore is used only during the connect.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TRANSPORT_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/transport/transport.h"
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
  // Let collectives copy straight from a peer's memory (Linux cross-memory
  // attach, process_vm_readv; SharedWorkspace::peers_readable) where every
  // rank may: the all-gather then moves each block once instead of through
  // the segment. Probed at connect (a peer's ptrace permission: same user,
  // no Yama or seccomp restriction); any rank without it, or with this
  // false, turns it off for all.
  bool single_copy = true;
  absl::Duration spin_duration = absl::Microseconds(50);
  absl::Duration yield_duration = absl::Microseconds(500);
  // For tests: called by a waiting thread just before it checks whether
  // rank q closed or exited, so that a test can let q finish in between.
  std::function<void(int q)> before_peer_check;
};

// Connects rank `rank` of `size` (1 <= size <= 64) on this host. Rank 0
// creates the segment; the others find it through `kv` within
// options.connect_timeout (DeadlineExceeded naming the ranks that never
// attached). The result's kind() is "shm" and its shared_workspace() is the
// segment's workspace.
absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const ShmTransportOptions& options);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TRANSPORT_H_
