// Helper ops that gradient graphs need and the other op families lack.
// Where TensorFlow has the op, the name, inputs, outputs and attrs are
// TensorFlow's, so a gradient graph exported from Strata imports into
// TensorFlow; ReducedShape is Strata's own (TensorFlow computes it in Python):
//
//   BroadcastGradientArgs(s0: T, s1: T) -> (r0: T, r1: T)     T in {int32, int64}
//       the axes to sum a broadcast result's gradient over to get back the
//       shapes s0 and s1 (NumPy broadcasting of s0 with s1).
//   BroadcastTo(input: T, shape: Tidx) -> output: T
//   ReducedShape(input_shape: T, axes: Tidx) -> output: T      (Strata only)
//       input_shape with every dim named by axes (negative from the end) set
//       to 1: the shape of a reduction's output under keep_dims.
//   Size(input: T) -> output: out_type                          element count
//   Pad(input: T, paddings: Tpaddings) -> output: T             zero padding;
//       paddings is [rank, 2]: (before, after) per dim.
//   ConcatOffset(concat_dim: int32, shape: N * shape_type) -> offset: N * shape_type
//       where each ConcatV2 input starts in the output.
//   Unpack(value: T; attrs num, axis) -> output: num * T        Pack's inverse
//   InvertPermutation(x: T) -> y: T                              y[x[i]] = i
//
//   Scope s = Scope::NewRootScope();
//   ops::BroadcastGradientArgsOutputs r =
//       ops::BroadcastGradientArgs(s, ops::Shape(s, x), ops::Shape(s, y));
//   Output gx = ops::Reshape(s, ops::Sum(s, grad, r.r0), ops::Shape(s, x));
//
// The shape rules below are shared by the shape functions (partial shapes)
// and the CPU kernels (kernels/cpu/grad_helper_kernels.cc, full shapes), so
// both reject the same inputs with the same messages (InvalidArgument without
// a node prefix; the shape functions and the executor add the node).
//
// Thread-safety: registrations are static; builders follow Scope's contract;
// the rule functions are pure. Ownership: as for Scope.
#ifndef STRATA_GRAPH_GRADIENTS_GRAD_OPS_H_
#define STRATA_GRAPH_GRADIENTS_GRAD_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"

namespace strata {

// The reduction axes of BroadcastGradientArgs for shapes s0 and s1 (full
// dims). An axis i of the broadcast result (rank max(|s0|, |s1|)) is in r0
// when s0, padded with leading 1s, has 1 there and the result does not (or
// s0 lacks the axis). InvalidArgument naming both shapes if they do not
// broadcast.
absl::Status BroadcastGradientAxes(absl::Span<const int64_t> s0, absl::Span<const int64_t> s1,
                                   std::vector<int64_t>* r0, std::vector<int64_t>* r1);

// BroadcastTo: `input` must broadcast to `target` (NumPy rules, the result
// being exactly `target`).
absl::Status CheckBroadcastTo(const PartialTensorShape& input, absl::Span<const int64_t> target);

// ReducedShape: `shape` with the dims in `axes` (each in [-rank, rank)) set to 1.
absl::StatusOr<std::vector<int64_t>> KeepDimsShape(absl::Span<const int64_t> shape,
                                                   absl::Span<const int64_t> axes);

// Pad: `paddings` holds rank(input) (before, after) pairs, flattened; all >= 0.
absl::StatusOr<PartialTensorShape> PadOutputShape(const PartialTensorShape& input,
                                                  absl::Span<const int64_t> paddings);

// Unpack: the shape of each output (input with dim `axis` removed; `axis` in
// [-rank, rank)); `num` must equal that dim when it is known.
absl::StatusOr<PartialTensorShape> UnpackOutputShape(const PartialTensorShape& input,
                                                     int64_t num, int64_t axis);

namespace ops {

struct BroadcastGradientArgsOutputs {
  Output r0;
  Output r1;
};
BroadcastGradientArgsOutputs BroadcastGradientArgs(const Scope& scope, Output s0, Output s1);
Output BroadcastTo(const Scope& scope, Output input, Output shape);
Output ReducedShape(const Scope& scope, Output input_shape, Output axes);
Output Size(const Scope& scope, Output input, DataType out_type = DT_INT32);
Output Pad(const Scope& scope, Output input, Output paddings);
// One offset vector per shape; `concat_dim` is an int32 scalar.
OutputList ConcatOffset(const Scope& scope, Output concat_dim, const OutputList& shapes);
// Unpack: `num` outputs (empty list if the scope holds an error).
OutputList Unstack(const Scope& scope, Output value, int64_t num, int64_t axis = 0);
Output InvertPermutation(const Scope& scope, Output x);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_GRADIENTS_GRAD_OPS_H_
