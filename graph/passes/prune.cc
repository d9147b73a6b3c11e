#include "graph/passes/prune.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/graph_def_import.h"

namespace strata {

namespace {

struct TensorRef {
  Node* node;
  int index;
};

absl::StatusOr<TensorRef> ResolveTensor(const Graph& g, const std::string& name,
                                        const char* what) {
  auto in = ParseInputName(name);
  if (!in.ok()) return AnnotateStatus(in.status(), absl::StrCat(what, " '", name, "': "));
  if (in->IsControl()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' is not a tensor name"));
  }
  Node* n = g.FindNode(in->node);
  if (n == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "': no node '", in->node, "' in the graph"));
  }
  if (in->index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': ", n->DebugString(),
                                                   " has ", n->num_outputs(), " outputs"));
  }
  return TensorRef{n, in->index};
}

// Replaces single-output `n` by a Placeholder of the same name, dtype,
// inferred shape and device, keeping its consumers.
absl::Status ReplaceWithPlaceholder(Graph* g, Node* n) {
  struct Out {
    Node* dst;
    int dst_input;  // kControlSlot for a control edge
  };
  std::vector<Out> outs;
  for (const Edge* e : n->out_edges()) outs.push_back({e->dst, e->dst_input});
  ::tensorflow::NodeDef def;
  def.set_name(n->name());
  def.set_op("Placeholder");
  def.set_device(n->requested_device());
  (*def.mutable_attr())["dtype"] = MakeAttr(n->output_type(0));
  (*def.mutable_attr())["shape"] = MakeAttr(n->output_shape(0));
  const std::string assigned = n->assigned_device_name();
  const PartialTensorShape shape = n->output_shape(0);
  g->RemoveNode(n);
  STRATA_ASSIGN_OR_RETURN(Node * p, g->AddNode(std::move(def)));
  p->set_assigned_device_name(assigned);
  p->set_output_shapes({shape});
  for (const Out& o : outs) {
    if (o.dst_input == kControlSlot) {
      g->AddControlEdge(p, o.dst);
    } else {
      STRATA_RETURN_IF_ERROR(g->AddEdge(p, 0, o.dst, o.dst_input).status());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> PruneGraph(Graph* g, const std::vector<std::string>& fetches,
                                const std::vector<std::string>& targets,
                                const std::vector<std::string>& feeds) {
  // 1. Resolve every name first, so a bad one changes nothing.
  std::vector<Node*> roots;
  absl::flat_hash_set<Node*> target_nodes;
  for (const std::string& f : fetches) {
    STRATA_ASSIGN_OR_RETURN(TensorRef t, ResolveTensor(*g, f, "fetch"));
    roots.push_back(t.node);
  }
  for (const std::string& t : targets) {
    Node* n = g->FindNode(t);
    if (n == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("target '", t, "': no such node"));
    }
    roots.push_back(n);
    target_nodes.insert(n);
  }
  absl::flat_hash_set<std::pair<Node*, int>> fed;
  for (const std::string& f : feeds) {
    STRATA_ASSIGN_OR_RETURN(TensorRef t, ResolveTensor(*g, f, "feed"));
    fed.insert({t.node, t.index});
  }

  // 2. A node whose one output is fed stands for a value from outside: its
  // inputs are not needed (unless reached another way).
  auto cut = [&](Node* n) {
    return n->num_outputs() == 1 && fed.contains({n, 0}) && !target_nodes.contains(n) &&
           !n->IsOp("Placeholder");
  };

  // 3. Walk back from the roots.
  std::vector<bool> needed(g->num_node_ids(), false);
  std::vector<Node*> stack;
  for (Node* n : roots) {
    if (!needed[n->id()]) {
      needed[n->id()] = true;
      stack.push_back(n);
    }
  }
  std::vector<Node*> to_replace;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (cut(n)) {
      to_replace.push_back(n);
      continue;
    }
    for (const Edge* e : n->in_edges()) {
      if (!needed[e->src->id()]) {
        needed[e->src->id()] = true;
        stack.push_back(e->src);
      }
    }
  }

  // 4. Remove the rest, then stand Placeholders in for the cut nodes.
  bool changed = false;
  for (Node* n : g->nodes()) {
    if (!needed[n->id()]) {
      g->RemoveNode(n);
      changed = true;
    }
  }
  for (Node* n : to_replace) {
    // Its inputs are gone unless needed elsewhere; its own in-edges go with it.
    STRATA_RETURN_IF_ERROR(ReplaceWithPlaceholder(g, n));
    changed = true;
  }
  return changed;
}

}  // namespace strata
