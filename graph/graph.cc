#include "graph/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/shape_inference.h"

namespace strata {

const Edge* Node::input_edge(int i) const {
  for (const Edge* e : in_edges_) {
    if (e->dst_input == i) return e;
  }
  return nullptr;
}

std::string Node::DebugString() const { return absl::StrCat("'", name(), "' (op ", type_string(), ")"); }

Graph::Graph(const OpRegistry* ops) : ops_(ops) { versions_.set_producer(0); }

absl::StatusOr<Node*> Graph::AddNode(::tensorflow::NodeDef def) {
  if (def.name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("a node of op ", def.op(), " has no name"));
  }
  if (by_name_.contains(def.name())) {
    return absl::AlreadyExistsError(absl::StrCat("duplicate node name '", def.name(), "'"));
  }
  auto op = ops_->LookUp(def.op());
  if (!op.ok()) return AnnotateStatus(op.status(), absl::StrCat("node '", def.name(), "': "));
  def.clear_input();
  STRATA_RETURN_IF_ERROR(ValidateAndCompleteAttrs(**op, &def));
  std::unique_ptr<Node> n(new Node);
  STRATA_RETURN_IF_ERROR(InOutTypesForNode(def, **op, &n->input_types_, &n->output_types_));
  n->id_ = static_cast<int>(nodes_.size());
  n->op_ = *op;
  n->def_ = std::move(def);
  n->output_shapes_.assign(n->output_types_.size(), PartialTensorShape::UnknownRank());
  Node* raw = n.get();
  by_name_[raw->name()] = raw;
  nodes_.push_back(std::move(n));
  ++num_nodes_;
  return raw;
}

absl::StatusOr<const Edge*> Graph::AddEdge(Node* src, int src_output, Node* dst, int dst_input) {
  if (src_output < 0 || src_output >= src->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", dst->name(), "' input ", dst_input,
                                                   " refers to output ", src_output, " of ",
                                                   src->DebugString(), ", which has ",
                                                   src->num_outputs(), " outputs"));
  }
  if (dst_input < 0 || dst_input >= dst->num_inputs()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", dst->DebugString(), " has ",
                                                   dst->num_inputs(), " inputs; got input ",
                                                   dst_input, " from '", src->name(), "'"));
  }
  if (dst->input_edge(dst_input) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", dst->name(), "' input ", dst_input, " is connected twice"));
  }
  if (src->output_type(src_output) != dst->input_type(dst_input)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", dst->DebugString(), " input ", dst_input, " expects ",
        DataTypeString(dst->input_type(dst_input)), " but '", src->name(), ":", src_output,
        "' is ", DataTypeString(src->output_type(src_output))));
  }
  auto e = std::make_unique<Edge>(Edge{src, dst, src_output, dst_input, num_edge_ids()});
  const Edge* raw = e.get();
  edges_.push_back(std::move(e));
  src->out_edges_.push_back(raw);
  dst->in_edges_.push_back(raw);
  return raw;
}

const Edge* Graph::AddControlEdge(Node* src, Node* dst) {
  for (const Edge* e : dst->in_edges_) {
    if (e->IsControlEdge() && e->src == src) return e;
  }
  auto e = std::make_unique<Edge>(Edge{src, dst, kControlSlot, kControlSlot, num_edge_ids()});
  const Edge* raw = e.get();
  edges_.push_back(std::move(e));
  src->out_edges_.push_back(raw);
  dst->in_edges_.push_back(raw);
  return raw;
}

void Graph::RemoveEdge(const Edge* e) {
  auto drop = [e](std::vector<const Edge*>& v) { v.erase(std::find(v.begin(), v.end(), e)); };
  drop(e->src->out_edges_);
  drop(e->dst->in_edges_);
  edges_[e->id].reset();
}

void Graph::RemoveNode(Node* n) {
  while (!n->in_edges_.empty()) RemoveEdge(n->in_edges_.back());
  while (!n->out_edges_.empty()) RemoveEdge(n->out_edges_.back());
  by_name_.erase(n->name());
  --num_nodes_;
  nodes_[n->id_].reset();
}

Node* Graph::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(num_nodes_);
  for (const auto& n : nodes_) {
    if (n) out.push_back(n.get());
  }
  return out;
}

absl::Status Graph::CheckInputsConnected() const {
  for (const auto& n : nodes_) {
    if (!n) continue;
    std::vector<bool> seen(n->num_inputs(), false);
    for (const Edge* e : n->in_edges_) {
      if (!e->IsControlEdge()) seen[e->dst_input] = true;
    }
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (!seen[i]) {
        return absl::FailedPreconditionError(
            absl::StrCat("node ", n->DebugString(), " input ", i, " is not connected"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Graph::InferShapes(Node* n) {
  std::vector<PartialTensorShape> shapes(n->num_inputs(), PartialTensorShape::UnknownRank());
  std::vector<const AttrValue*> values(n->num_inputs(), nullptr);
  for (const Edge* e : n->in_edges_) {
    if (e->IsControlEdge()) continue;
    shapes[e->dst_input] = e->src->output_shape(e->src_output);
    if (e->src->IsOp("Const")) {
      auto it = e->src->attrs().find("value");
      if (it != e->src->attrs().end()) values[e->dst_input] = &it->second;
    }
  }
  InferenceContext c(n->def_, *n->op_, n->input_types_, std::move(shapes), std::move(values),
                     n->num_outputs());
  if (n->op_->shape_fn) {
    STRATA_RETURN_IF_ERROR(n->op_->shape_fn(c));
  } else {
    STRATA_RETURN_IF_ERROR(UnknownShape(c));
  }
  n->output_shapes_ = c.outputs();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Node*>> Graph::TopologicalSort() const {
  // Kahn's algorithm over data and control edges, ties broken by id so the
  // order is deterministic.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<Node*> ready, order;
  order.reserve(num_nodes_);
  for (const auto& n : nodes_) {
    if (!n) continue;
    pending[n->id_] = static_cast<int>(n->in_edges_.size());
    if (pending[n->id_] == 0) ready.push_back(n.get());
  }
  std::reverse(ready.begin(), ready.end());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (const Edge* e : n->out_edges_) {
      if (--pending[e->dst->id_] == 0) ready.push_back(e->dst);
    }
  }
  if (static_cast<int>(order.size()) != num_nodes_) {
    std::vector<std::string> stuck;
    for (const auto& n : nodes_) {
      if (n && pending[n->id_] > 0 && stuck.size() < 5) stuck.push_back(n->name());
    }
    return absl::InvalidArgumentError(
        absl::StrCat("graph has a cycle through nodes: ", absl::StrJoin(stuck, ", ")));
  }
  return order;
}

std::string Graph::NewName(absl::string_view prefix) {
  std::string name(prefix);
  int& counter = name_counters_[name];
  while (by_name_.contains(name)) name = absl::StrCat(prefix, "_", ++counter);
  return name;
}

void Graph::SetGraphDefPassthrough(const ::tensorflow::GraphDef& def) {
  passthrough_.Clear();
  passthrough_.set_version(def.version());
  // proto3 classes have no unknown_fields() accessor; reflection has.
  passthrough_.GetReflection()->MutableUnknownFields(&passthrough_)->MergeFrom(
      def.GetReflection()->GetUnknownFields(def));
  has_versions_ = def.has_versions();
}

void Graph::ToGraphDef(::tensorflow::GraphDef* out) const {
  *out = passthrough_;
  if (has_versions_) *out->mutable_versions() = versions_;
  for (const auto& n : nodes_) {
    if (!n) continue;
    ::tensorflow::NodeDef* d = out->add_node();
    *d = n->def_;
    d->clear_input();
    std::vector<const Edge*> data(n->num_inputs(), nullptr);
    for (const Edge* e : n->in_edges_) {
      if (!e->IsControlEdge()) data[e->dst_input] = e;
    }
    for (const Edge* e : data) {
      if (e == nullptr) continue;
      d->add_input(e->src_output == 0 ? e->src->name() : absl::StrCat(e->src->name(), ":", e->src_output));
    }
    for (const Edge* e : n->in_edges_) {
      if (e->IsControlEdge()) d->add_input(absl::StrCat("^", e->src->name()));
    }
  }
}

}  // namespace strata
