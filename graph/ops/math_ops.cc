#include "graph/ops/math_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {
namespace {

// Type lists are TensorFlow's allowed types for each op, less those Strata
// has no name for (complex, string, quantized): a TensorFlow graph using a
// listed type validates here, and a missing kernel is reported by kernel
// lookup naming the dtype rather than as a schema mismatch.
#define STRATA_FLOATS "bfloat16, half, float, double"
#define STRATA_SIGNED_INTS "int8, int16, int32, int64"
#define STRATA_UNSIGNED_INTS "uint8, uint16, uint32, uint64"
#define STRATA_NUMBER_TYPES STRATA_FLOATS ", " STRATA_SIGNED_INTS ", " STRATA_UNSIGNED_INTS

// ---------------------------------------------------------------------------
// Shape functions.

absl::Status AddNShape(InferenceContext& c) {
  PartialTensorShape out = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    auto merged = out.Merge(c.input(i));
    if (!merged.ok()) {
      return c.Error(absl::StrCat("input ", i, " has shape ", c.input(i).DebugString(),
                                  ", incompatible with ", out.DebugString()));
    }
    out = *std::move(merged);
  }
  c.set_output(0, out);
  return absl::OkStatus();
}

absl::Status MatMulShape(InferenceContext& c) {
  PartialTensorShape a, b;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 2, &a));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 2, &b));
  bool ta, tb;
  STRATA_RETURN_IF_ERROR(c.GetAttr("transpose_a", &ta));
  STRATA_RETURN_IF_ERROR(c.GetAttr("transpose_b", &tb));
  const int64_t m = a.dim_size(ta ? 1 : 0), ka = a.dim_size(ta ? 0 : 1);
  const int64_t kb = b.dim_size(tb ? 1 : 0), n = b.dim_size(tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return c.Error(absl::StrCat("inner dimensions must agree, but a has shape ", a.DebugString(),
                                " (transpose_a=", ta, ") and b has shape ", b.DebugString(),
                                " (transpose_b=", tb, "): ", ka, " vs ", kb));
  }
  c.set_output(0, PartialTensorShape({m, n}));
  return absl::OkStatus();
}

// x [..., r, c] and y [..., r', c'] with broadcast batch dims.
absl::Status BatchMatMulShape(InferenceContext& c) {
  const PartialTensorShape& x = c.input(0);
  const PartialTensorShape& y = c.input(1);
  bool adj_x, adj_y;
  STRATA_RETURN_IF_ERROR(c.GetAttr("adj_x", &adj_x));
  STRATA_RETURN_IF_ERROR(c.GetAttr("adj_y", &adj_y));
  if ((!x.unknown_rank() && x.dims() < 2) || (!y.unknown_rank() && y.dims() < 2)) {
    return c.Error(absl::StrCat("x and y need at least 2 dims, got ", x.DebugString(), " and ", y.DebugString()));
  }
  if (x.unknown_rank() || y.unknown_rank()) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  const int xr = x.dims(), yr = y.dims();
  const int64_t m = x.dim_size(adj_x ? xr - 1 : xr - 2), kx = x.dim_size(adj_x ? xr - 2 : xr - 1);
  const int64_t ky = y.dim_size(adj_y ? yr - 1 : yr - 2), n = y.dim_size(adj_y ? yr - 2 : yr - 1);
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return c.Error(absl::StrCat("inner dimensions must agree, but x has shape ", x.DebugString(), " (adj_x=", adj_x,
                                ") and y has shape ", y.DebugString(), " (adj_y=", adj_y, "): ", kx, " vs ", ky));
  }
  std::vector<int64_t> xb(x.dim_sizes().begin(), x.dim_sizes().end() - 2);
  std::vector<int64_t> yb(y.dim_sizes().begin(), y.dim_sizes().end() - 2);
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape batch, BroadcastShapes(PartialTensorShape(xb), PartialTensorShape(yb)));
  std::vector<int64_t> out(batch.dim_sizes().begin(), batch.dim_sizes().end());
  out.push_back(m);
  out.push_back(n);
  c.set_output(0, PartialTensorShape(out));
  return absl::OkStatus();
}

// Reads a constant int16/int32/int64 tensor's values (the Tidx types).
std::vector<int64_t> IndexValues(const Tensor& t) {
  std::vector<int64_t> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    switch (t.dtype()) {
      case DT_INT16: v[i] = t.data<int16_t>()[i]; break;
      case DT_INT32: v[i] = t.data<int32_t>()[i]; break;
      default: v[i] = t.data<int64_t>()[i]; break;
    }
  }
  return v;
}

// ClipByValue: each bound is a scalar or of t's shape.
absl::Status ClipByValueShape(InferenceContext& c) {
  const PartialTensorShape& t = c.input(0);
  for (int i = 1; i <= 2; ++i) {
    const PartialTensorShape& b = c.input(i);
    if (b.unknown_rank() || b.dims() == 0) continue;
    if (!b.IsCompatibleWith(t)) {
      return c.Error(absl::StrCat("ClipByValue ", i == 1 ? "clip_value_min" : "clip_value_max", " ",
                                  b.DebugString(), " is neither a scalar nor of t's shape ", t.DebugString()));
    }
  }
  c.set_output(0, t);
  return absl::OkStatus();
}

// Cumsum: x's shape; a scalar axis in [-rank, rank).
absl::Status CumsumShape(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 0, &unused));
  STRATA_ASSIGN_OR_RETURN(auto axis, ConstIntInput(c, 1, "Cumsum axis"));
  const PartialTensorShape& x = c.input(0);
  if (axis && !x.unknown_rank()) {
    if (x.dims() == 0) return c.Error("Cumsum of a scalar (x needs rank >= 1)");
    absl::StatusOr<int> a = NormalizeAxis((*axis)[0], x.dims(), "Cumsum axis");
    if (!a.ok()) return c.Annotate(a.status());
  }
  c.set_output(0, x);
  return absl::OkStatus();
}

absl::Status ReductionShape(InferenceContext& c) {
  bool keep_dims;
  STRATA_RETURN_IF_ERROR(c.GetAttr("keep_dims", &keep_dims));
  const PartialTensorShape& in = c.input(0);
  const PartialTensorShape& axes_shape = c.input(1);
  if (axes_shape.dims() > 1) {
    return c.Error(absl::StrCat("reduction_indices must be a scalar or vector, but has shape ",
                                axes_shape.DebugString()));
  }
  const Tensor* axes = c.input_tensor(1);
  if (axes == nullptr) {
    // Unknown axes: with keep_dims the rank survives; an empty axis list
    // reduces nothing.
    if (axes_shape.dims() == 1 && axes_shape.dim_size(0) == 0) {
      c.set_output(0, in);
    } else if (keep_dims && !in.unknown_rank()) {
      c.set_output(0, PartialTensorShape(DimVector(in.dims(), -1)));
    } else {
      c.set_output(0, PartialTensorShape::UnknownRank());
    }
    return absl::OkStatus();
  }
  if (in.unknown_rank()) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  const int rank = in.dims();
  std::vector<bool> reduce(rank, false);
  for (int64_t a : IndexValues(*axes)) {
    if (a < -rank || a >= rank) {
      return c.Error(absl::StrCat("Invalid reduction dimension ", a, " for input with ", rank,
                                  " dimensions (shape ", in.DebugString(), ")"));
    }
    reduce[a < 0 ? a + rank : a] = true;
  }
  DimVector out;
  for (int d = 0; d < rank; ++d) {
    if (!reduce[d]) {
      out.push_back(in.dim_size(d));
    } else if (keep_dims) {
      out.push_back(1);
    }
  }
  c.set_output(0, PartialTensorShape(out));
  return absl::OkStatus();
}

absl::Status ArgMaxShape(InferenceContext& c) {
  PartialTensorShape in, dim_shape;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 1, &in));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 0, &dim_shape));
  const Tensor* dim = c.input_tensor(1);
  if (in.unknown_rank()) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  const int rank = in.dims();
  if (dim == nullptr) {
    c.set_output(0, PartialTensorShape(DimVector(rank - 1, -1)));
    return absl::OkStatus();
  }
  int64_t d = IndexValues(*dim)[0];
  if (d < -rank || d >= rank) {
    return c.Error(absl::StrCat("Expected dimension in the range [", -rank, ", ", rank,
                                "), but got ", d));
  }
  if (d < 0) d += rank;
  DimVector out;
  for (int i = 0; i < rank; ++i) {
    if (i != d) out.push_back(in.dim_size(i));
  }
  c.set_output(0, PartialTensorShape(out));
  return absl::OkStatus();
}

absl::Status EqualShape(InferenceContext& c) {
  bool strict;
  STRATA_RETURN_IF_ERROR(c.GetAttr("incompatible_shape_error", &strict));
  auto s = BroadcastShapes(c.input(0), c.input(1));
  if (s.ok()) {
    c.set_output(0, *s);
    return absl::OkStatus();
  }
  if (strict) return c.Annotate(s.status());
  // The kernel answers a scalar false; the builder cannot know which case
  // unknown dims will take, so say nothing.
  c.set_output(0, PartialTensorShape::UnknownRank());
  return absl::OkStatus();
}

absl::Status SelectShape(InferenceContext& c) {
  auto te = c.input(1).Merge(c.input(2));
  if (!te.ok()) {
    return c.Error(absl::StrCat("t and e must have the same shape, but have ",
                                c.input(1).DebugString(), " and ", c.input(2).DebugString()));
  }
  const PartialTensorShape& cond = c.input(0);
  PartialTensorShape out = *std::move(te);
  if (!cond.unknown_rank() && !out.unknown_rank() && cond.dims() != 0) {
    if (cond.dims() == 1 && out.dims() > 1) {
      int64_t d0;
      STRATA_RETURN_IF_ERROR(c.MergeDim(cond.dim_size(0), out.dim_size(0), &d0,
                                        "condition vector length vs first dimension of t"));
      DimVector dims(out.dim_sizes().begin(), out.dim_sizes().end());
      dims[0] = d0;
      out = PartialTensorShape(dims);
    } else {
      auto merged = out.Merge(cond);
      if (!merged.ok()) {
        return c.Error(absl::StrCat("condition has shape ", cond.DebugString(),
                                    " but t and e have shape ", out.DebugString(),
                                    "; it must match them, be a scalar, or be a vector of ",
                                    "their first dimension"));
      }
      out = *std::move(merged);
    }
  }
  c.set_output(0, out);
  return absl::OkStatus();
}

absl::Status SelectV2Shape(InferenceContext& c) {
  auto te = BroadcastShapes(c.input(1), c.input(2));
  if (!te.ok()) return c.Annotate(te.status());
  auto out = BroadcastShapes(c.input(0), *te);
  if (!out.ok()) return c.Annotate(out.status());
  c.set_output(0, *out);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Registrations.

#define STRATA_REGISTER_BINARY(name, types)                    \
  STRATA_REGISTER_OP(name)                                      \
      .Input("x: T")                                           \
      .Input("y: T")                                           \
      .Output("z: T")                                          \
      .Attr("T: {" types "}")                                  \
      .SetShapeFn(BroadcastBinaryOpShape)
#define STRATA_REGISTER_UNARY(name, types) \
  STRATA_REGISTER_OP(name)                  \
      .Input("x: T")                       \
      .Output("y: T")                      \
      .Attr("T: {" types "}")              \
      .SetShapeFn(UnchangedShape)

STRATA_REGISTER_BINARY("Add", STRATA_FLOATS ", uint8, " STRATA_SIGNED_INTS);
STRATA_REGISTER_BINARY("AddV2", STRATA_NUMBER_TYPES).SetIsCommutative();
STRATA_REGISTER_BINARY("Sub", STRATA_NUMBER_TYPES);
STRATA_REGISTER_BINARY("SquaredDifference", STRATA_NUMBER_TYPES).SetIsCommutative();
STRATA_REGISTER_BINARY("Mul", STRATA_NUMBER_TYPES).SetIsCommutative();
STRATA_REGISTER_BINARY("RealDiv", STRATA_NUMBER_TYPES);
STRATA_REGISTER_BINARY("Pow", STRATA_FLOATS ", " STRATA_SIGNED_INTS);
STRATA_REGISTER_BINARY("Maximum", STRATA_NUMBER_TYPES);
STRATA_REGISTER_BINARY("Minimum", STRATA_NUMBER_TYPES);

STRATA_REGISTER_UNARY("Neg", STRATA_FLOATS ", " STRATA_SIGNED_INTS);
STRATA_REGISTER_UNARY("Square", STRATA_NUMBER_TYPES);
STRATA_REGISTER_UNARY("Sqrt", STRATA_FLOATS);
STRATA_REGISTER_UNARY("Rsqrt", STRATA_FLOATS);
STRATA_REGISTER_UNARY("Exp", STRATA_FLOATS);
STRATA_REGISTER_UNARY("Erf", STRATA_FLOATS);
STRATA_REGISTER_UNARY("Erfc", STRATA_FLOATS);
STRATA_REGISTER_UNARY("Log", STRATA_FLOATS);

STRATA_REGISTER_OP("Equal")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetIsCommutative()
    .SetShapeFn(EqualShape);

STRATA_REGISTER_OP("NotEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetIsCommutative()
    .SetShapeFn(EqualShape);

#define STRATA_REGISTER_COMPARISON(name)                                           \
  STRATA_REGISTER_OP(name)                                                         \
      .Input("x: T")                                                               \
      .Input("y: T")                                                               \
      .Output("z: bool")                                                           \
      .Attr("T: {" STRATA_FLOATS ", " STRATA_SIGNED_INTS ", " STRATA_UNSIGNED_INTS "}") \
      .SetShapeFn(BroadcastBinaryOpShape)
STRATA_REGISTER_COMPARISON("Less");
STRATA_REGISTER_COMPARISON("LessEqual");
STRATA_REGISTER_COMPARISON("Greater");
STRATA_REGISTER_COMPARISON("GreaterEqual");
#undef STRATA_REGISTER_COMPARISON

STRATA_REGISTER_OP("LogicalAnd")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetIsCommutative()
    .SetShapeFn(BroadcastBinaryOpShape);

STRATA_REGISTER_OP("LogicalOr")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetIsCommutative()
    .SetShapeFn(BroadcastBinaryOpShape);

STRATA_REGISTER_OP("LogicalNot").Input("x: bool").Output("y: bool").SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("AddN")
    .Input("inputs: N * T")
    .Output("sum: T")
    .Attr("N: int >= 1")
    .Attr("T: {" STRATA_NUMBER_TYPES "}")
    .SetIsCommutative()
    .SetShapeFn(AddNShape);

STRATA_REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {" STRATA_FLOATS ", int32, int64, " STRATA_UNSIGNED_INTS "}")
    .Attr("grad_a: bool = false")
    .Attr("grad_b: bool = false")
    .SetShapeFn(MatMulShape);

STRATA_REGISTER_OP("BatchMatMulV2")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: {" STRATA_FLOATS ", int16, int32, int64}")
    .Attr("adj_x: bool = false")
    .Attr("adj_y: bool = false")
    // Recent TensorFlow marks the matmuls its gradients build; no effect here.
    .Attr("grad_x: bool = false")
    .Attr("grad_y: bool = false")
    .SetShapeFn(BatchMatMulShape);

#define STRATA_REGISTER_REDUCTION(name)             \
  STRATA_REGISTER_OP(name)                          \
      .Input("input: T")                            \
      .Input("reduction_indices: Tidx")             \
      .Output("output: T")                          \
      .Attr("keep_dims: bool = false")              \
      .Attr("T: {" STRATA_NUMBER_TYPES "}")         \
      .Attr("Tidx: {int32, int64} = int32")         \
      .SetShapeFn(ReductionShape)

STRATA_REGISTER_REDUCTION("Sum");
STRATA_REGISTER_REDUCTION("Mean");
STRATA_REGISTER_REDUCTION("Max");
STRATA_REGISTER_REDUCTION("Min");
STRATA_REGISTER_REDUCTION("Prod");

STRATA_REGISTER_OP("ArgMax")
    .Input("input: T")
    .Input("dimension: Tidx")
    .Output("output: output_type")
    .Attr("T: {" STRATA_NUMBER_TYPES ", bool}")
    .Attr("Tidx: {int16, int32, int64} = int32")
    .Attr("output_type: {int16, uint16, int32, int64} = int64")
    .SetShapeFn(ArgMaxShape);

STRATA_REGISTER_OP("Select")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectShape);

STRATA_REGISTER_OP("SelectV2")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectV2Shape);

STRATA_REGISTER_UNARY("Floor", STRATA_FLOATS);

// t clipped to [clip_value_min, clip_value_max], each bound a scalar or of
// t's shape.
STRATA_REGISTER_OP("ClipByValue")
    .Input("t: T")
    .Input("clip_value_min: T")
    .Input("clip_value_max: T")
    .Output("output: T")
    .Attr("T: {" STRATA_FLOATS ", " STRATA_SIGNED_INTS "}")
    .SetShapeFn(ClipByValueShape);

STRATA_REGISTER_OP("Cumsum")
    .Input("x: T")
    .Input("axis: Tidx")
    .Output("out: T")
    .Attr("exclusive: bool = false")
    .Attr("reverse: bool = false")
    .Attr("T: {" STRATA_NUMBER_TYPES "}")
    .Attr("Tidx: {int32, int64} = int32")
    .SetShapeFn(CumsumShape);

STRATA_REGISTER_OP("Cumprod")
    .Input("x: T")
    .Input("axis: Tidx")
    .Output("out: T")
    .Attr("exclusive: bool = false")
    .Attr("reverse: bool = false")
    .Attr("T: {" STRATA_NUMBER_TYPES "}")
    .Attr("Tidx: {int32, int64} = int32")
    .SetShapeFn(CumsumShape);

STRATA_REGISTER_OP("Cast")
    .Input("x: SrcT")
    .Output("y: DstT")
    .Attr("SrcT: type")
    .Attr("DstT: type")
    .Attr("Truncate: bool = false")
    .SetShapeFn(UnchangedShape);

// ---------------------------------------------------------------------------
// Builder helpers.

Output Result(Node* n) { return n == nullptr ? Output() : Output(n, 0); }

Output Binary(const Scope& s, const char* op, Output x, Output y) {
  return Result(NodeBuilder(s, op).Input(x).Input(y).Finalize());
}

Output Unary(const Scope& s, const char* op, Output x) {
  return Result(NodeBuilder(s, op).Input(x).Finalize());
}

Output Reduction(const Scope& s, const char* op, Output input, Output axis,
                 const ops::ReductionAttrs& attrs) {
  NodeBuilder b(s, op);
  b.Input(input).Input(axis).Attr("keep_dims", attrs.keep_dims);
  return Result(b.Finalize());
}

}  // namespace

namespace ops {

Output Add(const Scope& s, Output x, Output y) { return Binary(s, "Add", x, y); }
Output AddV2(const Scope& s, Output x, Output y) { return Binary(s, "AddV2", x, y); }
Output Sub(const Scope& s, Output x, Output y) { return Binary(s, "Sub", x, y); }
Output SquaredDifference(const Scope& s, Output x, Output y) { return Binary(s, "SquaredDifference", x, y); }
Output Mul(const Scope& s, Output x, Output y) { return Binary(s, "Mul", x, y); }
Output RealDiv(const Scope& s, Output x, Output y) { return Binary(s, "RealDiv", x, y); }
Output Pow(const Scope& s, Output x, Output y) { return Binary(s, "Pow", x, y); }
Output Maximum(const Scope& s, Output x, Output y) { return Binary(s, "Maximum", x, y); }
Output Minimum(const Scope& s, Output x, Output y) { return Binary(s, "Minimum", x, y); }

Output Equal(const Scope& s, Output x, Output y, const Equal::Attrs& attrs) {
  return Result(NodeBuilder(s, "Equal")
                    .Input(x)
                    .Input(y)
                    .Attr("incompatible_shape_error", attrs.incompatible_shape_error)
                    .Finalize());
}

Output NotEqual(const Scope& s, Output x, Output y) { return Binary(s, "NotEqual", x, y); }
Output Less(const Scope& s, Output x, Output y) { return Binary(s, "Less", x, y); }
Output LessEqual(const Scope& s, Output x, Output y) { return Binary(s, "LessEqual", x, y); }
Output Greater(const Scope& s, Output x, Output y) { return Binary(s, "Greater", x, y); }
Output GreaterEqual(const Scope& s, Output x, Output y) { return Binary(s, "GreaterEqual", x, y); }
Output LogicalAnd(const Scope& s, Output x, Output y) { return Binary(s, "LogicalAnd", x, y); }
Output LogicalOr(const Scope& s, Output x, Output y) { return Binary(s, "LogicalOr", x, y); }
Output LogicalNot(const Scope& s, Output x) { return Unary(s, "LogicalNot", x); }

Output Neg(const Scope& s, Output x) { return Unary(s, "Neg", x); }
Output Square(const Scope& s, Output x) { return Unary(s, "Square", x); }
Output Sqrt(const Scope& s, Output x) { return Unary(s, "Sqrt", x); }
Output Rsqrt(const Scope& s, Output x) { return Unary(s, "Rsqrt", x); }
Output Exp(const Scope& s, Output x) { return Unary(s, "Exp", x); }
Output Erf(const Scope& s, Output x) { return Unary(s, "Erf", x); }
Output Erfc(const Scope& s, Output x) { return Unary(s, "Erfc", x); }
Output Log(const Scope& s, Output x) { return Unary(s, "Log", x); }
Output Floor(const Scope& s, Output x) { return Unary(s, "Floor", x); }

Output ClipByValue(const Scope& s, Output t, Output clip_value_min, Output clip_value_max) {
  return Result(NodeBuilder(s, "ClipByValue").Input(t).Input(clip_value_min).Input(clip_value_max).Finalize());
}

Output Cumsum(const Scope& s, Output x, Output axis, bool exclusive, bool reverse) {
  return Result(NodeBuilder(s, "Cumsum")
                    .Input(x)
                    .Input(axis)
                    .Attr("exclusive", exclusive)
                    .Attr("reverse", reverse)
                    .Finalize());
}

Output Cumprod(const Scope& s, Output x, Output axis, bool exclusive, bool reverse) {
  return Result(NodeBuilder(s, "Cumprod")
                    .Input(x)
                    .Input(axis)
                    .Attr("exclusive", exclusive)
                    .Attr("reverse", reverse)
                    .Finalize());
}

Output AddN(const Scope& s, const OutputList& inputs) {
  return Result(NodeBuilder(s, "AddN").Input(inputs).Finalize());
}

Output MatMul(const Scope& s, Output a, Output b, const MatMul::Attrs& attrs) {
  return Result(NodeBuilder(s, "MatMul")
                    .Input(a)
                    .Input(b)
                    .Attr("transpose_a", attrs.transpose_a)
                    .Attr("transpose_b", attrs.transpose_b)
                    .Finalize());
}

Output BatchMatMulV2(const Scope& s, Output x, Output y, const BatchMatMulV2::Attrs& attrs) {
  return Result(NodeBuilder(s, "BatchMatMulV2")
                    .Input(x)
                    .Input(y)
                    .Attr("adj_x", attrs.adj_x)
                    .Attr("adj_y", attrs.adj_y)
                    .Finalize());
}

Output Sum(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs) {
  return Reduction(s, "Sum", input, axis, attrs);
}
Output Mean(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs) {
  return Reduction(s, "Mean", input, axis, attrs);
}
Output Max(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs) {
  return Reduction(s, "Max", input, axis, attrs);
}
Output Min(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs) {
  return Reduction(s, "Min", input, axis, attrs);
}
Output Prod(const Scope& s, Output input, Output axis, const ReductionAttrs& attrs) {
  return Reduction(s, "Prod", input, axis, attrs);
}

Output ArgMax(const Scope& s, Output input, Output dimension, const ArgMax::Attrs& attrs) {
  NodeBuilder b(s, "ArgMax");
  b.Input(input).Input(dimension).Attr("output_type", attrs.output_type);
  return Result(b.Finalize());
}

Output Select(const Scope& s, Output condition, Output t, Output e) {
  return Result(NodeBuilder(s, "Select").Input(condition).Input(t).Input(e).Finalize());
}

Output SelectV2(const Scope& s, Output condition, Output t, Output e) {
  return Result(NodeBuilder(s, "SelectV2").Input(condition).Input(t).Input(e).Finalize());
}

Output Cast(const Scope& s, Output x, DataType dst, bool truncate) {
  return Result(
      NodeBuilder(s, "Cast").Input(x).Attr("DstT", dst).Attr("Truncate", truncate).Finalize());
}

}  // namespace ops

absl::Status CheckClipByValueBounds(const TensorShape& t, const TensorShape& clip_value_min,
                                    const TensorShape& clip_value_max) {
  for (const TensorShape* b : {&clip_value_min, &clip_value_max}) {
    if (b->dims() != 0 && *b != t) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ClipByValue ", b == &clip_value_min ? "clip_value_min" : "clip_value_max", " ",
          b->DebugString(), " is neither a scalar nor of t's shape ", t.DebugString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace strata
