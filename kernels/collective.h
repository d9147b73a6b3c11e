// CollectiveExecutor: the interface the collective op kernels
// (CollectiveReduceV2, CollectiveGatherV2, CollectiveBcastSendV2,
// CollectiveBcastRecvV2) call to take part in a collective with the other
// members of their group. runtime/collective/ implements it (group resolution,
// instance matching, algorithms over a Transport); kernels see only this.
//
//   CollectiveParams p;
//   p.type = CollectiveType::kAllReduce;
//   p.group_size = 4; p.group_key = 1; p.instance_key = 7; p.step_id = ctx.params().step_id;
//   p.device = ctx.device()->name();
//   p.dtype = DT_FLOAT; p.shape = input.shape();
//   p.merge_op = MergeOp::kAdd; p.final_op = FinalOp::kDiv;
//   executor->ExecuteAsync(p, input, ctx.allocator(), ctx.params().cancellation,
//                          [&](absl::Status s, Tensor out) { ... });
//
// Meeting rule: the group_size participants of one collective are the calls
// with the same (group_key, instance_key, step_id), one per device. A group is
// the set of devices that use its group_key; each device's rank in it is its
// index among the members' device names sorted, so every participant derives
// the same ranks without talking.
//
// Thread-safety: ExecuteAsync may be called concurrently from any thread.
// Ownership: the executor does not own the allocator or the cancellation
// manager; both must stay alive until `done` has run. `done` runs exactly
// once, possibly on another thread, possibly before ExecuteAsync returns.
#ifndef STRATA_KERNELS_COLLECTIVE_H_
#define STRATA_KERNELS_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

class CancellationManager;

enum class CollectiveType {
  kAllReduce,      // every rank gets merge(inputs), then final_op
  kAllGather,      // every rank gets the inputs concatenated along dim 0, in rank order
  kBroadcastSend,  // the source: its input goes to every rank (and is its own output)
  kBroadcastRecv,  // every other rank: receives the source's tensor
  // Every rank gets its block of merge(inputs), then final_op: the inputs'
  // dim 0 cut into group_size equal blocks, rank r getting block r.
  kReduceScatter,
};

enum class MergeOp { kAdd, kMul, kMin, kMax };
enum class FinalOp { kId, kDiv };  // kDiv: divide the merged value by group_size

// TensorFlow's attr spellings: "Add", "Mul", "Min", "Max"; "Id", "Div".
// InvalidArgument naming the value otherwise.
absl::StatusOr<MergeOp> ParseMergeOp(const std::string& s);
absl::StatusOr<FinalOp> ParseFinalOp(const std::string& s);
const char* CollectiveTypeName(CollectiveType t);  // "all-reduce", ...
const char* MergeOpName(MergeOp op);                // "Add", ...

// One participant's description of a collective. Every field except `device`
// (and the node name) must agree across the participants; the executor
// reports a mismatch as InvalidArgument naming the devices.
struct CollectiveParams {
  CollectiveType type = CollectiveType::kAllReduce;
  int group_size = 0;    // participants, >= 1
  int group_key = 0;     // which group
  int instance_key = 0;  // which collective of the group
  int64_t step_id = 0;   // instance keys may be reused step after step
  std::string device;    // this participant's full device name
  std::string node_name; // the op's node, for error messages (may be empty)
  DataType dtype = DT_INVALID;
  // The input's shape (all-reduce, all-gather, broadcast send) or the
  // expected output shape (broadcast recv). All-gather inputs must agree on
  // every dimension (dim 0 included).
  TensorShape shape;
  MergeOp merge_op = MergeOp::kAdd;  // all-reduce and reduce-scatter only
  FinalOp final_op = FinalOp::kId;   // all-reduce and reduce-scatter only
  // Seconds to wait for all participants to arrive and finish; <= 0: the
  // executor's default. Past it: DeadlineExceeded naming the missing ones.
  float timeout_seconds = 0;
  // Selects the algorithm: "auto" (the executor picks), "ring",
  // "reduce_to_one" (alias "local"); "nccl" is reserved for GPU devices.
  // It must be the same on every participant.
  std::string communication_hint = "auto";
};

// A reduce-scatter's input must have a dimension 0 that splits into
// group_size equal blocks: InvalidArgument naming the shape otherwise (OK
// for the other collectives).
absl::Status CheckReduceScatterShape(const CollectiveParams& p);

class CollectiveExecutor {
 public:
  // On success the Tensor is the participant's output (allocated from the
  // allocator passed to ExecuteAsync); on failure it is uninitialized.
  using DoneCallback = std::function<void(absl::Status, Tensor)>;

  virtual ~CollectiveExecutor() = default;

  // Joins the collective `params` describes with `input` (ignored for
  // kBroadcastRecv). `allocator` allocates the output; `cancellation` (may be
  // null) is the step's: cancelling it aborts the wait with its status.
  virtual void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                            CancellationManager* cancellation, DoneCallback done) = 0;

  // Synchronous wrapper around ExecuteAsync. While recent waits were short
  // (under 50 us) the caller polls for up to about twice the recent wait
  // before it sleeps (being woken costs more than that on a shared VM), and
  // each poll first offers the thread to HelpWhileWaiting. Kernels use
  // ExecuteAsync and never wait.
  absl::StatusOr<Tensor> Execute(const CollectiveParams& params, Tensor input,
                                 Allocator* allocator, CancellationManager* cancellation);

  // Runs one piece of this executor's pending collective work, if there is
  // any, on the calling thread (a caller of Execute that would otherwise
  // only wait) and returns true; false if there was none. The default has
  // none.
  virtual bool HelpWhileWaiting() { return false; }

  // Whether a synchronous caller of the collective `params` should poll
  // (helping, else yielding) before it sleeps. The default: yes.
  virtual bool PollWhileWaiting(const CollectiveParams& params) const { return true; }
};

}  // namespace strata

#endif  // STRATA_KERNELS_COLLECTIVE_H_
