#include "runtime/executor.h"

#include <algorithm>
#include <new>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/run_queue.h"
#include "base/status.h"
#include "kernels/cancellation.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "runtime/trace.h"

namespace strata {

namespace {

// How many executor loops may nest on one thread (a Send waking a waiting
// Recv of another partition continues the receiving step inline, inside the
// sender's loop, unless an expensive node is ready: see AsyncDone). Past
// this, continuations go to the inter-op pool so that a ping-pong between
// partitions cannot overflow the stack.
constexpr int kMaxInlineDepth = 8;
thread_local int inline_depth = 0;

// Slots are written exactly once per step and are empty before, so writing
// one is a construction, not an assignment (no swap through a temporary).
inline void MoveInto(Tensor* slot, Tensor&& v) {
  slot->~Tensor();
  new (slot) Tensor(std::move(v));
}
inline void CopyInto(Tensor* slot, const Tensor& v) {
  slot->~Tensor();
  new (slot) Tensor(v);
}
inline void Clear(Tensor* t) {
  if (t->buffer() != nullptr || t->IsInitialized()) {
    t->~Tensor();
    new (t) Tensor();
  }
}

absl::Status NodeError(const OpKernel& k, const absl::Status& s) {
  return absl::Status(s.code(),
                      absl::StrCat("node '", k.name(), "' (op ", k.type_string(), "): ", s.message()));
}

}  // namespace

// The state of one step: the input slots, the pending counts and the
// bookkeeping that tells when the step is over.
//
// Termination uses tokens rather than a count of running nodes: each loop
// (the starting thread's, each pool task's, each async kernel's
// continuation) holds one token for its whole life, however many nodes it
// runs, and the step ends when the last token is returned. So a chain of
// inline nodes does no atomic operation besides the kernels' own.
class Executor::StepState {
 public:
  explicit StepState(Executor* ex)
      : ex_(ex),
        items_(ex->items_.data()),
        edges_(ex->out_edges_.data()),
        slots_(new Tensor[ex->num_slots_]),
        pending_(new std::atomic<int32_t>[ex->items_.size()]),
        dead_(ex->tracks_deadness_ ? new std::atomic<bool>[ex->items_.size()] : nullptr) {}

  void Start(const Args& args, DoneCallback done) {
    args_ = args;
    done_ = std::move(done);
    if (args.cancellation != nullptr) {
      cm_ = args.cancellation;
    } else {
      own_cm_.emplace();
      cm_ = &*own_cm_;
    }
    const int32_t n = static_cast<int32_t>(ex_->items_.size());
    const int32_t* init = ex_->initial_pending_.data();
    for (int32_t i = 0; i < n; ++i) pending_[i].store(init[i], std::memory_order_relaxed);
    if (dead_ != nullptr) {
      for (int32_t i = 0; i < n; ++i) dead_[i].store(false, std::memory_order_relaxed);
    }
    failed_ = false;
    outstanding_.store(1, std::memory_order_relaxed);  // the starting loop's token
    Stack stack(ex_->roots_.rbegin(), ex_->roots_.rend());
    RunLoop(stack);
  }

 private:
  using Stack = absl::InlinedVector<int32_t, 32>;

  // A started asynchronous kernel: its context must live until `done`.
  // `phase` decides who finishes it: if `done` comes before ComputeAsync has
  // returned (a Recv whose value was already sent), the starting loop carries
  // on with the outputs itself instead of nesting a new loop; otherwise the
  // `done` caller continues the step.
  enum Phase : int { kStarting = 0, kStarted = 1, kDone = 2 };
  struct AsyncNode {
    AsyncNode(StepState* s, int32_t id, const OpKernelContext::Params& p)
        : state(s), node(id), ctx(p) {}
    StepState* state;
    int32_t node;
    OpKernelContext ctx;
    absl::Status status;
    std::atomic<int> phase{kStarting};
    int64_t start_ns = 0;  // when tracing: ComputeAsync's start and done's call
    int64_t end_ns = 0;
  };

  OpKernelContext::Params BaseParams() const {
    OpKernelContext::Params p;
    p.device = ex_->device_;
    p.step_id = args_.step_id;
    p.rendezvous = args_.rendezvous;
    p.call_frame = args_.call_frame;
    p.cancellation = cm_;
    p.collective_executor = args_.collective_executor;
    return p;
  }

  // Runs ready nodes until none is left, then returns this loop's token.
  void RunLoop(Stack& stack) {
    CountThisThreadsRunQueueDelay();
    ++inline_depth;
    OpKernelContext::Params params = BaseParams();
    Eigen::ThreadPoolInterface* const pool = args_.inter_op_pool;
    StepTracer* const tracer = args_.tracer;
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      const NodeItem& item = items_[id];
      // A cancelled or failed step starts no more nodes; their inputs stay
      // in the slots and go with this state (it is not reused).
      if (cm_->IsCancelled()) continue;
      // An expensive node goes to the pool when this thread has other work,
      // so that independent expensive nodes run side by side.
      if (item.is_expensive && pool != nullptr && !stack.empty()) {
        outstanding_.fetch_add(1, std::memory_order_relaxed);
        pool->Schedule([this, id] {
          Stack s{id};
          RunLoop(s);
        });
        continue;
      }
      params.op_kernel = item.kernel;
      params.inputs = &slots_[item.input_start];
      // A dead node does not run: its live inputs are dropped and its
      // consumers learn that its outputs are dead.
      if (dead_ != nullptr && !item.runs_when_dead &&
          dead_[id].load(std::memory_order_relaxed)) {
        for (int32_t i = 0; i < item.num_inputs; ++i) Clear(&params.inputs[i]);
        PropagateDead(item, &stack);
        continue;
      }
      if (item.is_async) {
        StartAsync(id, params, &stack);
        continue;
      }
      OpKernelContext ctx(params);
      const int64_t start_ns = tracer != nullptr ? StepTracer::NowNanos() : 0;
      absl::Status s = item.kernel->Compute(ctx);
      if (tracer != nullptr && tracer->wait_for_device() && s.ok()) s = ex_->device_->Sync();
      if (tracer != nullptr) {
        tracer->Record(item.kernel->name(), item.kernel->type_string(), ex_->device_->name(),
                       start_ns, StepTracer::NowNanos(), /*async=*/false);
      }
      for (int32_t i = 0; i < item.num_inputs; ++i) Clear(&params.inputs[i]);
      if (!s.ok()) {
        RecordError(item, s);
        continue;
      }
      Propagate(item, ctx.outputs().data(), ctx.outputs().size(), &stack);
    }
    --inline_depth;
    ReturnToken();
  }

  // Puts the _Sends among the nodes pushed from `first` on top, so that they
  // run next: a value another partition waits for (a pipeline's next stage,
  // maybe on another worker) leaves before this thread goes on down its own
  // chain (the next micro-batch's forward, which the schedule made ready
  // at the same time).
  void SendsFirst(size_t first, Stack* stack) const {
    bool any = false;
    for (size_t i = first; i < stack->size() && !any; ++i) any = items_[(*stack)[i]].is_send;
    if (!any) return;
    std::stable_partition(stack->begin() + first, stack->end(),
                          [this](int32_t id) { return !items_[id].is_send; });
  }

  // Hands `outs` to the consumers and pushes those that became ready.
  void Propagate(const NodeItem& item, Tensor* outs, size_t num_outs, Stack* stack) {
    const size_t first = stack->size();
    PropagateOutputs(item, outs, num_outs, stack);
    SendsFirst(first, stack);
  }
  void PropagateOutputs(const NodeItem& item, Tensor* outs, size_t num_outs, Stack* stack) {
    if (item.may_kill_outputs && dead_ != nullptr) {
      // A Merge of dead inputs or a dead _Recv is dead as a whole (its
      // control edges too); a Switch kills one output only.
      bool any = num_outs == 0;
      for (size_t i = 0; i < num_outs && !any; ++i) any = outs[i].IsInitialized();
      if (!any) {
        PropagateDead(item, stack);
        return;
      }
    }
    const OutEdge* e = edges_ + item.out_begin;
    const OutEdge* const end = edges_ + item.out_end;
    for (; e != end; ++e) {
      if (e->dst_slot >= 0) {
        Tensor& out = outs[e->src_output];
        if (!out.IsInitialized()) {
          if (!item.may_kill_outputs || dead_ == nullptr) {
            RecordError(item, absl::InternalError(absl::StrCat(
                                  "output ", e->src_output, " was not set by the kernel")));
            return;
          }
          dead_[e->dst].store(true, std::memory_order_relaxed);  // this output is dead
        } else if (e->move) {
          MoveInto(&slots_[e->dst_slot], std::move(out));
        } else {
          CopyInto(&slots_[e->dst_slot], out);
        }
      }
      // A node with one in-edge is ready when it arrives: no atomic needed.
      if (items_[e->dst].initial_pending == 1 ||
          pending_[e->dst].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        stack->push_back(e->dst);
      }
    }
  }

  // Every consumer of a dead node gets a dead input (the pending count's
  // acquire-release orders the flag before the consumer's check).
  void PropagateDead(const NodeItem& item, Stack* stack) {
    const OutEdge* e = edges_ + item.out_begin;
    const OutEdge* const end = edges_ + item.out_end;
    for (; e != end; ++e) {
      dead_[e->dst].store(true, std::memory_order_relaxed);
      if (items_[e->dst].initial_pending == 1 ||
          pending_[e->dst].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        stack->push_back(e->dst);
      }
    }
  }

  void StartAsync(int32_t id, const OpKernelContext::Params& params, Stack* stack) {
    const NodeItem& item = items_[id];
    // A token for the completion, taken before the kernel starts since
    // `done` may run on another thread at once.
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    auto* a = new AsyncNode(this, id, params);
    if (args_.tracer != nullptr) a->start_ns = StepTracer::NowNanos();
    static_cast<AsyncOpKernel*>(item.kernel)->ComputeAsync(a->ctx, [a](absl::Status s) {
      if (a->state->args_.tracer != nullptr) a->end_ns = StepTracer::NowNanos();
      a->status = std::move(s);
      if (a->phase.exchange(kDone, std::memory_order_acq_rel) == kStarting) return;
      a->state->AsyncDone(a);
    });
    if (a->phase.exchange(kStarted, std::memory_order_acq_rel) == kDone) {
      // Finished already: continue in this loop. This loop's own token keeps
      // the step alive, so the completion's token can go back at once.
      FinishAsyncNode(a, stack);
      outstanding_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // Clears the inputs and hands on the outputs of a finished async node.
  void FinishAsyncNode(AsyncNode* a, Stack* stack) {
    const NodeItem& item = items_[a->node];
    if (args_.tracer != nullptr) {
      args_.tracer->Record(item.kernel->name(), item.kernel->type_string(), ex_->device_->name(),
                           a->start_ns, a->end_ns, /*async=*/true);
    }
    Tensor* inputs = &slots_[item.input_start];
    for (int32_t i = 0; i < item.num_inputs; ++i) Clear(&inputs[i]);
    if (!a->status.ok()) {
      RecordError(item, a->status);
    } else if (!cm_->IsCancelled()) {
      Propagate(item, a->ctx.outputs().data(), a->ctx.outputs().size(), stack);
    }
    delete a;
  }

  // Completion on another thread (or after ComputeAsync returned): continue
  // the step there with the completion's token.
  void AsyncDone(AsyncNode* a) {
    Stack stack;
    FinishAsyncNode(a, &stack);
    Eigen::ThreadPoolInterface* const pool = args_.inter_op_pool;
    // Inside another loop (a Send of another partition woke this Recv), an
    // expensive node would hold that partition's thread until it finished:
    // a pipeline's stage would wait for the next stage's kernel before
    // starting its next micro-batch. Cheap continuations stay inline.
    bool hand_off = inline_depth >= kMaxInlineDepth;
    if (inline_depth > 0) {
      for (int32_t id : stack) hand_off |= items_[id].is_expensive;
    }
    if (hand_off && pool != nullptr && !stack.empty()) {
      pool->Schedule([this, stack = std::move(stack)]() mutable { RunLoop(stack); });
      return;
    }
    RunLoop(stack);
  }

  void RecordError(const NodeItem& item, const absl::Status& s) {
    absl::Status annotated = NodeError(*item.kernel, s);
    {
      MutexLock l(&mu_);
      if (status_.ok()) status_ = annotated;
    }
    failed_.store(true, std::memory_order_relaxed);
    cm_->StartCancel(annotated);
  }

  void ReturnToken() {
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // The last token is back: report and give the state back before calling
  // `done`, since `done` may destroy the executor.
  void Finish() {
    absl::Status s;
    {
      MutexLock l(&mu_);
      s = std::move(status_);
      status_ = absl::OkStatus();
    }
    if (s.ok() && cm_->IsCancelled()) {
      s = cm_->status();
      failed_.store(true, std::memory_order_relaxed);
    }
    DoneCallback done = std::move(done_);
    done_ = nullptr;
    Executor* ex = ex_;
    if (failed_.load(std::memory_order_relaxed)) {
      delete this;  // slots may hold inputs of nodes that never ran
    } else {
      own_cm_.reset();
      ex->ReleaseState(std::unique_ptr<StepState>(this));
    }
    done(std::move(s));
  }

  Executor* const ex_;
  const NodeItem* const items_;
  const OutEdge* const edges_;
  const std::unique_ptr<Tensor[]> slots_;
  const std::unique_ptr<std::atomic<int32_t>[]> pending_;
  // Per node: an input of this step is dead (null when the graph cannot
  // make dead values).
  const std::unique_ptr<std::atomic<bool>[]> dead_;

  Args args_;
  DoneCallback done_;
  std::optional<CancellationManager> own_cm_;
  CancellationManager* cm_ = nullptr;
  std::atomic<int32_t> outstanding_{0};
  std::atomic<bool> failed_{false};
  Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

Executor::Executor(DeviceBase* device) : device_(device) {}
Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Graph& graph, DeviceBase* device) {
  if (device == nullptr) return absl::InvalidArgumentError("Executor::Create: null device");
  STRATA_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalSort());
  STRATA_RETURN_IF_ERROR(graph.CheckInputsConnected());
  std::unique_ptr<Executor> ex(new Executor(device));
  const int n = static_cast<int>(order.size());
  // Node index = position in topological order, so roots come first and the
  // slot array is laid out roughly in execution order.
  std::vector<int32_t> index(graph.num_node_ids(), -1);
  for (int i = 0; i < n; ++i) index[order[i]->id()] = i;
  ex->kernels_.reserve(n);
  ex->items_.resize(n);
  int32_t slot = 0;
  for (int i = 0; i < n; ++i) {
    const Node* node = order[i];
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k,
                            CreateOpKernel(device, node->def(), node->op_def(),
                                           node->input_types(), node->output_types()));
    NodeItem& item = ex->items_[i];
    item.kernel = k.get();
    item.input_start = slot;
    item.num_inputs = node->num_inputs();
    item.initial_pending = static_cast<int32_t>(node->in_edges().size());
    item.is_async = k->IsAsync();
    item.is_expensive = k->IsExpensive();
    item.is_send = node->IsOp("_Send");
    item.runs_when_dead = node->IsOp("Merge") || node->IsOp("_Send");
    item.may_kill_outputs = node->IsOp("Switch") || node->IsOp("Merge") || node->IsOp("_Recv");
    if (node->IsOp("Switch") || node->IsOp("_Recv")) ex->tracks_deadness_ = true;
    slot += node->num_inputs();
    ex->kernels_.push_back(std::move(k));
  }
  ex->num_slots_ = slot;
  for (int i = 0; i < n; ++i) {
    const Node* node = order[i];
    NodeItem& item = ex->items_[i];
    item.out_begin = static_cast<int32_t>(ex->out_edges_.size());
    // Data edges grouped by output, so the last consumer of each output is
    // known: it gets the tensor moved in, the others a reference.
    std::vector<std::vector<const Edge*>> by_output(node->num_outputs());
    for (const Edge* e : node->out_edges()) {
      if (!e->IsControlEdge()) by_output[e->src_output].push_back(e);
    }
    for (const auto& edges : by_output) {
      for (size_t j = 0; j < edges.size(); ++j) {
        const Edge* e = edges[j];
        const int32_t dst = index[e->dst->id()];
        ex->out_edges_.push_back(OutEdge{dst, ex->items_[dst].input_start + e->dst_input,
                                         e->src_output, j + 1 == edges.size()});
      }
    }
    for (const Edge* e : node->out_edges()) {
      if (e->IsControlEdge()) ex->out_edges_.push_back(OutEdge{index[e->dst->id()], -1, -1, false});
    }
    item.out_end = static_cast<int32_t>(ex->out_edges_.size());
    ex->initial_pending_.push_back(item.initial_pending);
    if (item.initial_pending == 0) ex->roots_.push_back(i);
  }
  return ex;
}

std::unique_ptr<Executor::StepState> Executor::AcquireState() {
  {
    MutexLock l(&free_mu_);
    if (!free_states_.empty()) {
      std::unique_ptr<StepState> s = std::move(free_states_.back());
      free_states_.pop_back();
      return s;
    }
  }
  return std::make_unique<StepState>(this);
}

void Executor::ReleaseState(std::unique_ptr<StepState> s) {
  MutexLock l(&free_mu_);
  // Keep a few (as many as steps ever ran at once is plenty; bound it so a
  // burst of concurrent steps does not pin memory forever).
  if (free_states_.size() < 8) free_states_.push_back(std::move(s));
}

void Executor::RunAsync(const Args& args, DoneCallback done) {
  StepState* s = AcquireState().release();
  s->Start(args, std::move(done));
}

absl::Status Executor::Run(const Args& args) {
  Notification n;
  absl::Status status;
  RunAsync(args, [&](absl::Status s) {
    status = std::move(s);
    n.Notify();
  });
  n.WaitForNotification();
  return status;
}

}  // namespace strata
