// AllReducePipelinedRing: the ring all-reduce (reduce-scatter, then
// all-gather) for transports whose messages cost a round trip to set up and
// whose bytes cost CPU time to move, i.e. TcpTransport. Registered as
// all-reduce "pipelined_ring"; SelectAlgorithm picks it under hint auto when
// the transport's kind() is "tcp".
//
// Against AllReduceRing (each choice measured with cross_process_bench; the
// figures are in docs/perf/notes/crossprocess.md):
//   - every ring chunk is cut into pieces of at most `piece_bytes` (a chunk
//     of up to a piece is one piece), and each step of a piece starts as soon
//     as that piece's previous step is done: a piece received in the
//     reduce-scatter is merged while still in cache and sent on at once, and
//     the all-gather of the first pieces overlaps the reduce-scatter of the
//     last;
//   - every receive whose destination is free is posted up front (the
//     all-gather's as soon as the send from that region is done), so the
//     receiver-driven rendezvous of a large message costs no round trip per
//     step;
//   - the reduce-scatter receives straight into `output` and merges the
//     rank's own input into it (sum is commutative, so the bits are the
//     ring's): no scratch buffer, no initial copy of the input;
//   - the first step's sends (the rank's own input) go out through a window
//     of `send_window_bytes`, one more as each is written, so that a merged
//     piece passed on does not queue behind the rest of the first step;
//   - in place (`output` == `input`, as Gloo's and torch.distributed's
//     all-reduce), the reduce-scatter receives into `in_place_slots`
//     piece-sized slots (kept between runs) and merges each into the buffer:
//     one buffer touched instead of two, the bytes in flight bounded by the
//     slots.
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
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_PIPELINED_RING_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_PIPELINED_RING_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

// Default piece size of AllReducePipelinedRing.
inline constexpr size_t kPipelinedRingPieceBytes = 512 << 10;

// Default window of the first step's sends (1-4 MiB measured alike; none
// was 3-9% slower from 16 MiB up).
inline constexpr size_t kPipelinedRingSendWindowBytes = 2 << 20;

// All-reduces of at most this many bytes wait in Transport::DriveUntil
// (transport.h's kDriveMaxBytes).
inline constexpr int64_t kPipelinedRingDriveMaxBytes = kDriveMaxBytes;

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

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_PIPELINED_RING_H_
