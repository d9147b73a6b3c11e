#include "runtime/recorded_partition.h"

#include <atomic>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/graph_def_import.h"
#include "kernels/call_frame.h"
#include "kernels/cancellation.h"
#include "kernels/rendezvous.h"
#include "kernels/resource_mgr.h"

namespace strata {

namespace {

// The rendezvous key of a _Send or _Recv node, from the attrs both carry.
absl::StatusOr<std::string> KeyOf(const ::tensorflow::NodeDef& def) {
  std::string tensor_name, send_device, recv_device;
  int64_t incarnation = 0;
  STRATA_RETURN_IF_ERROR(GetAttr(def.attr(), "tensor_name", &tensor_name));
  STRATA_RETURN_IF_ERROR(GetAttr(def.attr(), "send_device", &send_device));
  STRATA_RETURN_IF_ERROR(GetAttr(def.attr(), "send_device_incarnation", &incarnation));
  STRATA_RETURN_IF_ERROR(GetAttr(def.attr(), "recv_device", &recv_device));
  return Rendezvous::CreateKey(send_device, static_cast<uint64_t>(incarnation), recv_device,
                               tensor_name);
}

// Every node reachable from `from` along out-edges (data and control).
absl::flat_hash_set<const Node*> Reachable(const Node* from) {
  absl::flat_hash_set<const Node*> seen{from};
  std::vector<const Node*> stack{from};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->out_edges()) {
      if (seen.insert(e->dst).second) stack.push_back(e->dst);
    }
  }
  return seen;
}

// Whether a value the partition `p` sends comes back to it within the step
// through the other partitions (so it could not receive all its inputs
// before running).
absl::StatusOr<bool> ValuesComeBack(const std::vector<const Graph*>& partitions, const Graph* p) {
  // For the other partitions: a received key -> the keys sent after it.
  absl::flat_hash_map<std::string, std::vector<std::string>> onward;
  absl::flat_hash_set<std::string> p_receives;
  std::vector<std::string> frontier;
  for (const Graph* g : partitions) {
    for (const Node* n : g->nodes()) {
      if (g == p) {
        if (n->IsOp("_Recv")) {
          STRATA_ASSIGN_OR_RETURN(std::string k, KeyOf(n->def()));
          p_receives.insert(std::move(k));
        } else if (n->IsOp("_Send")) {
          STRATA_ASSIGN_OR_RETURN(std::string k, KeyOf(n->def()));
          frontier.push_back(std::move(k));
        }
        continue;
      }
      if (!n->IsOp("_Recv")) continue;
      STRATA_ASSIGN_OR_RETURN(std::string k, KeyOf(n->def()));
      std::vector<std::string>& out = onward[k];
      for (const Node* m : Reachable(n)) {
        if (m->IsOp("_Send")) {
          STRATA_ASSIGN_OR_RETURN(std::string sk, KeyOf(m->def()));
          out.push_back(std::move(sk));
        }
      }
    }
  }
  absl::flat_hash_set<std::string> seen(frontier.begin(), frontier.end());
  while (!frontier.empty()) {
    std::string k = std::move(frontier.back());
    frontier.pop_back();
    if (p_receives.contains(k)) return true;
    auto it = onward.find(k);
    if (it == onward.end()) continue;
    for (const std::string& next : it->second) {
      if (seen.insert(next).second) frontier.push_back(next);
    }
  }
  return false;
}

// The partition with _DeviceArg/_DeviceRetval in place of _Recv/_Send; their
// keys and dtypes in index order go to `inputs`/`outputs` (as key, dtype).
absl::StatusOr<std::unique_ptr<Graph>> Rewrite(const Graph& partition,
                                               std::vector<std::pair<std::string, DataType>>* inputs,
                                               std::vector<std::pair<std::string, DataType>>* outputs) {
  ::tensorflow::GraphDef def;
  partition.ToGraphDef(&def);
  for (::tensorflow::NodeDef& n : *def.mutable_node()) {
    const bool recv = n.op() == "_Recv";
    if (!recv && n.op() != "_Send") continue;
    STRATA_ASSIGN_OR_RETURN(std::string key, KeyOf(n));
    DataType dtype;
    STRATA_RETURN_IF_ERROR(GetAttr(n.attr(), recv ? "tensor_type" : "T", &dtype));
    auto* list = recv ? inputs : outputs;
    const int index = static_cast<int>(list->size());
    list->emplace_back(std::move(key), dtype);
    n.set_op(recv ? "_DeviceArg" : "_DeviceRetval");
    n.clear_attr();
    (*n.mutable_attr())["T"] = MakeAttr(dtype);
    (*n.mutable_attr())["index"] = MakeAttr(index);
  }
  return ImportGraphDef(def);
}

// Ops whose output shares their first input's buffer: a reader of a
// variable's value through them still holds the variable's buffer.
bool ForwardsBuffer(const Node& n) {
  return n.IsOp("Identity") || n.IsOp("StopGradient") || n.IsOp("Reshape") ||
         n.IsOp("ExpandDims") || n.IsOp("Squeeze");
}

// Adds control edges so that each variable update runs after every node that
// reads the variable's value from before it (where the update does not
// itself come first), as a program reading then writing would: updates then
// find the buffer unshared and write it in place.
void OrderReadsBeforeUpdates(Graph* g) {
  // Variable handle node -> its ReadVariableOps and its updaters.
  absl::flat_hash_map<const Node*, std::vector<Node*>> readers, updaters;
  for (Node* n : g->nodes()) {
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() || n->input_type(e->dst_input) != DT_RESOURCE) continue;
      if (!e->src->IsOp("VarHandleOp")) continue;
      if (n->IsOp("ReadVariableOp")) {
        readers[e->src].push_back(n);
      } else if (!n->IsOp("VarIsInitializedOp") && !n->IsOp("DestroyResourceOp")) {
        updaters[e->src].push_back(n);
      }
    }
  }
  for (auto& [handle, ups] : updaters) {
    auto it = readers.find(handle);
    if (it == readers.end()) continue;
    // Everything holding the value read: the reads' consumers, through
    // buffer-forwarding ops.
    std::vector<Node*> holders;
    std::vector<Node*> stack(it->second.begin(), it->second.end());
    absl::flat_hash_set<Node*> seen(stack.begin(), stack.end());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      holders.push_back(n);
      const bool passes_on = n->IsOp("ReadVariableOp") || ForwardsBuffer(*n);
      if (!passes_on) continue;
      for (const Edge* e : n->out_edges()) {
        if (!e->IsControlEdge() && seen.insert(e->dst).second) stack.push_back(e->dst);
      }
    }
    for (Node* u : ups) {
      const absl::flat_hash_set<const Node*> after_u = Reachable(u);
      for (Node* h : holders) {
        if (h != u && !after_u.contains(h)) g->AddControlEdge(h, u);
      }
    }
  }
}

// Ops whose outputs depend on their inputs' shapes only.
bool OfShapeOnly(const Node& n) {
  return n.IsOp("Shape") || n.IsOp("ShapeN") || n.IsOp("Size") || n.IsOp("Rank");
}

// Why the kernels of `g` cannot be recorded, or "".
std::string KernelBlocker(const Graph& g, const Executor& ex, const std::string& device_type) {
  absl::flat_hash_map<std::string, const OpKernel*> kernel;
  for (const OpKernel* k : ex.kernels()) kernel[k->name()] = k;
  // Nodes whose outputs change from step to step: the inputs and what they
  // feed. (Variables a recorded kernel reads live in device memory: the
  // kernels of host-memory variables are not capture-safe.)
  absl::flat_hash_set<const Node*> changing;
  std::vector<const Node*> stack;
  for (const Node* n : g.nodes()) {
    if (n->IsOp("_DeviceArg")) {
      changing.insert(n);
      stack.push_back(n);
    }
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->out_edges()) {
      // A recording is made for one set of input shapes, so what depends on
      // shapes alone does not change.
      if (e->IsControlEdge() || OfShapeOnly(*e->dst)) continue;
      if (changing.insert(e->dst).second) stack.push_back(e->dst);
    }
  }
  for (const Node* n : g.nodes()) {
    auto it = kernel.find(n->name());
    if (it == kernel.end()) continue;  // source/sink
    const OpKernel& k = *it->second;
    if (!k.IsCaptureSafe()) {
      return absl::StrCat("node '", n->name(), "' (op ", n->type_string(), ") cannot be recorded");
    }
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) continue;
      const DataType dt = n->input_type(e->dst_input);
      if (LivesInHostMemory(device_type, dt) && changing.contains(e->src) &&
          !k.ReadsHostInputOnDevice(e->dst_input)) {
        return absl::StrCat("node '", n->name(), "' (op ", n->type_string(), ") reads input ",
                            e->dst_input, " (", DataTypeString(dt),
                            ", in host memory) on the host, and it changes from step to step");
      }
    }
  }
  return "";
}

std::string Signature(const std::vector<Tensor>& values) {
  std::string s;
  for (const Tensor& t : values) absl::StrAppend(&s, DataTypeString(t.dtype()), t.shape().DebugString(), ";");
  return s;
}

}  // namespace

// One recorded signature.
struct RecordedPartition::Recording {
  int seen = 0;
  std::string failed;  // why this signature is not recorded
  // Destroyed in reverse order: buffers, then the executor (its kernels hold
  // recording memory), then the recording.
  std::unique_ptr<StepRecording> rec;
  std::unique_ptr<Executor> executor;
  std::vector<Tensor> in_bufs, out_bufs;
  std::vector<VarBuffer> vars;

  void Drop() {
    in_bufs.clear();
    out_bufs.clear();
    vars.clear();
    executor.reset();
    rec.reset();
  }
};

// One step in flight.
struct RecordedPartition::Step {
  Executor::Args args;
  Executor::DoneCallback done;
  std::vector<Tensor> values;   // the inputs received
  std::vector<Tensor> results;  // the outputs to send
  std::atomic<int> pending{0};
  Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  std::unique_ptr<VectorCallFrame> frame;
};

absl::StatusOr<std::unique_ptr<RecordedPartition>> RecordedPartition::Create(
    const Graph& partition, Device* device, const std::vector<const Graph*>& partitions,
    std::string* why_not) {
  const std::string where = absl::StrCat("the partition on ", device->name(), ": ");
  for (const Graph* g : partitions) {
    for (const Node* n : g->nodes()) {
      if (n->IsOp("Switch")) {
        *why_not = absl::StrCat(where, "the step has a conditional (Switch '", n->name(),
                                "'): which kernels run changes from step to step");
        return std::unique_ptr<RecordedPartition>();
      }
    }
  }
  STRATA_ASSIGN_OR_RETURN(const bool comes_back, ValuesComeBack(partitions, &partition));
  if (comes_back) {
    *why_not = absl::StrCat(where, "values it sends come back to it within the step");
    return std::unique_ptr<RecordedPartition>();
  }
  std::vector<std::pair<std::string, DataType>> ins, outs;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Rewrite(partition, &ins, &outs));
  OrderReadsBeforeUpdates(g.get());
  std::unique_ptr<RecordedPartition> rp(new RecordedPartition(device, std::move(g)));
  STRATA_ASSIGN_OR_RETURN(rp->eager_, Executor::Create(*rp->graph_, device));
  std::string blocker = KernelBlocker(*rp->graph_, *rp->eager_, device->device_type());
  if (!blocker.empty()) {
    *why_not = where + blocker;
    return std::unique_ptr<RecordedPartition>();
  }
  for (auto& [key, dt] : ins) rp->inputs_.push_back(Boundary{std::move(key), dt});
  for (auto& [key, dt] : outs) rp->outputs_.push_back(Boundary{std::move(key), dt});
  for (const Node* n : rp->graph_->nodes()) {
    if (!n->IsOp("VarHandleOp")) continue;
    std::string container, shared_name;
    STRATA_RETURN_IF_ERROR(GetAttr(n->def().attr(), "container", &container));
    STRATA_RETURN_IF_ERROR(GetAttr(n->def().attr(), "shared_name", &shared_name));
    rp->vars_.emplace_back(container, shared_name.empty() ? n->name() : shared_name);
  }
  return rp;
}

RecordedPartition::RecordedPartition(Device* device, std::unique_ptr<Graph> graph)
    : device_(device), graph_(std::move(graph)) {}

RecordedPartition::~RecordedPartition() {
  MutexLock l(&mu_);
  for (auto& [sig, r] : recordings_) r->Drop();
}

RecordingStats RecordedPartition::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

void RecordedPartition::SetNotRecorded(const std::string& why) {
  MutexLock l(&mu_);
  stats_.not_recorded = why;
}

std::vector<RecordedPartition::VarBuffer> RecordedPartition::VarBuffers() const {
  std::vector<VarBuffer> out;
  ResourceMgr* rm = device_->resource_manager();
  if (rm == nullptr || vars_.empty()) return out;
  absl::flat_hash_set<std::pair<std::string, std::string>> wanted(vars_.begin(), vars_.end());
  for (const ResourceMgr::Entry& e : rm->List()) {
    if (!wanted.contains(std::make_pair(e.container, e.name))) continue;
    auto* var = dynamic_cast<Var*>(e.resource.get());
    if (var == nullptr) continue;
    ReaderMutexLock l(var->mu());
    out.push_back(VarBuffer{e.name, e.id, e.resource,
                            var->is_initialized() ? var->value().raw_data() : nullptr});
  }
  return out;
}

bool RecordedPartition::Unchanged(const std::vector<VarBuffer>& vars) const {
  ResourceMgr* rm = device_->resource_manager();
  for (const VarBuffer& v : vars) {
    absl::StatusOr<std::shared_ptr<ResourceBase>> now = rm->LookupBase(v.id);
    if (!now.ok() || *now != v.resource) return false;
    auto* var = static_cast<Var*>(now->get());
    ReaderMutexLock l(var->mu());
    if ((var->is_initialized() ? var->value().raw_data() : nullptr) != v.data) return false;
  }
  return true;
}

void RecordedPartition::RunAsync(const Executor::Args& args, Executor::DoneCallback done) {
  auto step = std::make_shared<Step>();
  step->args = args;
  step->done = std::move(done);
  step->values.resize(inputs_.size());
  if (inputs_.empty()) {
    Continue(std::move(step));
    return;
  }
  if (args.rendezvous == nullptr) {
    step->done(absl::FailedPreconditionError(
        absl::StrCat("the recorded partition on ", device_->name(), " has inputs but no rendezvous")));
    return;
  }
  step->pending.store(static_cast<int>(inputs_.size()), std::memory_order_relaxed);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    args.rendezvous->RecvAsync(inputs_[i].key, [this, step, i](const absl::Status& s, const Tensor& t) {
      absl::Status st = s;
      if (st.ok() && t.dtype() != inputs_[i].dtype) {
        st = absl::InvalidArgumentError(absl::StrCat("received ", DataTypeString(t.dtype()), ", expected ",
                                                     DataTypeString(inputs_[i].dtype)));
      }
      if (st.ok()) {
        step->values[i] = t;
      } else {
        MutexLock l(&step->mu);
        if (step->status.ok()) step->status = st;
      }
      if (step->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Continue(step);
    });
  }
}

void RecordedPartition::Continue(std::shared_ptr<Step> step) {
  {
    MutexLock l(&step->mu);
    if (!step->status.ok()) {
      absl::Status s = step->status;
      if (step->args.cancellation != nullptr) step->args.cancellation->StartCancel(s);
      step->done(s);
      return;
    }
  }
  Recording* r = nullptr;
  {
    MutexLock l(&mu_);
    if (busy_) {
      ++stats_.eager;
    } else {
      const std::string sig = Signature(step->values);
      auto it = recordings_.find(sig);
      if (it == recordings_.end() && recordings_.size() < kMaxRecordings) {
        it = recordings_.emplace(sig, std::make_unique<Recording>()).first;
      }
      if (it == recordings_.end()) {
        stats_.not_recorded = absl::StrCat("the partition on ", device_->name(), " was recorded for ",
                                           kMaxRecordings, " signatures already; ", sig, " runs eagerly");
        ++stats_.eager;
      } else if (it->second->failed.empty() && (it->second->rec != nullptr || ++it->second->seen >= 2)) {
        r = it->second.get();
        busy_ = true;
      } else {
        ++stats_.eager;
      }
    }
  }
  if (r == nullptr) {
    RunEager(std::move(step), /*release=*/false);
    return;
  }
  // A recording whose variables changed buffers is made again.
  if (r->rec != nullptr) {
    if (!Unchanged(r->vars)) r->Drop();
  }
  if (r->rec == nullptr && !Record(r, *step)) {
    SetNotRecorded(r->failed);
    {
      MutexLock l(&mu_);
      ++stats_.eager;
    }
    RunEager(std::move(step), /*release=*/true);
    return;
  }
  absl::Status s = Replay(r, step.get());
  {
    MutexLock l(&mu_);
    ++stats_.replayed;
  }
  Finish(std::move(step), s, /*release=*/true);
}

void RecordedPartition::RunEager(std::shared_ptr<Step> step, bool release) {
  step->frame = std::make_unique<VectorCallFrame>(step->values, static_cast<int>(outputs_.size()));
  Executor::Args a = step->args;
  a.call_frame = step->frame.get();
  eager_->RunAsync(a, [this, step = std::move(step), release](absl::Status s) mutable {
    if (s.ok()) step->results = std::move(step->frame->retvals());
    Finish(std::move(step), s, release);
  });
}

bool RecordedPartition::Record(Recording* r, const Step& step) {
  auto fail = [r](const std::string& why) {
    r->failed = why;
    r->Drop();
    return false;
  };
  const std::string where = absl::StrCat("recording the partition on ", device_->name(), ": ");
  auto rec = device_->NewStepRecording();
  if (!rec.ok()) return fail(where + std::string(rec.status().message()));
  r->rec = *std::move(rec);
  DeviceBase* rd = r->rec->device();
  auto ex = Executor::Create(*graph_, rd);
  if (!ex.ok()) return fail(where + std::string(ex.status().message()));
  r->executor = *std::move(ex);
  for (const Tensor& v : step.values) {
    Allocator* a = LivesInHostMemory(rd->device_type(), v.dtype()) ? rd->host_allocator() : rd->allocator();
    auto buf = Tensor::Allocate(a, v.dtype(), v.shape());
    if (!buf.ok()) return fail(where + std::string(buf.status().message()));
    absl::Status s = r->rec->CopyIn(v, &*buf);
    if (!s.ok()) return fail(where + std::string(s.message()));
    r->in_bufs.push_back(*std::move(buf));
  }
  const std::vector<VarBuffer> before = VarBuffers();
  VectorCallFrame frame(r->in_bufs, static_cast<int>(outputs_.size()));
  Executor::Args a;
  a.step_id = step.args.step_id;
  a.call_frame = &frame;
  a.cancellation = step.args.cancellation;
  // Everything on this thread, in one order.
  a.inter_op_pool = nullptr;
  absl::Status s = r->rec->Begin();
  if (!s.ok()) return fail(where + std::string(s.message()));
  s = r->executor->Run(a);
  absl::Status end = r->rec->End();
  if (!s.ok()) return fail(where + std::string(s.message()));
  if (!end.ok()) return fail(where + std::string(end.message()));
  const std::vector<VarBuffer> after = VarBuffers();
  for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
    if (after[i].data != before[i].data) {
      return fail(absl::StrCat(where, "variable '", after[i].name, "' got a new buffer while recorded"));
    }
  }
  r->out_bufs = std::move(frame.retvals());
  for (size_t i = 0; i < r->out_bufs.size(); ++i) {
    if (!r->out_bufs[i].IsInitialized()) return fail(absl::StrCat(where, "output ", i, " was not set"));
  }
  r->vars = after;
  MutexLock l(&mu_);
  ++stats_.recorded;
  return true;
}

absl::Status RecordedPartition::Replay(Recording* r, Step* step) {
  for (size_t i = 0; i < step->values.size(); ++i) {
    STRATA_RETURN_IF_ERROR(r->rec->CopyIn(step->values[i], &r->in_bufs[i]));
  }
  step->values.clear();
  STRATA_RETURN_IF_ERROR(r->rec->Replay());
  step->results.clear();
  for (const Tensor& b : r->out_bufs) {
    STRATA_ASSIGN_OR_RETURN(Tensor out, r->rec->CopyOut(b));
    step->results.push_back(std::move(out));
  }
  return absl::OkStatus();
}

void RecordedPartition::Finish(std::shared_ptr<Step> step, absl::Status s, bool release) {
  if (release) {
    MutexLock l(&mu_);
    busy_ = false;
  }
  if (s.ok()) {
    for (size_t i = 0; i < outputs_.size() && s.ok(); ++i) {
      s = step->args.rendezvous == nullptr
              ? absl::FailedPreconditionError("a recorded partition's output has no rendezvous")
              : step->args.rendezvous->Send(outputs_[i].key, step->results[i]);
    }
  }
  if (!s.ok()) {
    s = absl::Status(s.code(), absl::StrCat("the recorded partition on ", device_->name(), ": ", s.message()));
    // As the executor does: the first failure ends the step everywhere.
    if (step->args.cancellation != nullptr) step->args.cancellation->StartCancel(s);
  }
  step->done(s);
}

}  // namespace strata
