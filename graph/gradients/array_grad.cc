// Gradients of the array op family (graph/ops/array_ops.h) and of the
// gradient helper ops (graph/gradients/grad_ops.h). These ops move elements,
// so each gradient moves dL/dy back: Slice <-> Pad, Pack <-> Unpack,
// DynamicPartition <-> DynamicStitch (+ GatherV2), ConcatV2 -> Slices,
// Transpose -> the inverse Transpose. Offsets and shapes are constants when
// shape inference knows them, run-time ops otherwise.
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/gradients/grad_ops.h"
#include "graph/gradients/grad_registry.h"
#include "graph/gradients/grad_util.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/strided_slice.h"

namespace strata {
namespace {

using grad::ConstIntValues;
using grad::IntVector;

absl::Status ReshapeGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(grad::ReshapeLike(s, g[0], OpInput(op, 0)));
  out->push_back(Output());
  return s.status();
}

// y = params[indices] along axis 0: dparams = the rows of dy added back at
// their indices (UnsortedSegmentSum: duplicates accumulate, and nothing of
// the size of a one-hot matrix is made).
absl::Status GatherV2Grad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output params = OpInput(op, 0), indices = OpInput(op, 1);
  const std::optional<std::vector<int64_t>> axis = grad::ConstIntValues(OpInput(op, 2));
  if (!axis || axis->size() != 1 || (*axis)[0] != 0) {
    return absl::UnimplementedError(absl::StrCat("the gradient of GatherV2 node '", op.name(),
                                                 "' is only built for a constant axis 0"));
  }
  Output rows = ops::Slice(s, grad::ShapeOf(s, params), grad::IntVector(s, {0}), grad::IntVector(s, {1}));
  out->push_back(ops::UnsortedSegmentSum(s, g[0], indices, rows));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

// y = x repeated multiples[i] times along each dim i: dx is dy reshaped to
// [m0, d0, m1, d1, ...] and summed over the m axes (0, 2, ...).
absl::Status TileGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), multiples = OpInput(op, 1);
  Output m = multiples.type() == DT_INT32 ? multiples : ops::Cast(s, multiples, DT_INT32);
  Output split = ops::Reshape(s, ops::Stack(s, {m, grad::ShapeOf(s, x)}, /*axis=*/1), IntVector(s, {-1}));
  const PartialTensorShape xs = x.shape();
  Output axes;
  if (!xs.unknown_rank()) {
    std::vector<int64_t> even;
    for (int i = 0; i < xs.dims(); ++i) even.push_back(2 * i);
    axes = IntVector(s, even);
  } else {
    Output length = ops::Reshape(s, ops::Shape(s, split), IntVector(s, {}));
    axes = ops::Range(s, ops::Const<int32_t>(s, 0), length, ops::Const<int32_t>(s, 2));
  }
  out->push_back(ops::Sum(s, ops::Reshape(s, g[0], split), axes));
  out->push_back(Output());
  return s.status();
}

// The outputs' gradients (zeros for an unused output) concatenated back
// along the split axis.
Output ConcatSplitGrads(const Scope& s, const Node& op, const OutputList& g, Output axis) {
  OutputList parts;
  for (int i = 0; i < op.num_outputs(); ++i) parts.push_back(g[i].ok() ? g[i] : ops::ZerosLike(s, OpOutput(op, i)));
  if (parts.size() == 1) return ops::Identity(s, parts[0]);
  return ops::Concat(s, parts, axis);
}

absl::Status SplitGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(Output());
  out->push_back(ConcatSplitGrads(s, op, g, OpInput(op, 0)));
  return s.status();
}

absl::Status SplitVGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ConcatSplitGrads(s, op, g, OpInput(op, 2)));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

// merged[indices[m][i...]] = data[m][i...]: ddata[m] = dmerged's rows at
// indices[m]. A slice a later duplicate overwrote gets its row's gradient
// too, as in TensorFlow (which ignores the overwrite as well).
absl::Status DynamicStitchGrad(const Scope& s, const Node& op, const OutputList& g,
                               OutputList* out) {
  const int n = op.num_inputs() / 2;
  for (int m = 0; m < n; ++m) out->push_back(Output());
  for (int m = 0; m < n; ++m) {
    out->push_back(ops::GatherV2(s, g[0], OpInput(op, m), ops::Const(s, int32_t{0})));
  }
  return s.status();
}

// TensorFlow's construction: partition the positions of `partitions` the
// way the data was, and stitch the outputs' gradients back to them. An
// output without a gradient contributes zeros of its shape.
absl::Status DynamicPartitionGrad(const Scope& s, const Node& op, const OutputList& g,
                                  OutputList* out) {
  Output data = OpInput(op, 0), partitions = OpInput(op, 1);
  Output positions = ops::Reshape(
      s,
      ops::Range(s, ops::Const(s, int32_t{0}), ops::Size(s, partitions), ops::Const(s, int32_t{1})),
      grad::ShapeOf(s, partitions));
  OutputList grads;
  for (int i = 0; i < op.num_outputs(); ++i) {
    grads.push_back(g[i].ok() ? g[i] : ops::ZerosLike(s, OpOutput(op, i)));
  }
  OutputList parts = ops::DynamicPartition(s, positions, partitions, op.num_outputs());
  if (!s.ok()) return s.status();
  out->push_back(grad::ReshapeLike(s, ops::DynamicStitch(s, parts, grads), data));
  out->push_back(Output());
  return s.status();
}

// y[ids[i]] += data[i]: ddata[i] = dy[ids[i]].
absl::Status UnsortedSegmentSumGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::GatherV2(s, g[0], OpInput(op, 1), grad::IntVector(s, {0})));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

// ExpandDims and Squeeze only rename the shape: the gradient takes the
// input's back.
absl::Status ExpandDimsGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(grad::ReshapeLike(s, g[0], OpInput(op, 0)));
  out->push_back(Output());
  return s.status();
}

absl::Status SqueezeGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(grad::ReshapeLike(s, g[0], OpInput(op, 0)));
  return s.status();
}

absl::Status TransposeGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output perm = OpInput(op, 1);
  Output inverse;
  auto p = ConstIntValues(perm);
  const int rank = OpInput(op, 0).shape().dims();
  if (p && rank >= 0) {
    auto normalized = NormalizePermutation(*p, rank);
    if (!normalized.ok()) return normalized.status();
    std::vector<int64_t> inv(normalized->size());
    for (size_t i = 0; i < inv.size(); ++i) inv[(*normalized)[i]] = static_cast<int64_t>(i);
    inverse = IntVector(s, inv);
  } else {
    inverse = ops::InvertPermutation(s, perm);
  }
  out->push_back(ops::Transpose(s, g[0], inverse));
  out->push_back(Output());
  return s.status();
}

// Each input's gradient is the slice of dL/dy where it was copied to.
absl::Status ConcatV2Grad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  const int n = op.num_inputs() - 1;
  OutputList values;
  for (int i = 0; i < n; ++i) values.push_back(OpInput(op, i));
  Output axis = OpInput(op, n);

  // Static: the axis is a constant and every input's size along it is known.
  auto axis_v = ConstIntValues(axis);
  const PartialTensorShape first = values[0].shape();
  bool is_static = axis_v && axis_v->size() == 1 && !first.unknown_rank();
  int a = 0;
  if (is_static) {
    auto normalized = NormalizeAxis((*axis_v)[0], first.dims(), "ConcatV2 axis");
    if (!normalized.ok()) return normalized.status();
    a = *normalized;
    for (const Output& v : values) {
      const PartialTensorShape vs = v.shape();
      is_static = is_static && vs.dims() == first.dims() && vs.dim_size(a) >= 0;
    }
  }
  if (is_static) {
    int64_t offset = 0;
    for (const Output& v : values) {
      std::vector<int64_t> begin(first.dims(), 0), size(first.dims(), -1);
      begin[a] = offset;
      size[a] = v.shape().dim_size(a);
      offset += size[a];
      out->push_back(ops::Slice(s, g[0], IntVector(s, begin), IntVector(s, size)));
    }
  } else {
    Output axis32 = axis.type() == DT_INT32 ? axis : ops::Cast(s, axis, DT_INT32);
    OutputList shapes;
    for (const Output& v : values) shapes.push_back(ops::Shape(s, v));
    OutputList offsets = ops::ConcatOffset(s, axis32, shapes);
    for (int i = 0; i < n && static_cast<int>(offsets.size()) == n; ++i) {
      out->push_back(ops::Slice(s, g[0], offsets[i], shapes[i]));
    }
  }
  if (!s.ok()) return s.status();
  out->push_back(Output());
  return absl::OkStatus();
}

// The input's gradient is dL/dy zero-padded back to the input's shape.
absl::Status SliceGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), begin = OpInput(op, 1), y = OpOutput(op, 0);
  const PartialTensorShape xs = x.shape(), ys = y.shape();
  auto b = ConstIntValues(begin);
  Output paddings;
  if (b && xs.IsFullyDefined() && ys.IsFullyDefined() &&
      static_cast<int>(b->size()) == xs.dims()) {
    std::vector<int32_t> p;
    for (int i = 0; i < xs.dims(); ++i) {
      p.push_back(static_cast<int32_t>((*b)[i]));
      p.push_back(static_cast<int32_t>(xs.dim_size(i) - (*b)[i] - ys.dim_size(i)));
    }
    paddings = ops::Const<int32_t>(s, p, TensorShape{xs.dims(), 2});
  } else {
    const DataType dt = begin.type();
    Output after = ops::Sub(s, ops::Sub(s, ops::Shape(s, x, dt), begin), ops::Shape(s, y, dt));
    paddings = ops::Stack(s, {begin, after}, /*axis=*/1);
  }
  out->push_back(ops::Pad(s, g[0], paddings));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

// GetAttr over a node's attrs, for ReadStridedSliceMasks.
struct NodeAttrs {
  const Node& node;
  template <typename T>
  absl::Status GetAttr(const std::string& name, T* v) const {
    return ::strata::GetAttr(node.attrs(), name, v);
  }
};

// dx is dy scattered back into zeros of x's shape (StridedSliceGrad).
absl::Status StridedSliceGradient(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  StridedSliceMasks m;
  STRATA_RETURN_IF_ERROR(ReadStridedSliceMasks(NodeAttrs{op}, &m));
  Output x = OpInput(op, 0), begin = OpInput(op, 1);
  Output shape = begin.type() == DT_INT32 ? grad::ShapeOf(s, x) : ops::Shape(s, x, begin.type());
  out->push_back(ops::StridedSliceGrad(s, shape, begin, OpInput(op, 2), OpInput(op, 3), g[0], m));
  for (int i = 0; i < 3; ++i) out->push_back(Output());
  return s.status();
}

// StridedSliceGrad is linear in dy: its gradient takes the same slice.
absl::Status StridedSliceGradGradient(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  StridedSliceMasks m;
  STRATA_RETURN_IF_ERROR(ReadStridedSliceMasks(NodeAttrs{op}, &m));
  for (int i = 0; i < 4; ++i) out->push_back(Output());
  out->push_back(ops::StridedSlice(s, g[0], OpInput(op, 1), OpInput(op, 2), OpInput(op, 3), m));
  return s.status();
}

// The band's gradient is dy's band (the mask is fixed).
absl::Status MatrixBandPartGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::MatrixBandPart(s, g[0], OpInput(op, 1), OpInput(op, 2)));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

absl::Status PackGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  int64_t axis = 0;
  auto st = GetAttr(op.attrs(), "axis", &axis);
  if (!st.ok()) return st;
  OutputList parts = ops::Unstack(s, g[0], op.num_inputs(), axis);
  if (!s.ok()) return s.status();
  for (const Output& p : parts) out->push_back(p);
  return absl::OkStatus();
}

// Outputs without a gradient contribute zeros to the stacked gradient.
absl::Status UnpackGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  int64_t axis = 0;
  auto st = GetAttr(op.attrs(), "axis", &axis);
  if (!st.ok()) return st;
  OutputList parts;
  for (int i = 0; i < op.num_outputs(); ++i) {
    parts.push_back(g[i].ok() ? g[i] : ops::ZerosLike(s, OpOutput(op, i)));
  }
  out->push_back(ops::Stack(s, parts, axis));
  return s.status();
}

// The input's gradient is the part of dL/dy that padding did not add.
absl::Status PadGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), paddings = OpInput(op, 1);
  const PartialTensorShape xs = x.shape();
  auto p = ConstIntValues(paddings);
  if (p && xs.IsFullyDefined() && static_cast<int>(p->size()) == 2 * xs.dims()) {
    std::vector<int64_t> begin;
    for (int i = 0; i < xs.dims(); ++i) begin.push_back((*p)[2 * i]);
    out->push_back(ops::Slice(s, g[0], IntVector(s, begin), grad::ShapeOf(s, x)));
  } else {
    const DataType dt = paddings.type();
    Output before = ops::Slice(s, paddings, ops::Const<int32_t>(s, {0, 0}),
                               ops::Const<int32_t>(s, {-1, 1}));
    Output begin = ops::Reshape(s, before, ops::Const<int32_t>(s, {-1}));
    out->push_back(ops::Slice(s, g[0], begin, ops::Shape(s, x, dt)));
  }
  out->push_back(Output());
  return s.status();
}

absl::Status BroadcastToGrad(const Scope& s, const Node& op, const OutputList& g,
                             OutputList* out) {
  out->push_back(grad::SumToShapeOf(s, g[0], OpInput(op, 0), {OpOutput(op, 0).shape()}));
  out->push_back(Output());
  return s.status();
}

// Every output element is the value: its gradient is the sum of dL/dy.
absl::Status FillGrad(const Scope& s, const Node&, const OutputList& g, OutputList* out) {
  Output flat = ops::Reshape(s, g[0], ops::Const<int32_t>(s, {-1}));
  out->push_back(Output());
  out->push_back(ops::Sum(s, flat, ops::Const(s, int32_t{0})));
  return s.status();
}

STRATA_REGISTER_GRADIENT("Reshape", ReshapeGrad);
STRATA_REGISTER_GRADIENT("ExpandDims", ExpandDimsGrad);
STRATA_REGISTER_GRADIENT("Squeeze", SqueezeGrad);
STRATA_REGISTER_GRADIENT("GatherV2", GatherV2Grad);
STRATA_REGISTER_GRADIENT("UnsortedSegmentSum", UnsortedSegmentSumGrad);
STRATA_REGISTER_GRADIENT("Transpose", TransposeGrad);
STRATA_REGISTER_GRADIENT("ConcatV2", ConcatV2Grad);
STRATA_REGISTER_GRADIENT("Slice", SliceGrad);
STRATA_REGISTER_GRADIENT("StridedSlice", StridedSliceGradient);
STRATA_REGISTER_GRADIENT("StridedSliceGrad", StridedSliceGradGradient);
STRATA_REGISTER_GRADIENT("Pack", PackGrad);
STRATA_REGISTER_GRADIENT("Unpack", UnpackGrad);
STRATA_REGISTER_GRADIENT("Pad", PadGrad);
STRATA_REGISTER_GRADIENT("BroadcastTo", BroadcastToGrad);
STRATA_REGISTER_GRADIENT("Fill", FillGrad);
STRATA_REGISTER_GRADIENT("Tile", TileGrad);
STRATA_REGISTER_GRADIENT("MatrixBandPart", MatrixBandPartGrad);
STRATA_REGISTER_GRADIENT("Split", SplitGrad);
STRATA_REGISTER_GRADIENT("SplitV", SplitVGrad);
STRATA_REGISTER_GRADIENT("DynamicPartition", DynamicPartitionGrad);
STRATA_REGISTER_GRADIENT("DynamicStitch", DynamicStitchGrad);

STRATA_NO_GRADIENT("Shape");
STRATA_NO_GRADIENT("StopGradient");
STRATA_NO_GRADIENT("ZerosLike");
STRATA_NO_GRADIENT("OnesLike");
STRATA_NO_GRADIENT("OneHot");
STRATA_NO_GRADIENT("Range");
STRATA_NO_GRADIENT("BroadcastGradientArgs");
STRATA_NO_GRADIENT("ReducedShape");
STRATA_NO_GRADIENT("Size");
STRATA_NO_GRADIENT("ConcatOffset");
STRATA_NO_GRADIENT("InvertPermutation");

}  // namespace
}  // namespace strata
