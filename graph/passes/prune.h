// Prune: removes the nodes of a graph that given fetches and targets do not
// need, the way a session cuts a step graph before running it.
//
//   // Keep what "loss" and the "train" op need; "x:0" will be fed.
//   absl::StatusOr<bool> changed = PruneGraph(&g, {"loss"}, {"train"}, {"x"});
//
// A node is needed if it is a fetch's or target's node, or an input (data or
// control) of a needed node. A fed tensor is supplied from outside, so the
// walk does not go past it: when a needed node's fed output is the only
// thing wanted from it (one output, fed, not itself a target), the node is
// replaced by a Placeholder of the same name, dtype, inferred shape and
// device, and its inputs are needed no more. (A node with several outputs is
// kept whole, with its inputs: a Placeholder cannot stand in for it.)
//
// Thread-safety: mutates the graph; no other thread may use it meanwhile.
// Ownership: Node* into `g` for removed nodes become invalid.
#ifndef STRATA_GRAPH_PASSES_PRUNE_H_
#define STRATA_GRAPH_PASSES_PRUNE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace strata {

// `fetches` and `feeds` are tensor names ("a", "a:1"), `targets` node names.
// Returns whether the graph changed. InvalidArgument, before any change,
// naming a fetch, target or feed whose node or output does not exist.
absl::StatusOr<bool> PruneGraph(Graph* g, const std::vector<std::string>& fetches,
                                const std::vector<std::string>& targets,
                                const std::vector<std::string>& feeds = {});

}  // namespace strata

#endif  // STRATA_GRAPH_PASSES_PRUNE_H_
