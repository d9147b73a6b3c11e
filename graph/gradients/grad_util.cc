#include "graph/gradients/grad_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/gradients/grad_ops.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"

namespace strata {
namespace grad {

Output ScalarConst(const Scope& s, DataType dt, double v) {
  switch (dt) {
    case DT_FLOAT:
      return ops::Const(s, static_cast<float>(v));
    case DT_DOUBLE:
      return ops::Const(s, v);
    default:
      s.UpdateStatus(absl::InvalidArgumentError(
          absl::StrCat("gradients are built for float and double only, not ",
                       DataTypeString(dt))));
      return Output();
  }
}

Output IntVector(const Scope& s, const std::vector<int64_t>& values) {
  std::vector<int32_t> v(values.begin(), values.end());
  return ops::Const<int32_t>(s, v, TensorShape{static_cast<int64_t>(v.size())});
}

std::optional<std::vector<int64_t>> ConstIntValues(const Output& o) {
  if (!o.ok() || !o.node()->IsOp("Const")) return std::nullopt;
  Tensor t;
  if (!GetAttr(o.node()->attrs(), "value", &t).ok()) return std::nullopt;
  auto v = IntTensorValues(t, "constant");
  if (!v.ok()) return std::nullopt;
  return *std::move(v);
}

Output ShapeOf(const Scope& s, const Output& x) {
  const PartialTensorShape shape = x.shape();
  if (shape.IsFullyDefined()) {
    return IntVector(s, std::vector<int64_t>(shape.dim_sizes().begin(), shape.dim_sizes().end()));
  }
  return ops::Shape(s, x);
}

namespace {

// A Const shape for Reshape: the dims, with one unknown dim as -1. nullopt
// when two dims are unknown, or one is and another is 0 (the -1 would be
// ambiguous).
std::optional<std::vector<int64_t>> ReshapeTarget(absl::Span<const int64_t> dims) {
  int unknown = 0;
  bool zero = false;
  for (int64_t d : dims) {
    unknown += d < 0;
    zero = zero || d == 0;
  }
  if (unknown > 1 || (unknown == 1 && zero)) return std::nullopt;
  std::vector<int64_t> out(dims.begin(), dims.end());
  for (int64_t& d : out) d = std::max<int64_t>(d, -1);
  return out;
}

bool SameKnownShape(const PartialTensorShape& a, const PartialTensorShape& b) {
  return a.IsFullyDefined() && b.IsFullyDefined() && a == b;
}

// Axes of `a` to sum `grad` over, decided from inferred shapes alone; false
// if a dim of `a` is unknown and might be 1 where the result is not.
// `aligned` is set when an axis inside a's own rank is summed (so the result
// lost a dim of size 1 and must be reshaped back).
bool StaticSumAxes(const PartialTensorShape& a, const std::vector<PartialTensorShape>& others,
                   std::vector<int64_t>* axes, bool* aligned) {
  if (a.unknown_rank()) return false;
  int rank = a.dims();
  for (const auto& o : others) {
    if (o.unknown_rank()) return false;
    rank = std::max(rank, o.dims());
  }
  axes->clear();
  *aligned = false;
  for (int i = 0; i < rank; ++i) {
    const int pa = i - (rank - a.dims());
    if (pa < 0) {
      axes->push_back(i);
      continue;
    }
    const int64_t ad = a.dim_size(pa);
    if (ad > 1 || ad == 0) continue;  // the result keeps a's size here
    bool others_one = true;           // every other operand is 1 (or absent) here
    for (const auto& o : others) {
      const int po = i - (rank - o.dims());
      if (po >= 0 && o.dim_size(po) != 1) others_one = false;
    }
    if (others_one) continue;  // the result's dim is a's
    if (ad < 0) return false;  // a's dim might be 1 while the result's is not
    axes->push_back(i);        // a has 1 here; summing is right even if the result has 1 too
    *aligned = true;
  }
  return true;
}

}  // namespace

Output ReshapeLike(const Scope& s, const Output& t, const Output& x) {
  const PartialTensorShape xs = x.shape();
  if (SameKnownShape(t.shape(), xs)) return t;
  if (!xs.unknown_rank()) {
    if (auto target = ReshapeTarget(xs.dim_sizes())) {
      return ops::Reshape(s, t, IntVector(s, *target));
    }
  }
  return ops::Reshape(s, t, ops::Shape(s, x));
}

Output SumToShapeOf(const Scope& s, const Output& grad, const Output& a,
                    const std::vector<PartialTensorShape>& others) {
  std::vector<int64_t> axes;
  bool aligned = false;
  if (StaticSumAxes(a.shape(), others, &axes, &aligned)) {
    if (axes.empty()) return grad;
    Output sum = ops::Sum(s, grad, IntVector(s, axes));
    return aligned ? ReshapeLike(s, sum, a) : sum;
  }
  Output sa = ops::Shape(s, a);
  ops::BroadcastGradientArgsOutputs r = ops::BroadcastGradientArgs(s, sa, ops::Shape(s, grad));
  return ops::Reshape(s, ops::Sum(s, grad, r.r0), sa);
}

void ReduceBinaryGrads(const Scope& s, const Output& x, const Output& y, Output gx, Output gy,
                       OutputList* grad_inputs) {
  std::vector<int64_t> ax, ay;
  bool aligned_x = false, aligned_y = false;
  const bool static_x = StaticSumAxes(x.shape(), {y.shape()}, &ax, &aligned_x);
  const bool static_y = StaticSumAxes(y.shape(), {x.shape()}, &ay, &aligned_y);
  ops::BroadcastGradientArgsOutputs r;
  Output sx, sy;
  if (!static_x || !static_y) {
    sx = ops::Shape(s, x);
    sy = ops::Shape(s, y);
    r = ops::BroadcastGradientArgs(s, sx, sy);
  }
  auto reduce = [&](const Output& g, const Output& a, bool is_static, const std::vector<int64_t>& axes,
                    bool aligned, const Output& dyn_axes, const Output& dyn_shape) -> Output {
    if (!g.ok()) return Output();
    if (is_static) {
      if (axes.empty()) return g;
      Output sum = ops::Sum(s, g, IntVector(s, axes));
      return aligned ? ReshapeLike(s, sum, a) : sum;
    }
    return ops::Reshape(s, ops::Sum(s, g, dyn_axes), dyn_shape);
  };
  grad_inputs->push_back(reduce(gx, x, static_x, ax, aligned_x, r.r0, sx));
  grad_inputs->push_back(reduce(gy, y, static_y, ay, aligned_y, r.r1, sy));
}

std::optional<std::vector<int64_t>> StaticReductionAxes(const Output& input, const Output& axes) {
  const PartialTensorShape shape = input.shape();
  if (shape.unknown_rank()) return std::nullopt;
  auto values = ConstIntValues(axes);
  if (!values) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t a : *values) {
    auto n = NormalizeAxis(a, shape.dims(), "reduction axis");
    if (!n.ok()) return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

Output ReshapeToKeepDims(const Scope& s, const Output& t, const Output& input, const Output& axes) {
  if (auto normalized = StaticReductionAxes(input, axes)) {
    const PartialTensorShape in = input.shape();
    std::vector<int64_t> kept(in.dim_sizes().begin(), in.dim_sizes().end());
    for (int64_t a : *normalized) kept[a] = 1;
    if (SameKnownShape(t.shape(), PartialTensorShape(kept))) return t;
    if (auto target = ReshapeTarget(kept)) return ops::Reshape(s, t, IntVector(s, *target));
  }
  return ops::Reshape(s, t, ops::ReducedShape(s, ops::Shape(s, input), axes));
}

}  // namespace grad
}  // namespace strata
