#include "runtime/subgraph.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"

namespace strata {

absl::StatusOr<Node*> CopyNode(const Node& n, Graph* g) {
  STRATA_ASSIGN_OR_RETURN(Node * c, g->AddNode(n.def()));
  std::vector<PartialTensorShape> shapes;
  shapes.reserve(n.num_outputs());
  for (int i = 0; i < n.num_outputs(); ++i) shapes.push_back(n.output_shape(i));
  c->set_output_shapes(std::move(shapes));
  c->set_assigned_device_name(n.assigned_device_name());
  return c;
}

namespace {

// The node and output a feed or fetch names; InvalidArgument naming `what`.
absl::StatusOr<std::pair<Node*, int>> Resolve(const Graph& g, const std::string& name,
                                              const char* what) {
  auto id = ParseTensorId(name);
  if (!id.ok()) return AnnotateStatus(id.status(), absl::StrCat(what, " '", name, "': "));
  Node* n = g.FindNode(id->node);
  if (n == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "': no node named '", id->node, "' in the graph"));
  }
  if (id->index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': node ", n->DebugString(),
                                                   " has ", n->num_outputs(), " outputs"));
  }
  return std::make_pair(n, id->index);
}

}  // namespace

absl::StatusOr<TensorId> ParseTensorId(absl::string_view name) {
  TensorId id;
  const size_t colon = name.rfind(':');
  if (colon == absl::string_view::npos) {
    id.node = std::string(name);
  } else {
    id.node = std::string(name.substr(0, colon));
    absl::string_view idx = name.substr(colon + 1);
    if (idx.empty() || idx[0] == '-' || idx[0] == '+' || !absl::SimpleAtoi(idx, &id.index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' is not a tensor name ('node' or 'node:index')"));
    }
  }
  if (id.node.empty() || id.node[0] == '^') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a tensor name ('node' or 'node:index')"));
  }
  return id;
}

absl::StatusOr<StepGraph> BuildStepGraph(const Graph& g, const std::vector<std::string>& feeds,
                                         const std::vector<std::string>& fetches,
                                         const std::vector<std::string>& targets) {
  // 1. Resolve the names.
  absl::flat_hash_map<std::pair<int, int>, int> fed;  // (node id, output) -> feed index
  std::vector<std::pair<Node*, int>> feed_outs, fetch_outs;
  for (size_t i = 0; i < feeds.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(auto out, Resolve(g, feeds[i], "feed"));
    if (!fed.emplace(std::make_pair(out.first->id(), out.second), static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", feeds[i], "' is given twice (as another name for the same tensor)"));
    }
    feed_outs.push_back(out);
  }
  for (const std::string& f : fetches) {
    STRATA_ASSIGN_OR_RETURN(auto out, Resolve(g, f, "fetch"));
    fetch_outs.push_back(out);
  }
  std::vector<Node*> target_nodes;
  for (const std::string& t : targets) {
    Node* n = g.FindNode(t);
    if (n == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("target '", t, "': no node named '", t, "' in the graph"));
    }
    target_nodes.push_back(n);
  }

  // 2. Prune: walk back from fetches and targets; a fed tensor's producer is
  // not needed for that tensor.
  std::vector<bool> needed(g.num_node_ids(), false);
  std::vector<Node*> stack;
  auto visit = [&](Node* n) {
    if (!needed[n->id()]) {
      needed[n->id()] = true;
      stack.push_back(n);
    }
  };
  for (const auto& [n, idx] : fetch_outs) {
    if (!fed.contains({n->id(), idx})) visit(n);
  }
  for (Node* n : target_nodes) visit(n);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() && fed.contains({e->src->id(), e->src_output})) continue;
      visit(e->src);
    }
  }

  // 3. Copy the needed nodes, then add _Arg nodes for the feeds.
  StepGraph sg;
  sg.graph = std::make_unique<Graph>(g.op_registry());
  Graph* out = sg.graph.get();
  *out->mutable_versions() = g.versions();
  std::vector<Node*> copy(g.num_node_ids(), nullptr);
  for (Node* n : g.nodes()) {
    if (!needed[n->id()]) continue;
    STRATA_ASSIGN_OR_RETURN(copy[n->id()], CopyNode(*n, out));
  }
  std::vector<Node*> args;
  for (size_t i = 0; i < feed_outs.size(); ++i) {
    const auto& [n, idx] = feed_outs[i];
    ::tensorflow::NodeDef def;
    def.set_name(out->NewName(absl::StrCat("_arg_", n->name(), "_", idx)));
    def.set_op("_Arg");
    (*def.mutable_attr())["T"] = MakeAttr(n->output_type(idx));
    (*def.mutable_attr())["index"] = MakeAttr(static_cast<int64_t>(i));
    STRATA_ASSIGN_OR_RETURN(Node * arg, out->AddNode(std::move(def)));
    arg->set_output_shapes({n->output_shape(idx)});
    args.push_back(arg);
    sg.feed_types.push_back(n->output_type(idx));
    sg.feed_shapes.push_back(n->output_shape(idx));
  }

  // 4. Edges among the copies; fed tensors come from their _Arg.
  for (Node* n : g.nodes()) {
    if (!needed[n->id()]) continue;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) {
        out->AddControlEdge(copy[e->src->id()], copy[n->id()]);
        continue;
      }
      auto it = fed.find({e->src->id(), e->src_output});
      Node* src = it != fed.end() ? args[it->second] : copy[e->src->id()];
      const int src_output = it != fed.end() ? 0 : e->src_output;
      STRATA_RETURN_IF_ERROR(out->AddEdge(src, src_output, copy[n->id()], e->dst_input).status());
    }
  }

  // 5. A _Retval per fetch (a fetched feed is returned as fed).
  for (size_t i = 0; i < fetch_outs.size(); ++i) {
    const auto& [n, idx] = fetch_outs[i];
    auto it = fed.find({n->id(), idx});
    Node* src = it != fed.end() ? args[it->second] : copy[n->id()];
    const int src_output = it != fed.end() ? 0 : idx;
    ::tensorflow::NodeDef def;
    def.set_name(out->NewName(absl::StrCat("_retval_", n->name(), "_", idx)));
    def.set_op("_Retval");
    (*def.mutable_attr())["T"] = MakeAttr(n->output_type(idx));
    (*def.mutable_attr())["index"] = MakeAttr(static_cast<int64_t>(i));
    STRATA_ASSIGN_OR_RETURN(Node * ret, out->AddNode(std::move(def)));
    STRATA_RETURN_IF_ERROR(out->AddEdge(src, src_output, ret, 0).status());
  }
  return sg;
}

absl::StatusOr<std::unique_ptr<Graph>> CopyGraph(const Graph& g) {
  auto out = std::make_unique<Graph>(g.op_registry());
  *out->mutable_versions() = g.versions();
  std::vector<Node*> copy(g.num_node_ids(), nullptr);
  for (Node* n : g.nodes()) {
    STRATA_ASSIGN_OR_RETURN(copy[n->id()], CopyNode(*n, out.get()));
  }
  for (Node* n : g.nodes()) {
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) {
        out->AddControlEdge(copy[e->src->id()], copy[n->id()]);
      } else {
        STRATA_RETURN_IF_ERROR(
            out->AddEdge(copy[e->src->id()], e->src_output, copy[n->id()], e->dst_input).status());
      }
    }
  }
  return out;
}

}  // namespace strata
