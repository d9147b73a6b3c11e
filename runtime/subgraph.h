// The step graph: what one Session::Run signature needs of the session's
// graph. Pruning keeps only the nodes that the fetches and targets depend on,
// where a feed cuts the graph (a fed tensor's producer is not needed for it);
// feeds become _Arg nodes and fetches _Retval nodes (kernels/call_frame.h),
// so the executor treats them like any other node.
//
//   absl::StatusOr<StepGraph> sg = BuildStepGraph(graph, {"x"}, {"y:0"}, {"train"});
//   sg->graph;           // pruned copy: _Arg 0 for x, _Retval 0 for y:0, "train"
//   sg->feed_types[0];   // the dtype a fed value for "x" must have
//
// Errors (InvalidArgument) name the feed, fetch or target: a malformed name,
// an unknown node, an output index the node does not have, a feed given twice.
//
// Thread-safety: reentrant; the source graph is only read (concurrent builds
// from one graph are fine). Ownership: the result owns its new graph.
#ifndef STRATA_RUNTIME_SUBGRAPH_H_
#define STRATA_RUNTIME_SUBGRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

// "x" (output 0), "x:0", "x:3".
struct TensorId {
  std::string node;
  int index = 0;
};
absl::StatusOr<TensorId> ParseTensorId(absl::string_view name);

struct StepGraph {
  std::unique_ptr<Graph> graph;
  // Per feed, in the order given: what a fed tensor must be.
  std::vector<DataType> feed_types;
  std::vector<PartialTensorShape> feed_shapes;
};

// Builds the step graph of `g` for these feeds, fetches and targets (tensor
// names for feeds and fetches, node names for targets). Nodes keep their
// names, attrs, requested devices and inferred shapes.
absl::StatusOr<StepGraph> BuildStepGraph(const Graph& g, const std::vector<std::string>& feeds,
                                         const std::vector<std::string>& fetches,
                                         const std::vector<std::string>& targets);

// A copy of `g` (nodes, edges, requested and assigned devices, shapes).
absl::StatusOr<std::unique_ptr<Graph>> CopyGraph(const Graph& g);

// Adds a copy of `n` to `g` without its edges: def, inferred output shapes,
// requested and assigned device.
absl::StatusOr<Node*> CopyNode(const Node& n, Graph* g);

}  // namespace strata

#endif  // STRATA_RUNTIME_SUBGRAPH_H_
