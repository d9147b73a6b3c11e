// The core op family: Const, Placeholder, Identity and NoOp, plus the
// runtime's internal ops that the session inserts when it plans a step:
// _Arg / _Retval (a step's feeds and fetches, through kernels/call_frame.h)
// and _Send / _Recv (a tensor crossing from one device partition to another,
// through kernels/rendezvous.h). Names, inputs, outputs and attrs are
// TensorFlow's, so a GraphDef written by TensorFlow imports unchanged.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 3}));
//   Output w = ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, TensorShape{3, 2});
//   Output one = ops::Const(root, 1.0f);                 // a float scalar
//   Output y = ops::Identity(root, w);
//   Node* init = ops::NoOp(root.WithControlDependencies({y.node()}));
//   if (!root.ok()) return root.status();
//
// Each builder function adds one node; if the scope already holds an error or
// adding the node fails, the scope records the error and the returned Output's
// node is nullptr (NoOp returns nullptr).
//
// Thread-safety and ownership: as for Scope (graph/scope.h): one thread per
// graph while building; the Graph owns the nodes.
#ifndef STRATA_GRAPH_OPS_CORE_OPS_H_
#define STRATA_GRAPH_OPS_CORE_OPS_H_

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "graph/scope.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace ops {

// A constant holding `value` (copied into the node's `value` attr).
Output Const(const Scope& s, const Tensor& value);

// A constant of the given values with `shape` (its element count must match
// the number of values; the scope records InvalidArgument otherwise).
template <typename T>
Output Const(const Scope& s, std::initializer_list<T> values, const TensorShape& shape);
template <typename T>
Output Const(const Scope& s, const std::vector<T>& values, const TensorShape& shape);
// A rank-1 constant of the values.
template <typename T>
Output Const(const Scope& s, std::initializer_list<T> values) {
  return Const<T>(s, values, TensorShape{static_cast<int64_t>(values.size())});
}
template <typename T>
Output Const(const Scope& s, const std::vector<T>& values) {
  return Const<T>(s, values, TensorShape{static_cast<int64_t>(values.size())});
}
// A scalar constant: ops::Const(scope, 1.0f), ops::Const(scope, int64_t{3}).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
Output Const(const Scope& s, T value) {
  return Const(s, Tensor::Scalar<T>(value));
}

// A value that must be fed when a step needs it. `shape` may be partial; a
// fed tensor must be compatible with it.
Output Placeholder(const Scope& s, DataType dtype,
                   const PartialTensorShape& shape = PartialTensorShape::UnknownRank());

// Its input, unchanged (the buffer is passed through, not copied).
Output Identity(const Scope& s, Output input);
// The identity that backpropagation stops at (TensorFlow's StopGradient).
Output StopGradient(const Scope& s, Output input);

// Does nothing; a target that groups control dependencies (those of the scope).
Node* NoOp(const Scope& s);

// Conditionals without functions (TensorFlow's Switch and Merge; the
// executor's deadness, runtime/executor.h). A value is computed on one of
// two branches for a step:
//
//   auto [if_false, if_true] = ops::Switch(s, x, pred);   // pred: bool scalar
//   Output a = ops::Mul(s, if_true, two);                 // runs when pred
//   Output b = ops::Neg(s, if_false);                     // runs otherwise
//   Output y = ops::Merge(s, {a, b}).output;              // whichever ran
//
// Nodes fed (by data or control edges) only from the branch not taken do not
// run; side effects (assignments, collectives) in a branch happen only when
// it is taken. Every replica of a collective must take the same branch.
struct SwitchOutputs {
  Output output_false;
  Output output_true;
};
SwitchOutputs Switch(const Scope& s, Output data, Output pred);
struct MergeOutputs {
  Output output;
  Output value_index;  // int32: which input was live
};
MergeOutputs Merge(const Scope& s, const OutputList& inputs);

// ---- Internal ops (the session adds these; user graphs rarely need them) ----

// Step argument `index` of dtype `dtype` (a feed).
Output Arg(const Scope& s, DataType dtype, int index);
// Makes `input` step result `index` (a fetch).
Node* Retval(const Scope& s, Output input, int index);

// The attrs shared by _Send and _Recv: which edge, between which devices.
struct SendRecvAttrs {
  std::string tensor_name;
  std::string send_device;
  int64_t send_device_incarnation = 0;
  std::string recv_device;
  bool client_terminated = false;
};
Node* Send(const Scope& s, Output tensor, const SendRecvAttrs& attrs);
Output Recv(const Scope& s, DataType dtype, const SendRecvAttrs& attrs);

// ---- Template definitions ----

template <typename T>
Output Const(const Scope& s, const std::vector<T>& values, const TensorShape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    s.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "building node '", s.GetUniqueNameForOp("Const"), "': Const has ", values.size(),
        " values but its shape ", shape.DebugString(), " holds ", shape.num_elements())));
    return Output();
  }
  return Const(s, Tensor::FromVector<T>(values, shape));
}

template <typename T>
Output Const(const Scope& s, std::initializer_list<T> values, const TensorShape& shape) {
  return Const<T>(s, std::vector<T>(values), shape);
}

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_CORE_OPS_H_
