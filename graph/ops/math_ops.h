// The math op family: elementwise arithmetic (NumPy broadcasting), AddN,
// MatMul, reductions (Sum, Mean, Max, Min), ArgMax, Equal, Select/SelectV2
// and Cast. Op names, inputs, outputs and attrs are TensorFlow's, so a
// GraphDef written by TensorFlow imports unchanged; shape functions run as
// nodes are added and name the node in their errors.
//
//   Scope root = Scope::NewRootScope();
//   Output y = ops::MatMul(root, x, w, ops::MatMul::Attrs().TransposeB(true));
//   Output z = ops::AddV2(root, y, b);                        // broadcasts
//   Output loss = ops::Mean(root, ops::Square(root, z), axes,  // axes: an int32 Output
//                           ops::ReductionAttrs().KeepDims(false));
//   if (!root.ok()) return root.status();
//
// Each builder function adds one node and returns its output; if the scope
// already holds an error, or adding the node fails (bad dtype, shapes that
// do not fit), the scope records the error and the returned Output's node is
// nullptr.
//
// Thread-safety and ownership: as for Scope (graph/scope.h): one thread per
// graph while building; the Graph owns the nodes.
#ifndef STRATA_GRAPH_OPS_MATH_OPS_H_
#define STRATA_GRAPH_OPS_MATH_OPS_H_

#include "absl/status/status.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

// The kernels' check of ClipByValue's operands: InvalidArgument naming a
// bound that is neither a scalar nor of t's shape.
absl::Status CheckClipByValueBounds(const TensorShape& t, const TensorShape& clip_value_min,
                                    const TensorShape& clip_value_max);

namespace ops {

// Binary elementwise ops with NumPy broadcasting: z = x op y.
Output Add(const Scope& s, Output x, Output y);  // TF1's Add
Output AddV2(const Scope& s, Output x, Output y);
Output Sub(const Scope& s, Output x, Output y);
Output SquaredDifference(const Scope& s, Output x, Output y);  // (x - y)^2
Output Mul(const Scope& s, Output x, Output y);
Output RealDiv(const Scope& s, Output x, Output y);
Output Pow(const Scope& s, Output x, Output y);
Output Maximum(const Scope& s, Output x, Output y);
Output Minimum(const Scope& s, Output x, Output y);

// x == y elementwise (bool). With incompatible_shape_error false, shapes that
// do not broadcast give a scalar false instead of an error.
struct Equal {
  struct Attrs {
    Attrs IncompatibleShapeError(bool v) const {
      Attrs a = *this;
      a.incompatible_shape_error = v;
      return a;
    }
    bool incompatible_shape_error = true;
  };
};
Output Equal(const Scope& s, Output x, Output y, const Equal::Attrs& attrs = {});
// Comparisons and logical ops (bool results, operands broadcast); none has a
// gradient.
Output NotEqual(const Scope& s, Output x, Output y);
Output Less(const Scope& s, Output x, Output y);
Output LessEqual(const Scope& s, Output x, Output y);
Output Greater(const Scope& s, Output x, Output y);
Output GreaterEqual(const Scope& s, Output x, Output y);
Output LogicalAnd(const Scope& s, Output x, Output y);
Output LogicalOr(const Scope& s, Output x, Output y);
Output LogicalNot(const Scope& s, Output x);

// Unary elementwise ops: y = f(x).
Output Neg(const Scope& s, Output x);
Output Square(const Scope& s, Output x);
Output Sqrt(const Scope& s, Output x);
Output Rsqrt(const Scope& s, Output x);
Output Exp(const Scope& s, Output x);
Output Erf(const Scope& s, Output x);   // the error function (GELU)
Output Erfc(const Scope& s, Output x);  // 1 - erf(x)
Output Log(const Scope& s, Output x);
Output Floor(const Scope& s, Output x);  // largest integer <= x (no gradient)

// t clipped to [clip_value_min, clip_value_max]; each bound is a scalar or
// of t's shape (tf.clip_by_value). The gradient flows to t where it is
// inside the bounds, to a bound where t is beyond it.
Output ClipByValue(const Scope& s, Output t, Output clip_value_min, Output clip_value_max);

// Running sums of x along `axis` (a scalar): out[i] = x[0] + ... + x[i];
// `exclusive` leaves x[i] out, `reverse` sums from the end (tf.cumsum).
Output Cumsum(const Scope& s, Output x, Output axis, bool exclusive = false, bool reverse = false);
// Running products, likewise (tf.math.cumprod; an exclusive one starts at 1).
Output Cumprod(const Scope& s, Output x, Output axis, bool exclusive = false, bool reverse = false);

// The sum of N >= 1 tensors of one dtype and shape.
Output AddN(const Scope& s, const OutputList& inputs);

// a @ b for rank-2 a and b (optionally transposed first).
struct MatMul {
  struct Attrs {
    Attrs TransposeA(bool v) const {
      Attrs a = *this;
      a.transpose_a = v;
      return a;
    }
    Attrs TransposeB(bool v) const {
      Attrs a = *this;
      a.transpose_b = v;
      return a;
    }
    bool transpose_a = false;
    bool transpose_b = false;
  };
};
Output MatMul(const Scope& s, Output a, Output b, const MatMul::Attrs& attrs = {});

// x [..., r, c] · y [..., r', c'] per batch, the batch dims broadcast;
// adj_x / adj_y transpose the last two dims of x / y first.
struct BatchMatMulV2 {
  struct Attrs {
    Attrs AdjX(bool v) const {
      Attrs a = *this;
      a.adj_x = v;
      return a;
    }
    Attrs AdjY(bool v) const {
      Attrs a = *this;
      a.adj_y = v;
      return a;
    }
    bool adj_x = false;
    bool adj_y = false;
  };
};
Output BatchMatMulV2(const Scope& s, Output x, Output y, const BatchMatMulV2::Attrs& attrs = {});

// Attrs of Sum, Mean, Max and Min.
struct ReductionAttrs {
  ReductionAttrs KeepDims(bool v) const {
    ReductionAttrs a = *this;
    a.keep_dims = v;
    return a;
  }
  bool keep_dims = false;
};
// Reduce `input` over the dims in `axis` (an int32 or int64 scalar or
// vector; negative values count from the end; an empty vector reduces
// nothing).
Output Sum(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs = {});
Output Mean(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs = {});
Output Max(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs = {});
Output Min(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs = {});
// The product (1 over an empty set); its gradient is zero-safe (products of
// the other elements, not y / x).
Output Prod(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs = {});

// Index of the largest value along `dimension` (an int32/int64 scalar); ties
// go to the smallest index.
struct ArgMax {
  struct Attrs {
    Attrs OutputType(DataType v) const {
      Attrs a = *this;
      a.output_type = v;
      return a;
    }
    DataType output_type = DT_INT64;
  };
};
Output ArgMax(const Scope& s, Output input, Output dimension, const ArgMax::Attrs& attrs = {});

// condition ? t : e. Select: t and e have one shape; condition has that
// shape, or is a scalar, or a vector picking whole rows of t/e. SelectV2:
// the three broadcast (NumPy rules).
Output Select(const Scope& s, Output condition, Output t, Output e);
Output SelectV2(const Scope& s, Output condition, Output t, Output e);

// x converted to `dst`: float to integer truncates toward zero, to bool is
// x != 0. `truncate` (TensorFlow's, for rounding into half types) is kept on
// the node for compatibility.
Output Cast(const Scope& s, Output x, DataType dst, bool truncate = false);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_MATH_OPS_H_
