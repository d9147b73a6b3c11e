// AllReducePipelinedRing: the ring all-reduce (reduce-scatter, then
// all-gather) for transports whose messages cost a round trip to set up and
// whose bytes cost CPU time to move, i.e. TcpTransport. Registered as
// all-reduce "pipelined_ring"; SelectCrossProcessAlgorithm picks it under
// hint auto when the transport's kind() is "tcp".
//
// Against AllReduceRing it differs in these ways, each measured
// with cross_process_bench (docs/performance.md):
//   - every ring chunk is cut into pieces of at most `piece_bytes` (default
//     512 KiB; a chunk of up to 512 KiB is one piece: cutting 1 MiB
//     all-reduces into 8 pieces of 128 KiB per chunk, as this did before,
//     measured 30% slower, see the constructor), and every step of a piece
//     starts as soon as that piece's previous step is
//     done, not when the whole previous step is: a piece received in the
//     reduce-scatter is merged while it is still in cache and sent on at
//     once, while the later pieces are still arriving, and the all-gather of
//     the first pieces overlaps the reduce-scatter of the last;
//   - every receive whose destination is free is posted up front (the
//     all-gather's into regions still being sent, as soon as that send is
//     done), so the receiver-driven rendezvous of a large message costs no
//     round trip per step: the grants travel while earlier data streams;
//   - the reduce-scatter receives straight into `output` and merges the
//     rank's own input into it (sum is commutative, so the bits are the
//     ring's), so there is no scratch buffer and no initial copy of the
//     input.
//   - the first step's sends (the rank's own input) are posted through a
//     window of `send_window_bytes` (default 2 MiB), the next one as each
//     is written, instead of all at once: the transport writes a peer's
//     frames in order, so a piece merged and passed on would otherwise wait
//     behind the rest of the first step (up to half the message) and be
//     read back from memory after it left the cache. 2 ranks across network
//     namespaces, interleaved: 64 MiB 3.4 -> 3.5 GB/s bus bandwidth (median
//     of 20), 16 MiB 3.1 -> 3.4 (median of 14).
//   - in place (`output` == `input`, as Gloo and torch.distributed
//     all-reduce), the reduce-scatter receives into a few piece-sized slots
//     (`in_place_slots`, reused from run to run) and merges each into the
//     buffer, posting the next receive as a slot frees up. A rank then
//     touches one buffer instead of two, and the bytes in flight are
//     bounded by the slots, so the received data and the kernel's socket
//     buffers stay in cache. 2 ranks across network namespaces, medians
//     of 8 interleaved runs, out of place -> in place (2 slots): 64 MiB
//     3.54 -> 5.02 GB/s bus bandwidth, 16 MiB 3.87 -> 4.81, 4 MiB 4.44 ->
//     5.24, 1 MiB 4.58 -> 4.67, 256 KiB 4.15 -> 4.49.
// The merges and the sends that follow them run in the transport's
// completion callbacks. Up to `drive_max_bytes` Run waits in
// Transport::DriveUntil, so over TCP they run on the calling thread, which
// reads and writes the sockets itself; above it the transport's I/O thread
// runs them and the calling thread sleeps once per all-reduce.
//
//   AlgorithmParams p;  // rank, size, dtype, num_elements, merge_op, final_op
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(
//       CollectiveType::kAllReduce, "pipelined_ring", p));
//   STRATA_RETURN_IF_ERROR(alg->Run(tcp_transport, input, output));
//   STRATA_RETURN_IF_ERROR(alg->Run(tcp_transport, buffer, buffer));  // in place
//
// Tags: 2 (size - 1) per piece; the piece count is capped so that they stay
// below 1000 (the cross-worker executor gives an algorithm 1023). Every rank
// ends with bitwise the same result. A transport error aborts the transport
// (so the peers' pending pieces fail too) and is returned once every posted
// operation has finished.
//
// Thread-safety: one object per rank per collective; Run may be called again
// after it returned. Ownership: holds the in-place receive slots (from
// params.scratch_allocator) between runs, no other buffer.
#ifndef STRATA_RUNTIME_COLLECTIVE_TCP_TRANSPORT_ALL_REDUCE_H_
#define STRATA_RUNTIME_COLLECTIVE_TCP_TRANSPORT_ALL_REDUCE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/transport.h"

namespace strata {

// Default piece size of AllReducePipelinedRing.
inline constexpr size_t kPipelinedRingPieceBytes = 512 << 10;

// Default window of the first step's sends (1-4 MiB measured alike; none
// was 3-9% slower from 16 MiB up).
inline constexpr size_t kPipelinedRingSendWindowBytes = 2 << 20;

// All-reduces of at most this many bytes wait in Transport::DriveUntil
// (over TCP the calling thread moves the bytes, saving two thread wake-ups
// per ring step); larger ones leave them to the transport's I/O thread,
// which measured as fast on a quiet machine and up to 30% faster at 1-16 MiB
// when other processes compete for the cores.
inline constexpr int64_t kPipelinedRingDriveMaxBytes = 1 << 20;

// Receive slots of an in-place run: 2 of 512 KiB fill this machine's 1 MiB
// L2 (1 and 3 measured alike within the noise, 4 slower at 16-64 MiB).
inline constexpr int kPipelinedRingInPlaceSlots = 2;

struct PipelinedRingOptions {
  // Pieces of at most about this many bytes (>= 1; larger where the tag
  // cap says).
  size_t piece_bytes = kPipelinedRingPieceBytes;
  // Runs of at most this many bytes drive the transport (DriveUntil).
  int64_t drive_max_bytes = kPipelinedRingDriveMaxBytes;
  // First-step sends kept posted (at least one piece; 0: no limit).
  size_t send_window_bytes = kPipelinedRingSendWindowBytes;
  // Reduce-scatter receives posted at a time in place (>= 1).
  int in_place_slots = kPipelinedRingInPlaceSlots;
};

// An AllReducePipelinedRing. InvalidArgument for a non-all-reduce, an
// unreducible dtype or piece_bytes 0.
absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> CreatePipelinedRingAllReduce(
    const AlgorithmParams& params, const PipelinedRingOptions& options = {});

// SelectAlgorithm, except that an all-reduce with hint "auto" (or empty) over
// a transport of kind "tcp" gets "pipelined_ring". Every rank computes the
// same answer from the same arguments.
absl::StatusOr<std::string> SelectCrossProcessAlgorithm(CollectiveType type, const std::string& hint,
                                                        int group_size, int64_t bytes_per_rank,
                                                        const std::string& transport_kind);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TCP_TRANSPORT_ALL_REDUCE_H_
