// The C++ builder API, in the spirit of TensorFlow's: a Scope carries the graph,
// a name prefix, a device and control dependencies; op functions (graph/ops/*.h)
// add nodes and return Outputs. Shape inference runs as each node is added.
// The first error is kept in the scope (and later ops become no-ops), so model
// code checks once:
//
//   Scope root = Scope::NewRootScope();
//   Scope layer = root.NewSubScope("dense").WithDevice("/cpu:0");
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 784}));
//   Output y = ops::MatMul(layer, x, w, ops::MatMul::Attrs().TransposeB(true));
//   if (!root.ok()) return root.status();   // "node 'dense/MatMul' (op MatMul): ..."
//
// Thread-safety: scopes derived from one root share the graph and status; use
// them from one thread at a time. Ownership: the root scope owns the graph
// (shared by every derived scope); Node* in Outputs live as long as it.
#ifndef STRATA_GRAPH_SCOPE_H_
#define STRATA_GRAPH_SCOPE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace strata {

// One output of a node: (node, index).
class Output {
 public:
  Output() = default;
  Output(Node* node, int index) : node_(node), index_(index) {}
  Node* node() const { return node_; }
  int index() const { return index_; }
  DataType type() const { return node_ == nullptr ? DT_INVALID : node_->output_type(index_); }
  PartialTensorShape shape() const {
    return node_ == nullptr ? PartialTensorShape::UnknownRank() : node_->output_shape(index_);
  }
  // "name" for output 0, else "name:i" (the form Session::Run takes).
  std::string name() const;
  bool ok() const { return node_ != nullptr; }

 private:
  Node* node_ = nullptr;
  int index_ = 0;
};
using OutputList = std::vector<Output>;

class Scope {
 public:
  static Scope NewRootScope();

  // Names of nodes made in the sub-scope are prefixed "name/".
  Scope NewSubScope(const std::string& name) const;
  // The next node gets exactly this name (under the prefix).
  Scope WithOpName(const std::string& name) const;
  // Requested device for nodes made in this scope ("/cpu:0", "/device:GPU:1", ...).
  Scope WithDevice(const std::string& device) const;
  // Nodes made in this scope run after these.
  Scope WithControlDependencies(const std::vector<Node*>& deps) const;
  Scope WithControlDependencies(const OutputList& deps) const;
  Scope WithNoControlDependencies() const;

  Graph* graph() const { return state_->graph.get(); }
  std::shared_ptr<Graph> graph_as_shared_ptr() const { return state_->graph; }
  absl::Status status() const { return state_->status; }
  bool ok() const { return state_->status.ok(); }
  // Keeps the first error.
  void UpdateStatus(const absl::Status& s) const;

  const std::string& device() const { return device_; }
  const std::vector<Node*>& control_deps() const { return control_deps_; }
  // The name for a new node: the WithOpName name or a unique default, prefixed.
  std::string GetUniqueNameForOp(const std::string& default_name) const;

  absl::Status ToGraphDef(::tensorflow::GraphDef* out) const;

 private:
  struct State {
    std::shared_ptr<Graph> graph;
    absl::Status status;
    absl::flat_hash_map<std::string, int> sub_scopes;  // prefix -> times used
  };
  explicit Scope(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
  std::string prefix_;   // "a/b" or ""
  std::string op_name_;  // set by WithOpName
  std::string device_;
  std::vector<Node*> control_deps_;
};

// Adds one node. Attrs for type and list-length attrs that the inputs imply
// (T from an input of type T, N from a list of N inputs) are filled in. On
// error the scope's status is set and Finalize returns nullptr.
//
//   Node* n = NodeBuilder(scope, "MatMul").Input(a).Input(b).Attr("transpose_a", true).Finalize();
class NodeBuilder {
 public:
  NodeBuilder(const Scope& scope, const std::string& op, const std::string& default_name = "");
  NodeBuilder& Input(const Output& in);
  NodeBuilder& Input(const OutputList& list);  // a list input (N * T or type list)
  NodeBuilder& ControlInput(Node* n);
  NodeBuilder& Attr(const std::string& name, AttrValue v);
  template <typename T>
  NodeBuilder& Attr(const std::string& name, const T& v) {
    return Attr(name, MakeAttr(v));
  }
  // Adds the node and its edges and runs shape inference.
  Node* Finalize();

 private:
  const Scope scope_;  // a copy: callers often pass a temporary (scope.WithOpName(...))
  std::string op_, default_name_;
  std::vector<OutputList> inputs_;  // one entry per declared input arg
  std::vector<bool> is_list_;
  std::vector<Node*> control_inputs_;
  AttrMap attrs_;
};

}  // namespace strata

#endif  // STRATA_GRAPH_SCOPE_H_
