// Op definitions, shape rules and builders of the gradient helper ops.
#include "graph/gradients/grad_ops.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

std::string DimsString(absl::Span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

}  // namespace

absl::Status BroadcastGradientAxes(absl::Span<const int64_t> s0, absl::Span<const int64_t> s1,
                                   std::vector<int64_t>* r0, std::vector<int64_t>* r1) {
  r0->clear();
  r1->clear();
  const int64_t rank = std::max(s0.size(), s1.size());
  const int64_t pad0 = rank - static_cast<int64_t>(s0.size());
  const int64_t pad1 = rank - static_cast<int64_t>(s1.size());
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t a = i < pad0 ? 1 : s0[i - pad0];
    const int64_t b = i < pad1 ? 1 : s1[i - pad1];
    if (a != b && a != 1 && b != 1) {
      return absl::InvalidArgumentError(absl::StrCat("Incompatible shapes: ", DimsString(s0),
                                                     " vs. ", DimsString(s1)));
    }
    const int64_t out = a == 1 ? b : a;
    // A size-1 dim of the result needs no sum; a missing leading dim does
    // (the caller reshapes after summing either way).
    if (i < pad0 || (a == 1 && out != 1)) r0->push_back(i);
    if (i < pad1 || (b == 1 && out != 1)) r1->push_back(i);
  }
  return absl::OkStatus();
}

absl::Status CheckBroadcastTo(const PartialTensorShape& input, absl::Span<const int64_t> target) {
  if (input.unknown_rank()) return absl::OkStatus();
  auto fail = [&] {
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast shape ", input.DebugString(),
                                                   " to ", DimsString(target)));
  };
  if (input.dims() > static_cast<int>(target.size())) return fail();
  const int pad = static_cast<int>(target.size()) - input.dims();
  for (int i = 0; i < input.dims(); ++i) {
    const int64_t d = input.dim_size(i);
    const int64_t t = target[pad + i];
    if (t < 0 && t != -1) return fail();
    if (d >= 0 && t >= 0 && d != 1 && d != t) return fail();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> KeepDimsShape(absl::Span<const int64_t> shape,
                                                   absl::Span<const int64_t> axes) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  const int rank = static_cast<int>(shape.size());
  for (int64_t a : axes) {
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank, "reduction axis"));
    out[axis] = 1;
  }
  return out;
}

absl::StatusOr<PartialTensorShape> PadOutputShape(const PartialTensorShape& input,
                                                  absl::Span<const int64_t> paddings) {
  for (int64_t p : paddings) {
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Pad paddings must be >= 0, got ", DimsString(paddings)));
    }
  }
  if (paddings.size() % 2 != 0) {
    return absl::InvalidArgumentError("Pad paddings must have shape [rank, 2]");
  }
  const int rank = static_cast<int>(paddings.size() / 2);
  if (!input.unknown_rank() && input.dims() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Pad paddings give ", rank,
                                                   " dims but the input has shape ",
                                                   input.DebugString()));
  }
  DimVector out(rank, -1);
  for (int i = 0; i < rank && !input.unknown_rank(); ++i) {
    const int64_t d = input.dim_size(i);
    if (d >= 0) out[i] = d + paddings[2 * i] + paddings[2 * i + 1];
  }
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> UnpackOutputShape(const PartialTensorShape& input,
                                                     int64_t num, int64_t axis) {
  if (input.unknown_rank()) return PartialTensorShape::UnknownRank();
  STRATA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, input.dims(), "Unpack axis"));
  const int64_t d = input.dim_size(a);
  if (d >= 0 && d != num) {
    return absl::InvalidArgumentError(absl::StrCat("Unpack num is ", num, " but dim ", a,
                                                   " of shape ", input.DebugString(), " is ", d));
  }
  DimVector out;
  for (int i = 0; i < input.dims(); ++i) {
    if (i != a) out.push_back(input.dim_size(i));
  }
  return PartialTensorShape(out);
}

namespace {

// ---- Shape functions --------------------------------------------------------

absl::Status SetOrAnnotate(InferenceContext& c, int out,
                           const absl::StatusOr<PartialTensorShape>& s) {
  if (!s.ok()) return c.Annotate(s.status());
  c.set_output(out, *s);
  return absl::OkStatus();
}

PartialTensorShape Vector(int64_t n) { return PartialTensorShape(DimVector{n}); }

absl::Status BroadcastGradientArgsShape(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 1, &unused));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto s0, ConstIntInput(c, 0, "BroadcastGradientArgs s0"));
  STRATA_ASSIGN_OR_RETURN(auto s1, ConstIntInput(c, 1, "BroadcastGradientArgs s1"));
  if (s0 && s1) {
    std::vector<int64_t> r0, r1;
    absl::Status st = BroadcastGradientAxes(*s0, *s1, &r0, &r1);
    if (!st.ok()) return c.Annotate(st);
    c.set_output(0, Vector(static_cast<int64_t>(r0.size())));
    c.set_output(1, Vector(static_cast<int64_t>(r1.size())));
    return absl::OkStatus();
  }
  c.set_output(0, Vector(-1));
  c.set_output(1, Vector(-1));
  return absl::OkStatus();
}

absl::Status BroadcastToShape(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto target, ConstIntInput(c, 1, "BroadcastTo shape"));
  if (!target) return SetOutputFromShapeInput(c, 1, "BroadcastTo shape");
  absl::Status st = CheckBroadcastTo(c.input(0), *target);
  if (!st.ok()) return c.Annotate(st);
  return SetOutputFromShapeInput(c, 1, "BroadcastTo shape");
}

absl::Status ReducedShapeShape(InferenceContext& c) {
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 1, &in));
  PartialTensorShape axes = c.input(1);
  if (!axes.unknown_rank() && axes.dims() > 1) {
    return c.Error(absl::StrCat("ReducedShape axes must be a scalar or vector, got shape ",
                                axes.DebugString()));
  }
  c.set_output(0, in);
  return absl::OkStatus();
}

absl::Status PadShape(InferenceContext& c) {
  PartialTensorShape pad;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 2, &pad));
  if (pad.dim_size(1) >= 0 && pad.dim_size(1) != 2) {
    return c.Error(absl::StrCat("Pad paddings must have shape [rank, 2], got ",
                                pad.DebugString()));
  }
  STRATA_ASSIGN_OR_RETURN(auto p, ConstIntInput(c, 1, "Pad paddings"));
  if (p) return SetOrAnnotate(c, 0, PadOutputShape(c.input(0), *p));
  int64_t rank = c.input(0).dims();
  if (rank < 0) rank = pad.dim_size(0);
  if (rank >= 0 && pad.dim_size(0) >= 0 && rank != pad.dim_size(0)) {
    return c.Error(absl::StrCat("Pad paddings have shape ", pad.DebugString(),
                                " but the input has shape ", c.input(0).DebugString()));
  }
  c.set_output(0, rank < 0 ? PartialTensorShape::UnknownRank()
                           : PartialTensorShape(DimVector(static_cast<size_t>(rank), -1)));
  return absl::OkStatus();
}

absl::Status ConcatOffsetShape(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 0, &unused));
  for (int i = 1; i < c.num_inputs(); ++i) {
    PartialTensorShape s;
    STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &s));
    c.set_output(i - 1, s);
  }
  return absl::OkStatus();
}

absl::Status UnpackShape(InferenceContext& c) {
  int64_t num, axis;
  STRATA_RETURN_IF_ERROR(c.GetAttr("num", &num));
  STRATA_RETURN_IF_ERROR(c.GetAttr("axis", &axis));
  auto out = UnpackOutputShape(c.input(0), num, axis);
  if (!out.ok()) return c.Annotate(out.status());
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, *out);
  return absl::OkStatus();
}

absl::Status VectorUnchangedShape(InferenceContext& c) {
  PartialTensorShape s;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 1, &s));
  c.set_output(0, s);
  return absl::OkStatus();
}

// ---- Registrations ----------------------------------------------------------

STRATA_REGISTER_OP("BroadcastGradientArgs")
    .Input("s0: T")
    .Input("s1: T")
    .Output("r0: T")
    .Output("r1: T")
    .Attr("T: {int32, int64} = int32")
    .SetShapeFn(BroadcastGradientArgsShape);

STRATA_REGISTER_OP("BroadcastTo")
    .Input("input: T")
    .Input("shape: Tidx")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tidx: {int32, int64} = int32")
    .SetShapeFn(BroadcastToShape);

STRATA_REGISTER_OP("ReducedShape")
    .Input("input_shape: T")
    .Input("axes: Tidx")
    .Output("output: T")
    .Attr("T: {int32, int64} = int32")
    .Attr("Tidx: {int32, int64} = int32")
    .SetShapeFn(ReducedShapeShape);

STRATA_REGISTER_OP("Size")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = int32")
    .SetShapeFn(ScalarShape);

STRATA_REGISTER_OP("Pad")
    .Input("input: T")
    .Input("paddings: Tpaddings")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tpaddings: {int32, int64} = int32")
    .SetShapeFn(PadShape);

STRATA_REGISTER_OP("ConcatOffset")
    .Input("concat_dim: int32")
    .Input("shape: N * shape_type")
    .Output("offset: N * shape_type")
    .Attr("N: int >= 2")
    .Attr("shape_type: {int32, int64} = int32")
    .SetShapeFn(ConcatOffsetShape);

STRATA_REGISTER_OP("Unpack")
    .Input("value: T")
    .Output("output: num * T")
    .Attr("num: int >= 0")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(UnpackShape);

STRATA_REGISTER_OP("InvertPermutation")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {int32, int64} = int32")
    .SetShapeFn(VectorUnchangedShape);

Output Out0(Node* n) { return n == nullptr ? Output() : Output(n, 0); }

OutputList AllOutputs(Node* n) {
  OutputList out;
  if (n == nullptr) return out;
  for (int i = 0; i < n->num_outputs(); ++i) out.emplace_back(n, i);
  return out;
}

}  // namespace

namespace ops {

BroadcastGradientArgsOutputs BroadcastGradientArgs(const Scope& scope, Output s0, Output s1) {
  Node* n = NodeBuilder(scope, "BroadcastGradientArgs").Input(s0).Input(s1).Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output BroadcastTo(const Scope& scope, Output input, Output shape) {
  return Out0(NodeBuilder(scope, "BroadcastTo").Input(input).Input(shape).Finalize());
}

Output ReducedShape(const Scope& scope, Output input_shape, Output axes) {
  return Out0(NodeBuilder(scope, "ReducedShape").Input(input_shape).Input(axes).Finalize());
}

Output Size(const Scope& scope, Output input, DataType out_type) {
  return Out0(NodeBuilder(scope, "Size").Input(input).Attr("out_type", out_type).Finalize());
}

Output Pad(const Scope& scope, Output input, Output paddings) {
  return Out0(NodeBuilder(scope, "Pad").Input(input).Input(paddings).Finalize());
}

OutputList ConcatOffset(const Scope& scope, Output concat_dim, const OutputList& shapes) {
  return AllOutputs(NodeBuilder(scope, "ConcatOffset").Input(concat_dim).Input(shapes).Finalize());
}

OutputList Unstack(const Scope& scope, Output value, int64_t num, int64_t axis) {
  return AllOutputs(NodeBuilder(scope, "Unpack")
                        .Input(value)
                        .Attr("num", num)
                        .Attr("axis", axis)
                        .Finalize());
}

Output InvertPermutation(const Scope& scope, Output x) {
  return Out0(NodeBuilder(scope, "InvertPermutation").Input(x).Finalize());
}

}  // namespace ops
}  // namespace strata
