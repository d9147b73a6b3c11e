// Graph: nodes (one op each, with attrs and a requested device), data edges
// (src output -> dst input) and control edges (src before dst). Edges are the
// truth; a NodeDef's `input` list is rebuilt from them on export.
//
//   Graph g;
//   tensorflow::NodeDef d; d.set_name("x"); d.set_op("Placeholder"); ...
//   absl::StatusOr<Node*> x = g.AddNode(d);          // attrs validated, defaults filled
//   g.AddEdge(*x, 0, *y, 1);                          // checks indices and dtypes
//   absl::StatusOr<std::vector<Node*>> order = g.TopologicalSort();  // names a cycle
//
// Device strings follow TensorFlow's grammar (runtime/device_name.h parses them).
// Thread-safety: a Graph is built by one thread; once built, const methods may
// be called concurrently. Ownership: the Graph owns its nodes and edges; Node*
// and Edge* stay valid until removed or the Graph is destroyed.
#ifndef STRATA_GRAPH_GRAPH_H_
#define STRATA_GRAPH_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "proto/graph.pb.h"

namespace strata {

inline constexpr int kControlSlot = -1;

class Node;

struct Edge {
  Node* src;
  Node* dst;
  int src_output;  // kControlSlot for a control edge
  int dst_input;   // kControlSlot for a control edge
  int id;
  bool IsControlEdge() const { return src_output == kControlSlot; }
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name(); }
  const std::string& type_string() const { return def_.op(); }
  const OpDef& op_def() const { return *op_; }
  // Name, op, requested device and attrs. `input` is not kept up to date;
  // Graph::ToGraphDef writes it from the edges.
  const ::tensorflow::NodeDef& def() const { return def_; }
  const AttrMap& attrs() const { return def_.attr(); }
  const std::string& requested_device() const { return def_.device(); }
  void set_requested_device(const std::string& d) { def_.set_device(d); }
  const std::string& assigned_device_name() const { return assigned_device_; }
  void set_assigned_device_name(std::string d) { assigned_device_ = std::move(d); }
  // Sets an attr after creation (graph passes); the caller keeps it valid.
  void SetAttr(const std::string& name, AttrValue v) { (*def_.mutable_attr())[name] = std::move(v); }

  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const std::vector<DataType>& input_types() const { return input_types_; }
  const std::vector<DataType>& output_types() const { return output_types_; }
  // Inferred shapes of the outputs (unknown until inference has run).
  const PartialTensorShape& output_shape(int i) const { return output_shapes_[i]; }
  void set_output_shapes(std::vector<PartialTensorShape> s) { output_shapes_ = std::move(s); }

  const std::vector<const Edge*>& in_edges() const { return in_edges_; }
  const std::vector<const Edge*>& out_edges() const { return out_edges_; }
  // The data edge feeding input `i`, or nullptr if unconnected.
  const Edge* input_edge(int i) const;
  bool IsOp(const char* op) const { return def_.op() == op; }
  std::string DebugString() const;  // "'name' (op Op)"

 private:
  friend class Graph;
  Node() = default;
  int id_ = -1;
  const OpDef* op_ = nullptr;
  ::tensorflow::NodeDef def_;
  std::string assigned_device_;
  std::vector<DataType> input_types_, output_types_;
  std::vector<PartialTensorShape> output_shapes_;
  std::vector<const Edge*> in_edges_, out_edges_;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* ops = OpRegistry::Global());
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Adds a node: looks up the op, fills default attrs, validates attrs and
  // computes input/output dtypes. `def.input` is ignored (add edges).
  // InvalidArgument/NotFound naming the node and attr; AlreadyExists for a
  // duplicate name.
  absl::StatusOr<Node*> AddNode(::tensorflow::NodeDef def);
  // A data edge; checks the indices, that the input is free and the dtypes match.
  absl::StatusOr<const Edge*> AddEdge(Node* src, int src_output, Node* dst, int dst_input);
  // A control edge (no-op if it exists already).
  const Edge* AddControlEdge(Node* src, Node* dst);
  void RemoveEdge(const Edge* e);
  void RemoveNode(Node* n);  // and its edges

  Node* FindNode(absl::string_view name) const;
  Node* FindNodeId(int id) const { return id >= 0 && id < num_node_ids() ? nodes_[id].get() : nullptr; }
  int num_node_ids() const { return static_cast<int>(nodes_.size()); }  // ids are < this
  int num_nodes() const { return num_nodes_; }
  int num_edge_ids() const { return static_cast<int>(edges_.size()); }
  std::vector<Node*> nodes() const;  // live nodes in id order

  // Every data input has an edge; FailedPrecondition naming the node otherwise.
  absl::Status CheckInputsConnected() const;
  // Runs `n`'s shape function over its inputs' inferred shapes.
  absl::Status InferShapes(Node* n);
  // Inputs before consumers; InvalidArgument naming nodes of a cycle.
  absl::StatusOr<std::vector<Node*>> TopologicalSort() const;
  // A node name not yet used: `prefix`, else `prefix_1`, `prefix_2`, ...
  std::string NewName(absl::string_view prefix);

  // Nodes in id order, inputs from edges ("src", "src:1", "^ctrl").
  void ToGraphDef(::tensorflow::GraphDef* out) const;
  ::tensorflow::VersionDef* mutable_versions() {
    has_versions_ = true;
    return &versions_;
  }
  const ::tensorflow::VersionDef& versions() const { return versions_; }
  // The parts of an imported GraphDef that the Graph does not interpret: the
  // deprecated `version`, whether `versions` was present, and fields this
  // proto does not declare (TensorFlow's function `library`, `debug_info`),
  // which protobuf keeps as unknown fields. ToGraphDef writes them back, so
  // import -> export loses nothing. `def`'s nodes and versions are ignored.
  void SetGraphDefPassthrough(const ::tensorflow::GraphDef& def);
  const OpRegistry* op_registry() const { return ops_; }

 private:
  const OpRegistry* const ops_;
  std::vector<std::unique_ptr<Node>> nodes_;  // by id; nullptr once removed
  std::vector<std::unique_ptr<Edge>> edges_;  // by id; nullptr once removed
  absl::flat_hash_map<std::string, Node*> by_name_;
  absl::flat_hash_map<std::string, int> name_counters_;
  int num_nodes_ = 0;
  ::tensorflow::VersionDef versions_;
  bool has_versions_ = true;
  ::tensorflow::GraphDef passthrough_;  // no nodes, no versions
};

}  // namespace strata

#endif  // STRATA_GRAPH_GRAPH_H_
