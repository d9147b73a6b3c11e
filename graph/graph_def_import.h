// GraphDef import: turns a tensorflow::GraphDef (from Strata's builder, from
// TensorFlow, or from a file a user handed us) into a Graph, validating
// everything on the way, so that nothing downstream (passes, placement,
// kernels) ever sees a malformed graph.
//
//   tensorflow::GraphDef def;
//   if (!def.ParseFromString(bytes)) return absl::DataLossError("...");
//   absl::StatusOr<std::unique_ptr<Graph>> g = ImportGraphDef(def);
//   if (!g.ok()) return g.status();  // "node 'dense/MatMul' (op MatMul): attr 'T' ..."
//   ...
//   tensorflow::GraphDef out;
//   (*g)->ToGraphDef(&out);          // export
//
// What is checked (each error is InvalidArgument, or NotFound for an unknown
// op, and names the node and, where there is one, the attr or input):
//   - node names: non-empty, TensorFlow's grammar (a leading '_' allowed, for
//     the internal names of step and partition graphs), unique;
//   - ops: registered; attrs: declared, of the declared type, allowed dtype,
//     >= minimum; a missing attr gets its default or is an error;
//   - attr values: shapes have dims >= -1 and a known-dims product that fits
//     in int64; tensors have a supported dtype, a valid shape, a value count
//     that matches (tensor_content exactly, typed fields at most), and fit in
//     2 GiB; a Const's tensor has the Const's dtype;
//   - inputs: "name", "name:i" or "^name"; data inputs before control inputs;
//     each names a node of the graph and an output it has, of the dtype the
//     consumer expects; as many data inputs as the op takes; no control
//     input listed twice (one tensor used twice as data, as in Mul(x, x), is
//     fine);
//   - no cycles (the error spells one out: 'a' -> 'b' -> 'a'); then shapes
//     are inferred node by node in topological order and a shape
//     function's error names its node.
//
// Round trip: nodes keep the GraphDef's order and their NodeDef (including
// fields Strata's proto does not declare), and the Graph keeps the
// GraphDef's own unknown fields (TensorFlow's `library`, `debug_info`), so
// ToGraphDef gives back the same GraphDef. One exception, by design: an attr
// the NodeDef left out is filled with its default on import and written on
// export (export always writes complete attrs, as TensorFlow's does). A
// GraphDef with complete attrs, which Strata's builder and TensorFlow both
// write, round-trips exactly.
//
// Thread-safety: the functions are reentrant. Ownership: ImportGraphDef(def,
// g) adds to the caller's empty Graph; nothing keeps a pointer into `def`.
#ifndef STRATA_GRAPH_GRAPH_DEF_IMPORT_H_
#define STRATA_GRAPH_GRAPH_DEF_IMPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "proto/graph.pb.h"

namespace strata {

// Imports `def` into `g`, which must be empty (FailedPrecondition otherwise).
// On error `g` is left empty again.
absl::Status ImportGraphDef(const ::tensorflow::GraphDef& def, Graph* g);

// Imports `def` into a new Graph over `ops`.
absl::StatusOr<std::unique_ptr<Graph>> ImportGraphDef(
    const ::tensorflow::GraphDef& def, const OpRegistry* ops = OpRegistry::Global());

// One entry of NodeDef.input: "a" (output 0 of a), "a:1", or "^a" (a control
// input, index kControlSlot).
struct InputName {
  std::string node;
  int index = 0;
  bool IsControl() const { return index == kControlSlot; }
};

// Parses an input string; InvalidArgument quoting it if it is malformed
// (empty, an empty node name, an index that is not a non-negative int32).
absl::StatusOr<InputName> ParseInputName(absl::string_view s);

// Checks a TensorProto without allocating its values: supported dtype, valid
// shape, value counts consistent with the shape, total size under 2 GiB.
absl::Status ValidateTensorProto(const ::tensorflow::TensorProto& p);

// Fills in default attrs for every node of `def` whose op is in `ops` (nodes
// of unknown ops are left alone). Export writes complete attrs, so a GraphDef
// with attrs left to their defaults equals its import-export round trip after
// this.
void CompleteDefaultAttrs(::tensorflow::GraphDef* def,
                          const OpRegistry* ops = OpRegistry::Global());

}  // namespace strata

#endif  // STRATA_GRAPH_GRAPH_DEF_IMPORT_H_
