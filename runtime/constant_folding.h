// Constant folding: a node whose data inputs are all constants is computed
// once, at graph-rewrite time, with its CPU kernel, and replaced by a Const
// holding the result. Folding runs in topological order, so whole constant
// subgraphs (Neg(Mul(c1, c2))) fold in one call.
//
//   absl::StatusOr<bool> changed = FoldConstants(&graph);
//   // or, on every step graph of a session:
//   SessionOptions opts;
//   opts.optimization_passes.push_back(
//       [](Graph* g) { return FoldConstants(g).status(); });
//
// Folded: nodes with at least one data input, every one from a Const; one
// output, whose inferred shape is fully known and has at most
// `max_constant_elements` elements (a small Const can expand into a huge
// Fill; storing that in the graph would be a blowup). Never folded: stateful
// ops (random numbers, _Recv, _Arg, ...), Placeholders and other
// runtime-internal ops ('_' names), nodes with several outputs (a Const has
// one, and the node's name must keep meaning the same tensors), and nodes
// whose kernel fails (the failure is left for the step to report).
//
// The Const keeps the node's name, requested and assigned device, consumers
// and control inputs, and also inherits the control inputs of the Consts it
// was computed from, so it runs no earlier than they would have. Consts left
// without consumers are kept (they may be fetched by name); prune
// (graph/passes/prune.h) removes them.
//
// Thread-safety: mutates the graph; no other thread may use it meanwhile.
// Ownership: Node* to folded nodes become invalid; `options.device`, if set,
// is not owned and must outlive the call.
#ifndef STRATA_RUNTIME_CONSTANT_FOLDING_H_
#define STRATA_RUNTIME_CONSTANT_FOLDING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "kernels/device_base.h"

namespace strata {

struct ConstantFoldingOptions {
  // A result with more elements than this is not folded.
  int64_t max_constant_elements = 10 * 1000 * 1000;
  // The CPU device the kernels run on; nullptr: a one-thread device owned by
  // the call.
  DeviceBase* device = nullptr;
};

// Returns whether any node was folded. InvalidArgument if the graph has a
// cycle; Internal if the graph cannot be rewired (a bug).
absl::StatusOr<bool> FoldConstants(Graph* g, const ConstantFoldingOptions& options = {});

}  // namespace strata

#endif  // STRATA_RUNTIME_CONSTANT_FOLDING_H_
