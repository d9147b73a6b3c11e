// Common-subexpression elimination: nodes that compute the same thing are
// merged into one.
//
//   absl::StatusOr<bool> changed = EliminateCommonSubexpressions(&g);
//   // two MatMul(x, w) nodes with equal attrs and device are now one
//
// Two nodes are the same computation when they have the same op, the same
// attrs, the same requested and assigned device, the same data inputs (the
// same tensors in the same order, or in either order for the two inputs of a
// commutative op, OpDef::is_commutative) and the same set of control inputs.
// Never merged: stateful ops (OpDef::is_stateful: random numbers, _Arg,
// _Recv, ...), Placeholders (each is a distinct feed), and the nodes named
// in `keep` (fetched or targeted by name; they may still absorb others).
// Nodes are visited in topological order, so whole duplicated chains
// collapse in one call. The surviving node is the earliest added (lowest
// id); the others' consumers are rewired to it and they are removed.
//
// Thread-safety: mutates the graph; no other thread may use it meanwhile.
// Ownership: Node* into `g` for merged-away nodes become invalid.
#ifndef STRATA_GRAPH_PASSES_CSE_H_
#define STRATA_GRAPH_PASSES_CSE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace strata {

// Returns whether any node was merged. InvalidArgument if the graph has a
// cycle (naming it, as Graph::TopologicalSort does).
absl::StatusOr<bool> EliminateCommonSubexpressions(Graph* g,
                                                   const std::vector<std::string>& keep = {});

}  // namespace strata

#endif  // STRATA_GRAPH_PASSES_CSE_H_
