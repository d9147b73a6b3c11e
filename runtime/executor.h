// Executor: runs one device's partition graph as a dataflow, once per step.
//
// Create() does all the planning once: a kernel per node (from the kernel
// registry), a flat index of every node's input slots, each node's out-edges
// as (destination node, destination slot) arrays and the pending-input counts.
// A step then only copies the pending counts, runs each node when its inputs
// have arrived and moves each output into its consumers' slots.
//
//   absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(partition_graph, device);
//   Executor::Args args;
//   args.call_frame = &frame;             // feeds (_Arg) and fetches (_Retval)
//   args.rendezvous = &rendezvous;        // _Send/_Recv to other partitions
//   args.inter_op_pool = pool;            // for expensive kernels; may be null
//   args.tracer = &tracer;                // optional: per-kernel times (runtime/trace.h)
//   absl::Status s = (*ex)->Run(args);    // or RunAsync(args, done)
//
// Scheduling: inexpensive ready nodes run inline on the thread that made them
// ready, in a loop (no recursion, no std::function, no heap allocation per
// node beyond the kernels' outputs, no lock). Only OpKernel::IsExpensive()
// nodes are handed to the inter-op pool, and only when the thread has other
// ready work; asynchronous kernels (Recv, collectives) continue the step on
// the thread that completes them. An output moves (not copies) into its last
// consumer's slot, so kernels can reuse a buffer nobody else holds.
//
// Conditionals (TensorFlow's Switch and Merge, graph/ops/control_flow_ops.h):
// a value can be "dead" for a step. Switch hands its input to one of its two
// outputs and leaves the other dead; a node with a dead input (data or
// control) does not run and its outputs are dead; Merge waits for all its
// inputs and forwards the live one (dead when all are). A dead value crosses
// partitions as an empty tensor through _Send/_Recv, so the receiving side
// learns of it too. A dead fetch is an error of the session (a value of the
// branch not taken); a dead target simply did not run. Graphs without
// Switch, Merge or _Recv pay nothing for this.
//
// Errors: the first failing node's status, prefixed "node 'x' (op MatMul): ",
// ends the step: it cancels the step's CancellationManager (so async kernels
// and other partitions stop) and no further node starts. Cancelling that
// manager from outside ends the step the same way with its status.
//
// Thread-safety: Run/RunAsync may be called concurrently (each step has its
// own state). Ownership: the executor owns its kernels; the device and
// everything in Args must outlive the step, and the executor must outlive
// every step it runs (until `done` has been called).
#ifndef STRATA_RUNTIME_EXECUTOR_H_
#define STRATA_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "graph/graph.h"
#include "kernels/device_base.h"
#include "kernels/op_kernel.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

class CallFrame;
class CancellationManager;
class CollectiveExecutor;
class Rendezvous;
class StepTracer;

class Executor {
 public:
  struct Args {
    int64_t step_id = 0;
    CallFrame* call_frame = nullptr;
    Rendezvous* rendezvous = nullptr;
    // The step's; nullptr gives the step a private one.
    CancellationManager* cancellation = nullptr;
    CollectiveExecutor* collective_executor = nullptr;
    // Where expensive nodes and deep async continuations run; nullptr runs
    // everything on the calling (or completing) thread.
    Eigen::ThreadPoolInterface* inter_op_pool = nullptr;
    // Records every kernel of the step (runtime/trace.h); nullptr: nothing
    // is recorded and no clock is read.
    StepTracer* tracer = nullptr;
  };
  using DoneCallback = std::function<void(absl::Status)>;

  // Plans `graph` (one partition, every node to run on `device`). Errors:
  // a cycle (InvalidArgument), an unconnected input (FailedPrecondition), no
  // kernel (NotFound) or a kernel constructor's error, each naming the node.
  // `graph` is only read during the call.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Graph& graph, DeviceBase* device);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs one step; `done` is called exactly once, possibly before RunAsync
  // returns, on whichever thread finished the step's last node.
  void RunAsync(const Args& args, DoneCallback done);
  // Runs one step and waits for it.
  absl::Status Run(const Args& args);

  int num_nodes() const { return static_cast<int>(items_.size()); }
  // The kernel of every node.
  std::vector<const OpKernel*> kernels() const {
    std::vector<const OpKernel*> out;
    for (const auto& k : kernels_) out.push_back(k.get());
    return out;
  }
  DeviceBase* device() const { return device_; }

 private:
  // One node, as the step loop sees it: everything precomputed.
  struct NodeItem {
    OpKernel* kernel = nullptr;
    int32_t input_start = 0;    // first of this node's slots in StepState::slots
    int32_t num_inputs = 0;
    int32_t out_begin = 0;      // this node's out-edges: out_edges_[out_begin, out_end)
    int32_t out_end = 0;
    int32_t initial_pending = 0;  // in-edges (data and control)
    bool is_async = false;
    bool is_expensive = false;
    bool is_send = false;  // a _Send: runs before the other ready nodes
    // Runs even with dead inputs (Merge picks the live one; _Send sends the
    // dead marker, an empty tensor).
    bool runs_when_dead = false;
    // May leave outputs unset, meaning dead (Switch, Merge, _Recv).
    bool may_kill_outputs = false;
  };
  // A data edge (dst_slot >= 0) or a control edge (dst_slot < 0). Data edges
  // of one output are adjacent; the last of them has `move` set.
  struct OutEdge {
    int32_t dst = 0;
    int32_t dst_slot = -1;
    int32_t src_output = -1;
    bool move = false;
  };
  class StepState;
  friend class StepState;

  explicit Executor(DeviceBase* device);
  std::unique_ptr<StepState> AcquireState();
  void ReleaseState(std::unique_ptr<StepState> s);

  // Const after Create.
  DeviceBase* const device_;
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::vector<NodeItem> items_;
  std::vector<OutEdge> out_edges_;
  std::vector<int32_t> roots_;            // nodes with no in-edges
  std::vector<int32_t> initial_pending_;  // copied into each step
  int32_t num_slots_ = 0;
  // Whether any node can make a value dead: then each step tracks deadness.
  bool tracks_deadness_ = false;

  // Step states of finished successful steps, reused so that a step does not
  // allocate and zero its slot array (one lock per step, not per node).
  Mutex free_mu_;
  std::vector<std::unique_ptr<StepState>> free_states_ ABSL_GUARDED_BY(free_mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_EXECUTOR_H_
