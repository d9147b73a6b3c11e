#include "strategy/pipeline.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/gradients.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "train/initializers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {
namespace {

absl::Status Bad(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("pipeline: ", message));
}

// The options every model shares: the stages' devices, the micro-batches,
// the replicas, and `inputs`' batch.
absl::Status CheckOptions(const PipelineOptions& o, const OutputList& inputs) {
  const int stages = static_cast<int>(o.stage_devices.size());
  if (stages == 0) return Bad("no stage (stage_devices is empty)");
  for (int s = 0; s < stages; ++s) {
    if (o.stage_devices[s].empty()) return Bad(absl::StrCat("stage ", s, " has no device"));
  }
  if (o.micro_batches < 1) {
    return Bad(absl::StrCat("micro_batches must be >= 1, got ", o.micro_batches));
  }
  for (size_t r = 0; r < o.replica_stage_devices.size(); ++r) {
    const std::vector<std::string>& row = o.replica_stage_devices[r];
    if (static_cast<int>(row.size()) != stages) {
      return Bad(absl::StrCat("replica ", r + 1, " has ", row.size(),
                              " stage devices (replica_stage_devices[", r, "]) for ", stages,
                              " stages"));
    }
    for (int s = 0; s < stages; ++s) {
      if (row[s].empty())
        return Bad(absl::StrCat("replica ", r + 1, "'s stage ", s, " has no device"));
    }
  }
  if (inputs.empty()) return Bad("no inputs");
  const int64_t replicas = 1 + static_cast<int64_t>(o.replica_stage_devices.size());
  for (const Output& input : inputs) {
    if (!input.ok()) return Bad("an input is a null Output");
    const PartialTensorShape shape = input.shape();
    if (shape.unknown_rank() || shape.dims() < 1) {
      return Bad(absl::StrCat("the inputs need a batch dimension, got ", shape.DebugString(),
                              " for '", input.name(), "'"));
    }
    if (shape.dim_size(0) >= 0 && shape.dim_size(0) % (replicas * o.micro_batches) != 0) {
      return Bad(
          absl::StrCat("micro_batches = ", o.micro_batches,
                       replicas > 1 ? absl::StrCat(" on each of ", replicas, " replicas") : "",
                       " does not divide the batch of ", shape.dim_size(0)));
    }
  }
  return absl::OkStatus();
}

// A Sequential's stage_starts: from layer 0, increasing, each stage a layer or more.
absl::Status CheckStageStarts(const train::Sequential& model, const PipelineOptions& o) {
  const int stages = static_cast<int>(o.stage_devices.size());
  const int layers = static_cast<int>(model.layers().size());
  if (static_cast<int>(o.stage_starts.size()) != stages) {
    return Bad(absl::StrCat(o.stage_starts.size(), " stage_starts for ", stages, " stage_devices"));
  }
  for (int s = 0; s < stages; ++s) {
    const int end = s + 1 < stages ? o.stage_starts[s + 1] : layers;
    if ((s == 0 && o.stage_starts[0] != 0) || o.stage_starts[s] >= end || end > layers) {
      return Bad(absl::StrCat("stage_starts[", s, "] = ", o.stage_starts[s],
                              ": stages must start at layer 0 and each hold at least one of the "
                              "model's ",
                              layers, " layers, in order"));
    }
  }
  return absl::OkStatus();
}

// Work item (backward?, lane, stage) -> its nodes; a lane is replica r's
// micro-batch m at r * micro_batches + m (the micro-batch itself without
// replicas).
struct Item {
  bool backward;
  int micro_batch;
  int stage;
  bool operator<(const Item& o) const {
    return std::tie(backward, micro_batch, stage) < std::tie(o.backward, o.micro_batch, o.stage);
  }
};

// The forward item a gradient node belongs to: its name is
// "<...>gradients/<forward node's name>_grad/<...>".
const Item* ForwardOf(const std::string& name,
                      const absl::flat_hash_map<std::string, Item>& forward) {
  for (size_t p = name.find("_grad/"); p != std::string::npos; p = name.find("_grad/", p + 1)) {
    // Every suffix of name[0, p) that starts at a name component.
    for (size_t start = 0;;) {
      auto it = forward.find(std::string(name, start, p - start));
      if (it != forward.end()) return &it->second;
      const size_t slash = name.find('/', start);
      if (slash == std::string::npos || slash + 1 >= p) break;
      start = slash + 1;
    }
  }
  return nullptr;
}

// The nodes with ids >= first that `outputs` depend on (data or control):
// a stage's forward computation, without the weights' creation and
// initializers made alongside it.
std::vector<Node*> NewAncestors(const OutputList& outputs, int first) {
  std::vector<Node*> out, stack;
  absl::flat_hash_set<const Node*> seen;
  for (const Output& o : outputs) {
    if (o.node()->id() >= first && seen.insert(o.node()).second) stack.push_back(o.node());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const Edge* e : n->in_edges()) {
      if (e->src->id() >= first && seen.insert(e->src).second) stack.push_back(e->src);
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<bool, int>> StageSchedule(PipelineSchedule schedule, int stage,
                                                int num_stages, int micro_batches) {
  std::vector<std::pair<bool, int>> order;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int m = 0; m < micro_batches; ++m) order.push_back({false, m});
    for (int m = 0; m < micro_batches; ++m) order.push_back({true, m});
    return order;
  }
  // 1F1B: as many forwards as there are stages after this one (they fill
  // the pipeline), then one forward and one backward in turn, then the
  // remaining backwards.
  const int warmup = std::min(num_stages - 1 - stage, micro_batches);
  for (int m = 0; m < warmup; ++m) order.push_back({false, m});
  for (int m = 0; m < micro_batches; ++m) {
    if (warmup + m < micro_batches) order.push_back({false, warmup + m});
    order.push_back({true, m});
  }
  return order;
}

namespace {

// The step under construction: the forward and backward work items, then
// the schedule over them.
class PipelineBuilder {
 public:
  PipelineBuilder(const Scope& scope, const PipelineOptions& o)
      : scope_(scope),
        pipe_(scope.NewSubScope("pipeline")),
        o_(o),
        graph_(scope.graph()),
        num_stages_(static_cast<int>(o.stage_devices.size())),
        lanes_((1 + static_cast<int>(o.replica_stage_devices.size())) * o.micro_batches) {}

  // The micro-batches of every replica ("lanes": replica r's micro-batch m
  // is lane r * micro_batches + m; cut on the first stage's device, the
  // labels on the last's), each through its replica's stages in order; the
  // weights are made by lane 0, with the names they have without a
  // pipeline, and every other replica's reads of them run beside them. Sets
  // the losses and their mean.
  absl::Status Forward(const std::vector<PipelineStageFn>& stages, const OutputList& inputs,
                       Output labels, const PipelineLossFn& loss);
  // Each micro-batch's backward, from its own loss (weighted 1/M, so that it
  // depends on no other micro-batch), the gradients summed per weight in
  // micro-batch order, and the optimizer's update.
  absl::StatusOr<Node*> Backward(train::Optimizer* optimizer);
  // Each stage's items in the schedule's order, each waiting for the one
  // before it (a NoOp after every node of that item).
  absl::StatusOr<PipelineStep> Schedule(Node* train_op);

 private:
  Scope OnStage(int stage) const { return pipe_.WithDevice(o_.stage_devices[stage]); }
  // The stage whose function made node `id`; -1 for nodes made outside them.
  int StageOf(int id) const;
  // InvalidArgument if a node of `item` (`mine`, made from id `first` on)
  // reads a tensor of another stage that was not `passed` to it, the whole
  // batch, or another stage's weight, or makes a weight after micro-batch 0.
  absl::Status CheckCrossings(const Item& item, const std::vector<Node*>& mine, int first,
                              const OutputList& passed) const;
  const std::string& DeviceOf(int replica, int stage) const {
    return replica == 0 ? o_.stage_devices[stage] : o_.replica_stage_devices[replica - 1][stage];
  }
  // Records `read` (a ReadVariableOp of `item`, replica `replica`) as its
  // lane's read of the weight, what the backward differentiates; returns
  // it if it stays a member of its item. Replica 0 reads beside its
  // weights (returned). Another replica reads each weight once per step,
  // beside the weight, and each of its micro-batches takes that value
  // through an Identity on its own device (the lane's read), so the value
  // crosses once per step rather than once per micro-batch: its first read
  // moves beside the weight, a later one's consumers take the Identity
  // instead; neither is a member of the item (null), so that no schedule
  // signal crosses to it.
  absl::StatusOr<Node*> AddRead(Node* read, const Item& item, int replica);

  const Scope scope_;
  const Scope pipe_;
  const PipelineOptions& o_;
  Graph* const graph_;
  const int num_stages_;
  const int lanes_;  // replicas x micro-batches
  absl::flat_hash_map<std::string, Item> forward_item_;  // node name -> its forward item
  // Each weight's (handle's) reads: (lane, read) in lane order.
  absl::flat_hash_map<const Node*, std::vector<std::pair<int, Output>>> lane_reads_;
  // (weight handle, replica >= 1) -> that replica's one read of the step.
  absl::flat_hash_map<std::pair<const Node*, int>, Output> replica_read_;
  std::map<Item, std::vector<Node*>> nodes_;
  // (first node id, stage) of each stage function's call, in call order.
  std::vector<std::pair<int, int>> builds_;
  // The inputs and labels before the cut into micro-batches.
  absl::flat_hash_set<std::pair<const Node*, int>> whole_batch_;
  OutputList losses_;
  Output mean_;
};

absl::Status PipelineBuilder::Forward(const std::vector<PipelineStageFn>& stages,
                                      const OutputList& inputs, Output labels,
                                      const PipelineLossFn& loss) {
  const int m_count = lanes_;
  std::vector<OutputList> xs(m_count);  // each lane's inputs
  for (size_t i = 0; i < inputs.size(); ++i) {
    OutputList cut =
        m_count == 1 ? OutputList{inputs[i]}
                     : ops::Split(OnStage(0).WithOpName(i == 0 ? "micro_batches"
                                                               : absl::StrCat("micro_batches_", i)),
                                  ops::Const(pipe_, 0), inputs[i], m_count);
    STRATA_RETURN_IF_ERROR(scope_.status());
    for (int m = 0; m < m_count; ++m) xs[m].push_back(cut[m]);
  }
  OutputList ys = m_count == 1 ? OutputList{labels}
                               : ops::Split(OnStage(num_stages_ - 1).WithOpName("micro_labels"),
                                            ops::Const(pipe_, 0), labels, m_count);
  STRATA_RETURN_IF_ERROR(scope_.status());
  for (const Output& whole : inputs) whole_batch_.insert({whole.node(), whole.index()});
  whole_batch_.insert({labels.node(), labels.index()});
  for (int m = 0; m < m_count; ++m) {
    OutputList h = xs[m];
    const int replica = m / o_.micro_batches;
    const Scope lane = replica == 0
                           ? pipe_.NewSubScope(absl::StrCat("micro_batch_", m))
                           : pipe_.NewSubScope(absl::StrCat("replica_", replica))
                                 .NewSubScope(absl::StrCat("micro_batch_", m % o_.micro_batches));
    for (int s = 0; s < num_stages_; ++s) {
      const int first = graph_->num_node_ids();
      builds_.push_back({first, s});
      const Scope where =
          m == 0 ? scope_.WithDevice(DeviceOf(0, s)) : lane.WithDevice(DeviceOf(replica, s));
      absl::StatusOr<OutputList> out = stages[s](where, h);
      if (!out.ok()) return AnnotateStatus(out.status(), absl::StrCat("pipeline stage ", s, ": "));
      STRATA_RETURN_IF_ERROR(where.status());
      if (out->empty() || (s + 1 == num_stages_ && out->size() != 1)) {
        return Bad(absl::StrCat("stage ", s, " returned ", out->size(), " tensors; ",
                                s + 1 == num_stages_ ? "the last stage returns the model's output"
                                                     : "a stage passes on one tensor or more"));
      }
      for (const Output& o : *out) {
        if (!o.ok()) return Bad(absl::StrCat("stage ", s, " returned a null Output"));
      }
      OutputList ends = *out;
      if (s + 1 == num_stages_) {
        Output l = loss(where.NewSubScope("loss"), ys[m], (*out)[0]);
        STRATA_RETURN_IF_ERROR(where.status());
        if (!l.ok()) return Bad("the loss function returned a null Output");
        losses_.push_back(l);
        ends.push_back(l);
      }
      const Item item{false, m, s};
      const std::vector<Node*> mine = NewAncestors(ends, first);
      OutputList passed = h;
      if (s + 1 == num_stages_) passed.push_back(ys[m]);  // the loss's labels
      STRATA_RETURN_IF_ERROR(CheckCrossings(item, mine, first, passed));
      for (Node* n : mine) {
        if (n->type_string() == "VarHandleOp") continue;  // a weight, made by micro-batch 0
        if (n->type_string() == "ReadVariableOp") {
          STRATA_ASSIGN_OR_RETURN(n, AddRead(n, item, replica));
          if (n == nullptr) continue;  // another replica's: beside the weight, or bypassed
        }
        forward_item_[n->name()] = item;
        nodes_[item].push_back(n);
      }
      h = *std::move(out);
    }
  }
  const Scope last = OnStage(num_stages_ - 1);
  Output total = losses_.size() == 1 ? losses_[0] : ops::AddN(last.WithOpName("loss_sum"), losses_);
  mean_ =
      ops::RealDiv(last.WithOpName("loss"), total, train::ScalarConst(last, total.type(), m_count));
  return scope_.status();
}

absl::StatusOr<Node*> PipelineBuilder::AddRead(Node* read, const Item& item, int replica) {
  const Node* handle = nullptr;
  for (const Edge* e : read->in_edges()) {
    if (!e->IsControlEdge() && e->src->type_string() == "VarHandleOp") handle = e->src;
  }
  if (handle == nullptr) return read;  // not of a weight (a resource passed in)
  if (replica == 0) {
    lane_reads_[handle].push_back({item.micro_batch, Output(read, 0)});
    return read;
  }
  const Scope here = pipe_.WithDevice(DeviceOf(replica, item.stage));
  auto [once, fresh] = replica_read_.try_emplace({handle, replica});
  if (fresh) {
    // The replica's read of the step, beside the weight, and where its
    // value arrives on the replica's device (a member of this lane's item).
    read->set_requested_device(handle->requested_device());
    once->second =
        ops::Identity(here.WithOpName(absl::StrCat(read->name(), "/on_replica")), Output(read, 0));
    STRATA_RETURN_IF_ERROR(scope_.status());
    nodes_[item].push_back(once->second.node());
  }
  // The lane's own value (what its backward differentiates, apart from the
  // other lanes'); `read`'s consumers take it.
  Output local =
      ops::Identity(here.WithOpName(absl::StrCat(read->name(), "/lane_value")), once->second);
  STRATA_RETURN_IF_ERROR(scope_.status());
  std::vector<const Edge*> out(read->out_edges().begin(), read->out_edges().end());
  for (const Edge* e : out) {
    if (e->dst == once->second.node()) continue;
    Node* dst = e->dst;
    const int input = e->dst_input;
    const bool control = e->IsControlEdge();
    graph_->RemoveEdge(e);
    if (control) {
      graph_->AddControlEdge(local.node(), dst);
    } else {
      STRATA_RETURN_IF_ERROR(graph_->AddEdge(local.node(), 0, dst, input).status());
    }
  }
  if (!fresh) {
    // Its control inputs (the lane's dependencies) go to the Identity; the
    // read itself is left without consumers, beside the weight (a layer's
    // reads() may still name it), and no step runs it.
    for (const Edge* e : read->in_edges()) {
      if (e->IsControlEdge()) graph_->AddControlEdge(e->src, local.node());
    }
    read->set_requested_device(handle->requested_device());
  }
  forward_item_[local.node()->name()] = item;
  nodes_[item].push_back(local.node());
  lane_reads_[handle].push_back({item.micro_batch, local});
  return nullptr;
}

int PipelineBuilder::StageOf(int id) const {
  auto after = std::upper_bound(builds_.begin(), builds_.end(), std::make_pair(id, num_stages_));
  return after == builds_.begin() ? -1 : std::prev(after)->second;
}

absl::Status PipelineBuilder::CheckCrossings(const Item& item, const std::vector<Node*>& mine,
                                             int first, const OutputList& passed) const {
  const int s = item.stage;
  absl::flat_hash_set<std::pair<const Node*, int>> declared;
  for (const Output& o : passed) declared.insert({o.node(), o.index()});
  for (const Node* n : mine) {
    if (n->type_string() == "VarHandleOp" && item.micro_batch > 0) {
      return Bad(absl::StrCat("stage ", s, " made weight '", n->name(), "' again for micro-batch ",
                              item.micro_batch,
                              ": a stage function makes its weights on its first call and reuses "
                              "them (hold the layers outside it)"));
    }
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() || e->src->id() >= first) continue;
      const std::pair<const Node*, int> tensor{e->src, e->src_output};
      if (declared.contains(tensor)) continue;
      const std::string name = absl::StrCat(e->src->name(), ":", e->src_output);
      if (whole_batch_.contains(tensor)) {
        return Bad(absl::StrCat("stage ", s, " reads '", name,
                                "', the whole batch: a stage gets its micro-batch from the stage "
                                "before it (stage 0 from the inputs)"));
      }
      const int t = StageOf(e->src->id());
      if (t < 0 || t == s) continue;  // made outside the model, or by this stage
      if (e->src->type_string() == "VarHandleOp") {
        return Bad(absl::StrCat("stage ", s, " reads weight '", e->src->name(), "' of stage ", t,
                                ": a weight belongs to the stage that made it"));
      }
      return Bad(absl::StrCat("stage ", s, " reads '", name, "', made by stage ", t,
                              ", which was not passed to it: only the tensors a stage returns "
                              "cross to the next (return it from stage ",
                              s - 1, "'s function)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Node*> PipelineBuilder::Backward(train::Optimizer* optimizer) {
  // Every read of every trainable weight, in micro-batch order.
  struct Target {
    train::Variable* variable;
    OutputList reads;
  };
  std::vector<Target> targets;
  OutputList reads;
  for (train::Variable* v : train::TrainableVariables(scope_)) {
    auto it = lane_reads_.find(v->handle().node());
    if (it == lane_reads_.end()) continue;
    std::vector<std::pair<int, Output>>& lanes = it->second;
    std::stable_sort(lanes.begin(), lanes.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    Target t{v, {}};
    for (const auto& lane : lanes) t.reads.push_back(lane.second);
    reads.insert(reads.end(), t.reads.begin(), t.reads.end());
    targets.push_back(std::move(t));
  }
  if (targets.empty()) {
    return absl::InvalidArgumentError("pipeline: the model has no trainable weight the loss reads");
  }
  const int first_grad = graph_->num_node_ids();
  OutputList weights;
  for (int m = 0; m < lanes_; ++m) {  // on the lane's last stage
    weights.push_back(
        train::ScalarConst(pipe_.WithDevice(DeviceOf(m / o_.micro_batches, num_stages_ - 1))
                               .WithOpName(absl::StrCat("loss_weight_", m)),
                           mean_.type(), 1.0 / lanes_));
  }
  OutputList grads;
  STRATA_RETURN_IF_ERROR(AddSymbolicGradients(pipe_, losses_, reads, weights, &grads));
  // Only what the weights' gradients need: a gradient function's other
  // outputs (the first layer's gradient with respect to the batch) would
  // otherwise run, as members of their item, for nothing.
  for (Node* n : NewAncestors(grads, first_grad)) {
    if (const Item* f = ForwardOf(n->name(), forward_item_); f != nullptr) {
      nodes_[{true, f->micro_batch, f->stage}].push_back(n);
    }
  }
  std::vector<train::GradAndVar> pairs;
  size_t next = 0;
  for (const Target& t : targets) {
    OutputList mine(grads.begin() + next, grads.begin() + next + t.reads.size());
    next += t.reads.size();
    // Accumulated in micro-batch order on each replica's stage, each
    // addition part of its micro-batch's backward item, so that the next
    // backward on the stage waits for it: a stage never holds two unsummed
    // gradients of a weight, however late its additions would run. Then
    // each other replica's sum crosses once to the weight and is added
    // there (in no item: nothing on a stage waits for it).
    Output total, sum;
    int replica = -1;
    for (size_t k = 0; k <= mine.size(); ++k) {
      const Item* f = k < mine.size() ? &forward_item_.at(t.reads[k].node()->name()) : nullptr;
      const int r = f == nullptr ? -1 : f->micro_batch / o_.micro_batches;
      if (r != replica && sum.ok()) {  // replica `replica`'s sum is complete
        if (!total.ok()) {
          total = sum;
        } else {
          total = ops::Add(pipe_.WithDevice(t.reads[0].node()->requested_device())
                               .WithOpName(absl::StrCat("gradient_sum/", t.variable->name(),
                                                        "/replica_", replica)),
                           total, sum);
        }
        sum = Output();
      }
      if (f == nullptr) break;
      replica = r;
      if (!sum.ok()) {
        sum = mine[k];
        continue;
      }
      sum = ops::Add(pipe_.WithDevice(DeviceOf(r, f->stage))
                         .WithOpName(absl::StrCat("gradient_sum/", t.variable->name(), "/", k)),
                     sum, mine[k]);
      nodes_[{true, f->micro_batch, f->stage}].push_back(sum.node());
    }
    pairs.push_back({total, t.variable});
  }
  Node* train_op = optimizer->ApplyGradients(scope_, pairs);
  STRATA_RETURN_IF_ERROR(scope_.status());
  if (train_op == nullptr) return absl::InternalError("pipeline: the optimizer made no train op");
  return train_op;
}

absl::StatusOr<PipelineStep> PipelineBuilder::Schedule(Node* train_op) {
  PipelineStep step;
  step.train_op = train_op;
  step.loss = mean_;
  const int m_count = o_.micro_batches;
  for (const auto& [item, members] : nodes_) {
    const std::string label = absl::StrCat(item.backward ? "B" : "F", item.micro_batch % m_count);
    for (const Node* n : members) step.item_of_node[n->name()] = label;
  }
  for (int r = 0; r < lanes_ / m_count; ++r) {
    const Scope replica = r == 0 ? pipe_ : pipe_.NewSubScope(absl::StrCat("replica_", r));
    for (int s = 0; s < num_stages_; ++s) {
      std::vector<std::string> names;
      Node* previous_done = nullptr;
      for (const auto& [backward, m] : StageSchedule(o_.schedule, s, num_stages_, m_count)) {
        names.push_back(absl::StrCat(backward ? "B" : "F", m));
        const std::vector<Node*>& mine = nodes_[{backward, r * m_count + m, s}];
        if (mine.empty()) continue;
        if (previous_done != nullptr) {
          for (Node* n : mine) graph_->AddControlEdge(previous_done, n);
        }
        previous_done =
            ops::NoOp(replica.WithDevice(DeviceOf(r, s))
                          .WithOpName(absl::StrCat("stage_", s, "_", names.back(), "_done"))
                          .WithControlDependencies(mine));
        STRATA_RETURN_IF_ERROR(scope_.status());
      }
      step.schedule.push_back(std::move(names));
      step.stage_devices.push_back(DeviceOf(r, s));
    }
  }
  return step;
}

}  // namespace

absl::StatusOr<PipelineStep> BuildPipelineTrainStep(const Scope& scope,
                                                    const std::vector<PipelineStageFn>& stages,
                                                    const OutputList& inputs, Output labels,
                                                    const PipelineLossFn& loss,
                                                    train::Optimizer* optimizer,
                                                    const PipelineOptions& options) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (optimizer == nullptr || !loss || !labels.ok()) {
    return Bad("labels, a loss and an optimizer are needed");
  }
  STRATA_RETURN_IF_ERROR(CheckOptions(options, inputs));
  if (!options.stage_starts.empty()) {
    return Bad("stage_starts splits a Sequential's layers; with stage functions leave it empty");
  }
  if (stages.size() != options.stage_devices.size()) {
    return Bad(absl::StrCat(stages.size(), " stage functions for ", options.stage_devices.size(),
                            " stage_devices"));
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!stages[s]) return Bad(absl::StrCat("stage ", s, "'s function is empty"));
  }
  PipelineBuilder b(scope, options);
  STRATA_RETURN_IF_ERROR(b.Forward(stages, inputs, labels, loss));
  STRATA_ASSIGN_OR_RETURN(Node * train_op, b.Backward(optimizer));
  return b.Schedule(train_op);
}

absl::StatusOr<PipelineStep> BuildPipelineTrainStep(const Scope& scope, train::Sequential* model,
                                                    Output inputs, Output labels,
                                                    const PipelineLossFn& loss,
                                                    train::Optimizer* optimizer,
                                                    const PipelineOptions& options) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (model == nullptr || optimizer == nullptr || !loss || !inputs.ok() || !labels.ok()) {
    return Bad("a model, inputs, labels, a loss and an optimizer are needed");
  }
  STRATA_RETURN_IF_ERROR(CheckOptions(options, {inputs}));
  STRATA_RETURN_IF_ERROR(CheckStageStarts(*model, options));
  // Stage s applies layers [stage_starts[s], stage_starts[s + 1]) to the one tensor it gets.
  std::vector<PipelineStageFn> stages;
  const int num_stages = static_cast<int>(options.stage_starts.size());
  for (int s = 0; s < num_stages; ++s) {
    const int begin = options.stage_starts[s];
    const int end =
        s + 1 < num_stages ? options.stage_starts[s + 1] : static_cast<int>(model->layers().size());
    stages.push_back([model, begin, end](const Scope& where,
                                         const OutputList& in) -> absl::StatusOr<OutputList> {
      STRATA_ASSIGN_OR_RETURN(Output out, model->BuildLayers(where, in[0], begin, end));
      return OutputList{out};
    });
  }
  PipelineBuilder b(scope, options);
  STRATA_RETURN_IF_ERROR(b.Forward(stages, {inputs}, labels, loss));
  STRATA_ASSIGN_OR_RETURN(Node * train_op, b.Backward(optimizer));
  return b.Schedule(train_op);
}

void RecordPipelineItems(const PipelineStep& step, StepTracer* tracer, size_t first_event) {
  if (tracer == nullptr) return;
  const std::vector<TraceEvent> events = tracer->events();
  // (device, item) -> [first start, last end] of its kernels.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> spans;
  for (size_t i = first_event; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    auto it = step.item_of_node.find(e.name);
    if (e.op.empty() || e.async || it == step.item_of_node.end()) continue;
    auto [span, fresh] = spans.try_emplace({e.device, it->second}, e.start_ns, e.end_ns);
    if (!fresh) {
      span->second.first = std::min(span->second.first, e.start_ns);
      span->second.second = std::max(span->second.second, e.end_ns);
    }
  }
  for (const auto& [key, span] : spans) {
    tracer->Record(key.second, "PipelineItem", key.first, span.first, span.second, /*async=*/false);
  }
}

}  // namespace distribute
}  // namespace strata
