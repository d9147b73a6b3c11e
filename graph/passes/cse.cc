#include "graph/passes/cse.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace strata {

namespace {

// Attr maps are compared through their deterministic serialization: map
// entries sorted by key, so equal maps give equal bytes.
std::string AttrBytes(const Node& n) {
  ::tensorflow::NodeDef only_attrs;
  *only_attrs.mutable_attr() = n.attrs();
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  only_attrs.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// Everything that decides what `n` computes, as one string. Inputs are
// identified by node id, which is stable while the pass runs.
std::string Signature(const Node& n) {
  std::vector<std::pair<int, int>> data(n.num_inputs(), {-1, -1});
  std::vector<int> control;
  for (const Edge* e : n.in_edges()) {
    if (e->IsControlEdge()) {
      control.push_back(e->src->id());
    } else {
      data[e->dst_input] = {e->src->id(), e->src_output};
    }
  }
  if (n.op_def().is_commutative && data.size() == 2 && data[1] < data[0]) {
    std::swap(data[0], data[1]);
  }
  std::sort(control.begin(), control.end());
  control.erase(std::unique(control.begin(), control.end()), control.end());
  std::string sig = absl::StrCat(n.type_string(), "|", n.requested_device(), "|",
                                 n.assigned_device_name(), "|");
  for (const auto& d : data) absl::StrAppend(&sig, d.first, ":", d.second, ",");
  absl::StrAppend(&sig, "|");
  for (int c : control) absl::StrAppend(&sig, c, ",");
  absl::StrAppend(&sig, "|", AttrBytes(n));
  return sig;
}

// Moves every consumer of `from` over to `to` (same output indices), then
// removes `from`.
absl::Status MergeInto(Graph* g, Node* from, Node* to) {
  std::vector<const Edge*> outs(from->out_edges().begin(), from->out_edges().end());
  for (const Edge* e : outs) {
    Node* dst = e->dst;
    if (e->IsControlEdge()) {
      g->RemoveEdge(e);
      g->AddControlEdge(to, dst);
      continue;
    }
    const int src_output = e->src_output, dst_input = e->dst_input;
    g->RemoveEdge(e);
    STRATA_RETURN_IF_ERROR(g->AddEdge(to, src_output, dst, dst_input).status());
  }
  g->RemoveNode(from);
  return absl::OkStatus();
}

// Kahn's algorithm taking the smallest ready id first, so the node that
// survives a merge is the earliest-added one.
absl::StatusOr<std::vector<Node*>> OrderByDependenciesThenId(const Graph& g) {
  std::vector<int> pending(g.num_node_ids(), 0);
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (Node* n : g.nodes()) {
    pending[n->id()] = static_cast<int>(n->in_edges().size());
    if (pending[n->id()] == 0) ready.push(n->id());
  }
  std::vector<Node*> order;
  order.reserve(g.num_nodes());
  while (!ready.empty()) {
    Node* n = g.FindNodeId(ready.top());
    ready.pop();
    order.push_back(n);
    for (const Edge* e : n->out_edges()) {
      if (--pending[e->dst->id()] == 0) ready.push(e->dst->id());
    }
  }
  if (static_cast<int>(order.size()) != g.num_nodes()) {
    return g.TopologicalSort().status();  // names the nodes of the cycle
  }
  return order;
}

}  // namespace

absl::StatusOr<bool> EliminateCommonSubexpressions(Graph* g,
                                                   const std::vector<std::string>& keep) {
  const absl::flat_hash_set<std::string> keep_set(keep.begin(), keep.end());
  STRATA_ASSIGN_OR_RETURN(std::vector<Node*> order, OrderByDependenciesThenId(*g));
  absl::flat_hash_map<std::string, Node*> seen;
  bool changed = false;
  for (Node* n : order) {
    if (n->op_def().is_stateful || n->IsOp("Placeholder")) continue;
    // Inputs were canonicalized earlier in the order, so equal signatures
    // mean equal computations.
    std::string sig = Signature(*n);
    auto [it, inserted] = seen.try_emplace(std::move(sig), n);
    if (inserted || keep_set.contains(n->name())) continue;
    STRATA_RETURN_IF_ERROR(MergeInto(g, n, it->second));
    changed = true;
  }
  return changed;
}

}  // namespace strata
