// Building blocks the gradient functions share (internal to
// //graph/gradients): constants of a gradient's dtype, shapes that are
// constants when shape inference knows them (so the gradient graph has no
// needless Shape ops and its own shapes stay inferable), and the sum that
// undoes broadcasting.
//
//   Output gx = grad::SumToShapeOf(scope, grad, x, {y.shape()});   // x + y broadcast
//   Output half = grad::ScalarConst(scope, x.type(), 0.5);
//
// Thread-safety and ownership: as for Scope; everything adds nodes through
// the given scope, and errors land in it.
#ifndef STRATA_GRAPH_GRADIENTS_GRAD_UTIL_H_
#define STRATA_GRAPH_GRADIENTS_GRAD_UTIL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/scope.h"
#include "graph/tensor_shape.h"

namespace strata {
namespace grad {

// A scalar constant of dtype `dt` (float or double; any other dtype records
// InvalidArgument in the scope and gives Output()).
Output ScalarConst(const Scope& s, DataType dt, double v);

// An int32 vector constant.
Output IntVector(const Scope& s, const std::vector<int64_t>& values);

// The values of `o` when its producer is an int32/int64 Const.
std::optional<std::vector<int64_t>> ConstIntValues(const Output& o);

// x's shape as an int32 vector: a Const when inferred fully, else Shape(x).
Output ShapeOf(const Scope& s, const Output& x);

// `t` (which has as many elements as x) reshaped to x's shape; a Const shape
// when at most one dim of x is unknown, else Shape(x).
Output ReshapeLike(const Scope& s, const Output& t, const Output& x);

// `grad`, the gradient of a broadcast result, summed down to the shape of
// operand `a`. `others` are the other operands' inferred shapes: when they
// and a's settle statically which dims broadcast, the reduction axes are a
// Const (and no op at all is added when nothing broadcasts); otherwise they
// come from BroadcastGradientArgs at run time.
Output SumToShapeOf(const Scope& s, const Output& grad, const Output& a,
                    const std::vector<PartialTensorShape>& others);

// Both operand gradients of a broadcasting binary op z = f(x, y): gx and gy
// (each shaped like z) summed to x's and y's shapes, sharing one
// BroadcastGradientArgs when either needs the run-time path.
void ReduceBinaryGrads(const Scope& s, const Output& x, const Output& y, Output gx, Output gy,
                       OutputList* grad_inputs);

// The reduction axes a Sum/Mean/Max/Min node uses, normalized to [0, rank),
// when the axes input is a Const and the input's rank is known.
std::optional<std::vector<int64_t>> StaticReductionAxes(const Output& input, const Output& axes);

// `t` (a reduction's result, or its gradient) reshaped to the shape of
// `input` reduced over `axes` with keep_dims (reduced dims set to 1): a Const
// shape when the axes and all but at most one dim are known statically, else
// ReducedShape(Shape(input), axes).
Output ReshapeToKeepDims(const Scope& s, const Output& t, const Output& input, const Output& axes);

}  // namespace grad
}  // namespace strata

#endif  // STRATA_GRAPH_GRADIENTS_GRAD_UTIL_H_
