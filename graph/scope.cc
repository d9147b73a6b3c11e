#include "graph/scope.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

std::string Output::name() const {
  if (node_ == nullptr) return "<null>";
  return index_ == 0 ? node_->name() : absl::StrCat(node_->name(), ":", index_);
}

Scope Scope::NewRootScope() {
  auto s = std::make_shared<State>();
  s->graph = std::make_shared<Graph>();
  return Scope(std::move(s));
}

Scope Scope::NewSubScope(const std::string& name) const {
  Scope s = *this;
  s.op_name_.clear();
  if (name.empty()) return s;
  std::string full = prefix_.empty() ? name : absl::StrCat(prefix_, "/", name);
  // Two sub-scopes of one name get distinct prefixes ("dense", "dense_1").
  int& uses = state_->sub_scopes[full];
  s.prefix_ = uses == 0 ? full : absl::StrCat(full, "_", uses);
  ++uses;
  return s;
}

Scope Scope::WithOpName(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  return s;
}

Scope Scope::WithDevice(const std::string& device) const {
  Scope s = *this;
  s.device_ = device;
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Node*>& deps) const {
  Scope s = *this;
  s.control_deps_.insert(s.control_deps_.end(), deps.begin(), deps.end());
  return s;
}

Scope Scope::WithControlDependencies(const OutputList& deps) const {
  std::vector<Node*> nodes;
  for (const Output& o : deps) {
    if (o.node() != nullptr) nodes.push_back(o.node());
  }
  return WithControlDependencies(nodes);
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_deps_.clear();
  return s;
}

void Scope::UpdateStatus(const absl::Status& s) const {
  if (state_->status.ok() && !s.ok()) state_->status = s;
}

std::string Scope::GetUniqueNameForOp(const std::string& default_name) const {
  // An explicit name is kept as given (a duplicate fails in Graph::AddNode);
  // a default name is numbered until unique.
  const std::string& base = op_name_.empty() ? default_name : op_name_;
  std::string full = prefix_.empty() ? base : absl::StrCat(prefix_, "/", base);
  return op_name_.empty() ? graph()->NewName(full) : full;
}

absl::Status Scope::ToGraphDef(::tensorflow::GraphDef* out) const {
  STRATA_RETURN_IF_ERROR(status());
  graph()->ToGraphDef(out);
  return absl::OkStatus();
}

NodeBuilder::NodeBuilder(const Scope& scope, const std::string& op, const std::string& default_name)
    : scope_(scope), op_(op), default_name_(default_name.empty() ? op : default_name) {}

NodeBuilder& NodeBuilder::Input(const Output& in) {
  inputs_.push_back({in});
  is_list_.push_back(false);
  return *this;
}

NodeBuilder& NodeBuilder::Input(const OutputList& list) {
  inputs_.push_back(list);
  is_list_.push_back(true);
  return *this;
}

NodeBuilder& NodeBuilder::ControlInput(Node* n) {
  control_inputs_.push_back(n);
  return *this;
}

NodeBuilder& NodeBuilder::Attr(const std::string& name, AttrValue v) {
  attrs_[name] = std::move(v);
  return *this;
}

Node* NodeBuilder::Finalize() {
  if (!scope_.ok()) return nullptr;
  Graph* g = scope_.graph();
  const std::string name = scope_.GetUniqueNameForOp(default_name_);
  auto fail = [&](const absl::Status& s) -> Node* {
    scope_.UpdateStatus(AnnotateStatus(s, absl::StrCat("building node '", name, "': ")));
    return nullptr;
  };
  auto op = g->op_registry()->LookUp(op_);
  if (!op.ok()) return fail(op.status());
  if (inputs_.size() != (*op)->inputs.size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat("op ", op_, " takes ", (*op)->inputs.size(),
                                                        " inputs, got ", inputs_.size())));
  }
  // Infer type and length attrs from the inputs.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const ArgDef& arg = (*op)->inputs[i];
    for (const Output& o : inputs_[i]) {
      if (!o.ok()) return fail(absl::InvalidArgumentError(absl::StrCat("input '", arg.name, "' is null")));
    }
    if (!arg.number_attr.empty() && !attrs_.contains(arg.number_attr)) {
      attrs_[arg.number_attr] = MakeAttr(static_cast<int64_t>(inputs_[i].size()));
    }
    if (!arg.type_attr.empty() && !attrs_.contains(arg.type_attr) && !inputs_[i].empty()) {
      attrs_[arg.type_attr] = MakeAttr(inputs_[i][0].type());
    }
    if (!arg.type_list_attr.empty() && !attrs_.contains(arg.type_list_attr)) {
      std::vector<DataType> types;
      for (const Output& o : inputs_[i]) types.push_back(o.type());
      attrs_[arg.type_list_attr] = MakeAttr(types);
    }
  }
  ::tensorflow::NodeDef def;
  def.set_name(name);
  def.set_op(op_);
  def.set_device(scope_.device());
  *def.mutable_attr() = attrs_;
  auto node = g->AddNode(std::move(def));
  if (!node.ok()) return fail(node.status());
  int slot = 0;
  for (const OutputList& list : inputs_) {
    for (const Output& o : list) {
      auto e = g->AddEdge(o.node(), o.index(), *node, slot++);
      if (!e.ok()) {
        g->RemoveNode(*node);
        return fail(e.status());
      }
    }
  }
  if (slot != (*node)->num_inputs()) {
    g->RemoveNode(*node);
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "op ", op_, " expects ", (*node)->num_inputs(), " input tensors, got ", slot)));
  }
  for (Node* c : scope_.control_deps()) g->AddControlEdge(c, *node);
  for (Node* c : control_inputs_) g->AddControlEdge(c, *node);
  absl::Status s = g->InferShapes(*node);
  if (!s.ok()) {
    g->RemoveNode(*node);
    scope_.UpdateStatus(s);
    return nullptr;
  }
  return *node;
}

}  // namespace strata
