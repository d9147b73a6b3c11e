// The array op family's registrations, shape functions and builders; the
// shape rules they share with the kernels are in array_shapes.cc.
#include "graph/ops/array_ops.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {

absl::StatusOr<std::optional<std::vector<int64_t>>> ConstIntInput(InferenceContext& c, int i,
                                                                  const char* what) {
  const Tensor* t = c.input_tensor(i);
  if (t == nullptr) return std::optional<std::vector<int64_t>>();
  auto v = IntTensorValues(*t, what);
  if (!v.ok()) return c.Annotate(v.status());
  return std::optional<std::vector<int64_t>>(*std::move(v));
}

namespace {

// Shape functions: each calls the shared rule with what is known statically.

// A 1-D index input of unknown value: its length (or -1).
int64_t VectorLength(InferenceContext& c, int i) {
  const PartialTensorShape& s = c.input(i);
  return s.unknown_rank() || s.dims() != 1 ? -1 : s.dim_size(0);
}

absl::Status SetOrAnnotate(InferenceContext& c, const absl::StatusOr<PartialTensorShape>& s) {
  if (!s.ok()) return c.Annotate(s.status());
  c.set_output(0, *s);
  return absl::OkStatus();
}

// A shape of rank `n` with unknown dims; unknown rank for n < 0, and for a
// rank beyond any real tensor's (a malformed graph could claim 2^40), which
// must not become a 2^40-entry vector.
PartialTensorShape UnknownDimsOfLength(int64_t n) {
  constexpr int64_t kMaxRank = 254;  // TensorFlow's limit
  return n < 0 || n > kMaxRank ? PartialTensorShape::UnknownRank()
                               : PartialTensorShape(DimVector(static_cast<size_t>(n), -1));
}

absl::Status GatherV2ShapeFn(InferenceContext& c) {
  STRATA_ASSIGN_OR_RETURN(auto axis, ConstIntInput(c, 2, "GatherV2 axis"));
  int64_t batch_dims = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    return c.Annotate(absl::InvalidArgumentError(absl::StrCat("GatherV2 batch_dims ", batch_dims,
                                                              " is not supported (only 0)")));
  }
  if (!axis) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  if (axis->size() != 1) {
    return c.Annotate(absl::InvalidArgumentError(absl::StrCat("GatherV2 axis must be one value, got ", axis->size())));
  }
  return SetOrAnnotate(c, GatherOutputShape(c.input(0), c.input(1), (*axis)[0]));
}

absl::Status SegmentSumShapeFn(InferenceContext& c) {
  STRATA_ASSIGN_OR_RETURN(auto n, ConstIntInput(c, 2, "UnsortedSegmentSum num_segments"));
  if (!n) {
    const PartialTensorShape& data = c.input(0);
    const PartialTensorShape& ids = c.input(1);
    if (data.unknown_rank() || ids.unknown_rank()) {
      c.set_output(0, PartialTensorShape::UnknownRank());
    } else {
      std::vector<int64_t> out = {-1};
      out.insert(out.end(), data.dim_sizes().begin() + std::min(ids.dims(), data.dims()), data.dim_sizes().end());
      c.set_output(0, PartialTensorShape(out));
    }
    return absl::OkStatus();
  }
  if (n->size() != 1) {
    return c.Annotate(absl::InvalidArgumentError("UnsortedSegmentSum num_segments must be a scalar"));
  }
  return SetOrAnnotate(c, SegmentSumOutputShape(c.input(0), c.input(1), (*n)[0]));
}

absl::Status ExpandDimsShapeFn(InferenceContext& c) {
  STRATA_ASSIGN_OR_RETURN(auto dim, ConstIntInput(c, 1, "ExpandDims dim"));
  if (dim && dim->size() != 1) {
    return c.Annotate(absl::InvalidArgumentError(absl::StrCat("ExpandDims dim must be one value, got ", dim->size())));
  }
  if (dim) return SetOrAnnotate(c, ExpandDimsOutputShape(c.input(0), (*dim)[0]));
  const int rank = c.input(0).dims();
  c.set_output(0, rank < 0 ? PartialTensorShape::UnknownRank() : UnknownDimsOfLength(rank + 1));
  return absl::OkStatus();
}

absl::Status SqueezeShapeFn(InferenceContext& c) {
  std::vector<int64_t> dims;
  STRATA_RETURN_IF_ERROR(c.GetAttr("squeeze_dims", &dims));
  return SetOrAnnotate(c, SqueezeOutputShape(c.input(0), dims));
}

absl::Status ReshapeShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto shape, ConstIntInput(c, 1, "Reshape shape"));
  if (!shape) {
    c.set_output(0, UnknownDimsOfLength(VectorLength(c, 1)));
    return absl::OkStatus();
  }
  return SetOrAnnotate(c, ReshapeOutputShape(c.input(0), *shape));
}

absl::Status TransposeShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto perm, ConstIntInput(c, 1, "Transpose perm"));
  if (perm) return SetOrAnnotate(c, TransposeOutputShape(c.input(0), *perm));
  const int rank = c.input(0).dims();
  c.set_output(0, UnknownDimsOfLength(rank >= 0 ? rank : VectorLength(c, 1)));
  return absl::OkStatus();
}

absl::Status ConcatV2ShapeFn(InferenceContext& c) {
  const int n = c.num_inputs() - 1;
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(n, 0, &unused));
  std::vector<PartialTensorShape> values;
  for (int i = 0; i < n; ++i) values.push_back(c.input(i));
  STRATA_ASSIGN_OR_RETURN(auto axis, ConstIntInput(c, n, "ConcatV2 axis"));
  if (axis) {
    if (axis->size() != 1) return c.Error("ConcatV2 axis must be a scalar");
    return SetOrAnnotate(c, ConcatOutputShape(values, (*axis)[0]));
  }
  // Axis unknown: the inputs must still agree on a rank >= 1, which the
  // output keeps; any dim may be the one that grows.
  int rank = -1;
  for (const auto& s : values) {
    if (s.unknown_rank()) continue;
    if (rank >= 0 && s.dims() != rank) {
      return c.Error(absl::StrCat("ConcatV2 inputs must have the same rank, got ranks ", rank,
                                  " and ", s.dims()));
    }
    rank = s.dims();
  }
  if (rank == 0) return c.Error("cannot concatenate scalars (use Pack to stack them)");
  c.set_output(0, UnknownDimsOfLength(rank));
  return absl::OkStatus();
}

absl::Status SliceShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto begin, ConstIntInput(c, 1, "Slice begin"));
  STRATA_ASSIGN_OR_RETURN(auto size, ConstIntInput(c, 2, "Slice size"));
  if (begin && size) return SetOrAnnotate(c, SliceOutputShape(c.input(0), *begin, *size));
  int64_t rank = c.input(0).dims();
  if (rank < 0) rank = VectorLength(c, 1);
  if (rank < 0) rank = VectorLength(c, 2);
  if (size && rank == static_cast<int64_t>(size->size())) {
    // Sizes other than -1 are output dims even when begin is unknown.
    DimVector out(size->begin(), size->end());
    for (int64_t& d : out) d = std::max<int64_t>(d, -1);
    c.set_output(0, PartialTensorShape(out));
  } else {
    c.set_output(0, UnknownDimsOfLength(rank));
  }
  return absl::OkStatus();
}

absl::Status PackShapeFn(InferenceContext& c) {
  int64_t axis;
  STRATA_RETURN_IF_ERROR(c.GetAttr("axis", &axis));
  std::vector<PartialTensorShape> values;
  for (int i = 0; i < c.num_inputs(); ++i) values.push_back(c.input(i));
  return SetOrAnnotate(c, PackOutputShape(values, axis));
}

absl::Status FillShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 0, &unused));
  return SetOutputFromShapeInput(c, 0, "Fill dims");
}

absl::Status ShapeShapeFn(InferenceContext& c) {
  const int rank = c.input(0).dims();
  c.set_output(0, PartialTensorShape(DimVector{rank >= 0 ? rank : -1}));
  return absl::OkStatus();
}

absl::Status OneHotShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  for (int i = 1; i <= 3; ++i) STRATA_RETURN_IF_ERROR(c.WithRank(i, 0, &unused));
  int64_t axis;
  STRATA_RETURN_IF_ERROR(c.GetAttr("axis", &axis));
  int64_t depth = -1;
  STRATA_ASSIGN_OR_RETURN(auto d, ConstIntInput(c, 1, "OneHot depth"));
  if (d && d->size() == 1) {
    depth = (*d)[0];
    if (depth < 0) return c.Error(absl::StrCat("OneHot depth must be >= 0, got ", depth));
  }
  return SetOrAnnotate(c, OneHotOutputShape(c.input(0), depth, axis));
}

// A scalar input's value as a double (Range's float types) or int64 when it
// is a constant; nullopt when it is not.
std::optional<double> ConstScalarAsDouble(InferenceContext& c, int i) {
  const Tensor* t = c.input_tensor(i);
  if (t == nullptr || t->NumElements() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DT_FLOAT: return static_cast<double>(*t->data<float>());
    case DT_DOUBLE: return *t->data<double>();
    case DT_INT32: return static_cast<double>(*t->data<int32_t>());
    case DT_INT64: return static_cast<double>(*t->data<int64_t>());
    default: return std::nullopt;
  }
}

absl::Status RangeShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  for (int i = 0; i < 3; ++i) STRATA_RETURN_IF_ERROR(c.WithRank(i, 0, &unused));
  const std::optional<double> start = ConstScalarAsDouble(c, 0), limit = ConstScalarAsDouble(c, 1),
                              delta = ConstScalarAsDouble(c, 2);
  if (!start || !limit || !delta) {
    c.set_output(0, PartialTensorShape({-1}));
    return absl::OkStatus();
  }
  const bool integral = c.input_type(0) == DT_INT32 || c.input_type(0) == DT_INT64;
  absl::StatusOr<int64_t> n =
      integral ? RangeLength(static_cast<int64_t>(*start), static_cast<int64_t>(*limit), static_cast<int64_t>(*delta))
               : RangeLength(*start, *limit, *delta);
  if (!n.ok()) return c.Annotate(n.status());
  c.set_output(0, PartialTensorShape({*n}));
  return absl::OkStatus();
}

absl::Status TileShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
  STRATA_ASSIGN_OR_RETURN(auto multiples, ConstIntInput(c, 1, "Tile multiples"));
  if (multiples) return SetOrAnnotate(c, TileOutputShape(c.input(0), *multiples));
  const int rank = c.input(0).dims();
  c.set_output(0, UnknownDimsOfLength(rank >= 0 ? rank : VectorLength(c, 1)));
  return absl::OkStatus();
}

// Split (split_dim first) and SplitV (value first).
absl::Status SplitShapeFn(InferenceContext& c) {
  const bool v = c.op_def().name == "SplitV";
  const int value = v ? 0 : 1, axis_input = v ? 2 : 0;
  int64_t num_split = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("num_split", &num_split));
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(axis_input, 0, &unused));
  STRATA_ASSIGN_OR_RETURN(auto axis, ConstIntInput(c, axis_input, "split_dim"));
  std::optional<std::vector<int64_t>> sizes = std::vector<int64_t>();
  if (v) {
    STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &unused));
    STRATA_ASSIGN_OR_RETURN(sizes, ConstIntInput(c, 1, "SplitV size_splits"));
  }
  const PartialTensorShape& in = c.input(value);
  if (!axis || !sizes) {
    // Each part keeps the rank; its size along the (unknown) axis is unknown.
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, UnknownDimsOfLength(in.dims()));
    if (axis && !in.unknown_rank()) {
      STRATA_ASSIGN_OR_RETURN(int a, NormalizeAxis((*axis)[0], in.dims(), "split_dim"));
      for (int i = 0; i < c.num_outputs(); ++i) {
        DimVector dims(in.dim_sizes().begin(), in.dim_sizes().end());
        dims[a] = -1;
        c.set_output(i, PartialTensorShape(dims));
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<PartialTensorShape>> shapes = SplitOutputShapes(in, (*axis)[0], num_split, *sizes);
  if (!shapes.ok()) return c.Annotate(shapes.status());
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, (*shapes)[i]);
  return absl::OkStatus();
}

// Every output: [?] + data.shape[partitions.rank:].
absl::Status DynamicPartitionShapeFn(InferenceContext& c) {
  absl::StatusOr<PartialTensorShape> part = DynamicPartitionOutputShape(c.input(0), c.input(1), -1);
  if (!part.ok()) return c.Annotate(part.status());
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, *part);
  return absl::OkStatus();
}

// [?] + the slices' shape: the largest index is known only at run time.
absl::Status DynamicStitchShapeFn(InferenceContext& c) {
  const int n = c.num_inputs() / 2;
  std::vector<PartialTensorShape> indices, data;
  for (int m = 0; m < n; ++m) {
    indices.push_back(c.input(m));
    data.push_back(c.input(n + m));
  }
  return SetOrAnnotate(c, DynamicStitchOutputShape(indices, data, -1));
}

}  // namespace

absl::Status SetOutputFromShapeInput(InferenceContext& c, int i, const char* what) {
  PartialTensorShape unused;
  STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &unused));
  const Tensor* t = c.input_tensor(i);
  if (t == nullptr) {
    c.set_output(0, UnknownDimsOfLength(VectorLength(c, i)));
    return absl::OkStatus();
  }
  auto shape = ShapeFromShapeTensor(*t, what);
  if (!shape.ok()) return c.Annotate(shape.status());
  c.set_output(0, PartialTensorShape(*shape));
  return absl::OkStatus();
}

// Index types for shape/perm/axis/begin/size inputs, as TensorFlow allows.
#define STRATA_INDEX_TYPES "{int32, int64}"

STRATA_REGISTER_OP("Reshape")
    .Input("tensor: T")
    .Input("shape: Tshape")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tshape: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(ReshapeShapeFn);

STRATA_REGISTER_OP("GatherV2")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Input("axis: Taxis")
    .Output("output: Tparams")
    .Attr("batch_dims: int = 0")
    .Attr("Tparams: type")
    .Attr("Tindices: " STRATA_INDEX_TYPES)
    .Attr("Taxis: " STRATA_INDEX_TYPES)
    .SetShapeFn(GatherV2ShapeFn);

STRATA_REGISTER_OP("UnsortedSegmentSum")
    .Input("data: T")
    .Input("segment_ids: Tindices")
    .Input("num_segments: Tnumsegments")
    .Output("output: T")
    .Attr("T: {float, double, half, bfloat16, int32, int64}")
    .Attr("Tindices: " STRATA_INDEX_TYPES)
    .Attr("Tnumsegments: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(SegmentSumShapeFn);

STRATA_REGISTER_OP("ExpandDims")
    .Input("input: T")
    .Input("dim: Tdim")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tdim: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(ExpandDimsShapeFn);

STRATA_REGISTER_OP("Squeeze")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("squeeze_dims: list(int) >= 0 = []")
    .SetShapeFn(SqueezeShapeFn);

STRATA_REGISTER_OP("Transpose")
    .Input("x: T")
    .Input("perm: Tperm")
    .Output("y: T")
    .Attr("T: type")
    .Attr("Tperm: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(TransposeShapeFn);

STRATA_REGISTER_OP("ConcatV2")
    .Input("values: N * T")
    .Input("axis: Tidx")
    .Output("output: T")
    .Attr("N: int >= 2")
    .Attr("T: type")
    .Attr("Tidx: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(ConcatV2ShapeFn);

STRATA_REGISTER_OP("Slice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("size: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: " STRATA_INDEX_TYPES)
    .SetShapeFn(SliceShapeFn);

// MatrixBandPart: the input's shape (rank >= 2); the band widths scalars.
absl::Status MatrixBandPartShapeFn(InferenceContext& c) {
  PartialTensorShape input, unused;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &input));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 0, &unused));
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 0, &unused));
  c.set_output(0, input);
  return absl::OkStatus();
}

STRATA_REGISTER_OP("MatrixBandPart")
    .Input("input: T")
    .Input("num_lower: Tindex")
    .Input("num_upper: Tindex")
    .Output("band: T")
    .Attr("T: type")
    .Attr("Tindex: {int32, int64} = int64")
    .SetShapeFn(MatrixBandPartShapeFn);

STRATA_REGISTER_OP("Pack")
    .Input("values: N * T")
    .Output("output: T")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(PackShapeFn);

STRATA_REGISTER_OP("Fill")
    .Input("dims: index_type")
    .Input("value: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index_type: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(FillShapeFn);

STRATA_REGISTER_OP("ZerosLike")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: type")
    .SetShapeFn(UnchangedShape);

// TensorFlow also allows complex64/complex128, which Strata tensors cannot hold.
STRATA_REGISTER_OP("OnesLike")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, "
          "uint64, bool}")
    .SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("Shape")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(ShapeShapeFn);

STRATA_REGISTER_OP("OneHot")
    .Input("indices: TI")
    .Input("depth: int32")
    .Input("on_value: T")
    .Input("off_value: T")
    .Output("output: T")
    .Attr("axis: int = -1")
    .Attr("T: type")
    .Attr("TI: {uint8, int8, int32, int64} = int64")
    .SetShapeFn(OneHotShapeFn);

STRATA_REGISTER_OP("Range")
    .Input("start: Tidx")
    .Input("limit: Tidx")
    .Input("delta: Tidx")
    .Output("output: Tidx")
    .Attr("Tidx: {float, double, int32, int64} = int32")
    .SetShapeFn(RangeShapeFn);

STRATA_REGISTER_OP("Tile")
    .Input("input: T")
    .Input("multiples: Tmultiples")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tmultiples: " STRATA_INDEX_TYPES " = int32")
    .SetShapeFn(TileShapeFn);

STRATA_REGISTER_OP("Split")
    .Input("split_dim: int32")
    .Input("value: T")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .SetShapeFn(SplitShapeFn);

STRATA_REGISTER_OP("SplitV")
    .Input("value: T")
    .Input("size_splits: Tlen")
    .Input("split_dim: int32")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .Attr("Tlen: {int8, int32, int64} = int64")
    .SetShapeFn(SplitShapeFn);

STRATA_REGISTER_OP("DynamicPartition")
    .Input("data: T")
    .Input("partitions: int32")
    .Output("outputs: num_partitions * T")
    .Attr("num_partitions: int >= 1")
    .Attr("T: type")
    .SetShapeFn(DynamicPartitionShapeFn);

STRATA_REGISTER_OP("DynamicStitch")
    .Input("indices: N * int32")
    .Input("data: N * T")
    .Output("merged: T")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .SetShapeFn(DynamicStitchShapeFn);

#undef STRATA_INDEX_TYPES

namespace ops {

namespace {
Output Out0(Node* n) { return n == nullptr ? Output() : Output(n, 0); }
}  // namespace

Output Reshape(const Scope& scope, Output tensor, Output shape) {
  return Out0(NodeBuilder(scope, "Reshape").Input(tensor).Input(shape).Finalize());
}

Output GatherV2(const Scope& scope, Output params, Output indices, Output axis) {
  return Out0(NodeBuilder(scope, "GatherV2").Input(params).Input(indices).Input(axis).Finalize());
}

Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids, Output num_segments) {
  return Out0(NodeBuilder(scope, "UnsortedSegmentSum").Input(data).Input(segment_ids).Input(num_segments).Finalize());
}

Output ExpandDims(const Scope& scope, Output input, Output dim) {
  return Out0(NodeBuilder(scope, "ExpandDims").Input(input).Input(dim).Finalize());
}

Output Squeeze(const Scope& scope, Output input, const std::vector<int64_t>& squeeze_dims) {
  return Out0(NodeBuilder(scope, "Squeeze").Input(input).Attr("squeeze_dims", MakeAttr(squeeze_dims)).Finalize());
}

Output Transpose(const Scope& scope, Output x, Output perm) {
  return Out0(NodeBuilder(scope, "Transpose").Input(x).Input(perm).Finalize());
}

Output Concat(const Scope& scope, const OutputList& values, Output axis) {
  return Out0(NodeBuilder(scope, "ConcatV2", "Concat").Input(values).Input(axis).Finalize());
}

Output Slice(const Scope& scope, Output input, Output begin, Output size) {
  return Out0(NodeBuilder(scope, "Slice").Input(input).Input(begin).Input(size).Finalize());
}

Output Stack(const Scope& scope, const OutputList& values, int64_t axis) {
  return Out0(NodeBuilder(scope, "Pack", "Stack").Input(values).Attr("axis", axis).Finalize());
}

Output Fill(const Scope& scope, Output dims, Output value) {
  return Out0(NodeBuilder(scope, "Fill").Input(dims).Input(value).Finalize());
}

Output Range(const Scope& scope, Output start, Output limit, Output delta) {
  return Out0(NodeBuilder(scope, "Range").Input(start).Input(limit).Input(delta).Finalize());
}

Output MatrixBandPart(const Scope& scope, Output input, Output num_lower, Output num_upper) {
  return Out0(NodeBuilder(scope, "MatrixBandPart").Input(input).Input(num_lower).Input(num_upper).Finalize());
}

Output Tile(const Scope& scope, Output input, Output multiples) {
  return Out0(NodeBuilder(scope, "Tile").Input(input).Input(multiples).Finalize());
}

namespace {
OutputList AllOutputs(Node* n) {
  OutputList out;
  if (n == nullptr) return out;
  for (int i = 0; i < n->num_outputs(); ++i) out.push_back(Output(n, i));
  return out;
}
}  // namespace

OutputList Split(const Scope& scope, Output axis, Output value, int64_t num_split) {
  return AllOutputs(NodeBuilder(scope, "Split").Input(axis).Input(value).Attr("num_split", num_split).Finalize());
}

OutputList SplitV(const Scope& scope, Output value, Output size_splits, Output axis, int64_t num_split) {
  return AllOutputs(NodeBuilder(scope, "SplitV")
                        .Input(value)
                        .Input(size_splits)
                        .Input(axis)
                        .Attr("num_split", num_split)
                        .Finalize());
}

OutputList DynamicPartition(const Scope& scope, Output data, Output partitions,
                            int64_t num_partitions) {
  return AllOutputs(NodeBuilder(scope, "DynamicPartition")
                        .Input(data)
                        .Input(partitions)
                        .Attr("num_partitions", num_partitions)
                        .Finalize());
}

Output DynamicStitch(const Scope& scope, const OutputList& indices, const OutputList& data) {
  return Out0(NodeBuilder(scope, "DynamicStitch").Input(indices).Input(data).Finalize());
}

Output ZerosLike(const Scope& scope, Output x) {
  return Out0(NodeBuilder(scope, "ZerosLike").Input(x).Finalize());
}

Output OnesLike(const Scope& scope, Output x) {
  return Out0(NodeBuilder(scope, "OnesLike").Input(x).Finalize());
}

Output Shape(const Scope& scope, Output input, DataType out_type) {
  return Out0(NodeBuilder(scope, "Shape").Input(input).Attr("out_type", out_type).Finalize());
}

Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value,
              Output off_value, int64_t axis) {
  return Out0(NodeBuilder(scope, "OneHot")
                  .Input(indices)
                  .Input(depth)
                  .Input(on_value)
                  .Input(off_value)
                  .Attr("axis", axis)
                  .Finalize());
}

}  // namespace ops
}  // namespace strata
