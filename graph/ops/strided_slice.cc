#include "graph/ops/strided_slice.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

constexpr int kMaxSpecEntries = 32;  // the masks are 32-bit in TensorFlow

bool Bit(int64_t mask, int i) { return ((mask >> i) & 1) != 0; }

// One dim's elements for entry `i` of the spec; `dim` -1 when unknown.
absl::Status PlanDim(int i, int d, int64_t dim, int64_t b, int64_t e, int64_t s, const StridedSliceMasks& m,
                     StridedSlicePlan* plan) {
  if (s == 0) return absl::InvalidArgumentError(absl::StrCat("StridedSlice strides[", i, "] is 0"));
  const bool shrink = Bit(m.shrink_axis_mask, i);
  if (shrink) {
    if (s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("StridedSlice strides[", i, "] is ", s, " for a single index (shrink_axis_mask); it must be positive"));
    }
    const int64_t x = b < 0 && dim >= 0 ? b + dim : b;
    if (dim >= 0 && (x < 0 || x >= dim)) {
      return absl::InvalidArgumentError(absl::StrCat("StridedSlice index begin[", i, "] = ", b,
                                                     " is out of bounds for dim ", d, " of size ", dim));
    }
    plan->begin.push_back(x);
    plan->stride.push_back(1);
    plan->size.push_back(1);
    return absl::OkStatus();
  }
  if (dim < 0) {
    plan->begin.push_back(0);
    plan->stride.push_back(s);
    plan->size.push_back(-1);
    return absl::OkStatus();
  }
  // Python's slice rules: masked ends take the whole dim in the stride's
  // direction; given ones count from the end when negative and are clamped.
  const int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
  auto canonical = [&](int64_t x, bool masked, bool is_begin) {
    if (masked) return s > 0 ? (is_begin ? int64_t{0} : dim) : (is_begin ? dim - 1 : int64_t{-1});
    if (x < 0) x += dim;
    return std::clamp(x, lo, hi);
  };
  const int64_t first = canonical(b, Bit(m.begin_mask, i), true);
  const int64_t last = canonical(e, Bit(m.end_mask, i), false);
  const int64_t len = last - first;
  int64_t size = 0;
  if (len != 0 && (len < 0) == (s < 0)) size = len / s + (len % s != 0 ? 1 : 0);
  plan->begin.push_back(size > 0 ? first : 0);
  plan->stride.push_back(s);
  plan->size.push_back(size);
  return absl::OkStatus();
}

void PlanWholeDim(int64_t dim, StridedSlicePlan* plan, DimVector* out) {
  plan->begin.push_back(0);
  plan->stride.push_back(1);
  plan->size.push_back(dim);
  out->push_back(dim);
}

}  // namespace

absl::StatusOr<StridedSlicePlan> PlanStridedSlice(const PartialTensorShape& input, absl::Span<const int64_t> begin,
                                                  absl::Span<const int64_t> end, absl::Span<const int64_t> strides,
                                                  const StridedSliceMasks& masks) {
  const size_t n = begin.size();
  if (end.size() != n || strides.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("StridedSlice begin, end and strides have ", n, ", ", end.size(),
                                                   " and ", strides.size(), " entries; they must agree"));
  }
  if (n > kMaxSpecEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("StridedSlice spec has ", n, " entries, more than ", kMaxSpecEntries));
  }
  if (input.unknown_rank()) return absl::InvalidArgumentError("StridedSlice input has unknown rank");
  const int rank = input.dims();
  int ellipses = 0, named = 0;
  for (int i = 0; i < static_cast<int>(n); ++i) {
    if (Bit(masks.ellipsis_mask, i)) {
      ++ellipses;
    } else if (!Bit(masks.new_axis_mask, i)) {
      ++named;
    }
  }
  if (ellipses > 1) {
    return absl::InvalidArgumentError(absl::StrCat("StridedSlice ellipsis_mask ", masks.ellipsis_mask,
                                                   " marks more than one ellipsis"));
  }
  if (named > rank) {
    return absl::InvalidArgumentError(absl::StrCat("StridedSlice spec indexes ", named, " dims of an input of rank ",
                                                   rank, " (", input.DebugString(), ")"));
  }
  StridedSlicePlan plan;
  DimVector out;
  int d = 0;  // the next input dim
  for (int i = 0; i < static_cast<int>(n); ++i) {
    if (Bit(masks.ellipsis_mask, i)) {
      for (int k = 0; k < rank - named; ++k, ++d) PlanWholeDim(input.dim_size(d), &plan, &out);
    } else if (Bit(masks.new_axis_mask, i)) {
      out.push_back(1);
    } else {
      STRATA_RETURN_IF_ERROR(PlanDim(i, d, input.dim_size(d), begin[i], end[i], strides[i], masks, &plan));
      if (!Bit(masks.shrink_axis_mask, i)) out.push_back(plan.size.back());
      ++d;
    }
  }
  for (; d < rank; ++d) PlanWholeDim(input.dim_size(d), &plan, &out);
  plan.output = PartialTensorShape(out);
  plan.whole = true;
  for (int k = 0; k < rank; ++k) {
    const int64_t dim = input.dim_size(k);
    if (dim < 0 || plan.size[k] != dim || (dim > 1 && (plan.begin[k] != 0 || plan.stride[k] != 1))) {
      plan.whole = false;
    }
  }
  return plan;
}

absl::Status CheckStridedSliceGradDy(const StridedSlicePlan& plan, const TensorShape& shape, const TensorShape& dy) {
  if (PartialTensorShape(dy.dim_sizes()) == plan.output) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("StridedSliceGrad dy has shape ", dy.DebugString(), "; the slice of ",
                                                 shape.DebugString(), " has shape ", plan.output.DebugString()));
}

namespace {

absl::Status StridedSliceShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  for (int i = 1; i <= 3; ++i) STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &unused));
  StridedSliceMasks masks;
  STRATA_RETURN_IF_ERROR(ReadStridedSliceMasks(c, &masks));
  const PartialTensorShape& input = c.input(0);
  if (input.unknown_rank()) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(auto begin, ConstIntInput(c, 1, "StridedSlice begin"));
  STRATA_ASSIGN_OR_RETURN(auto end, ConstIntInput(c, 2, "StridedSlice end"));
  STRATA_ASSIGN_OR_RETURN(auto strides, ConstIntInput(c, 3, "StridedSlice strides"));
  if (begin && end && strides) {
    absl::StatusOr<StridedSlicePlan> plan = PlanStridedSlice(input, *begin, *end, *strides, masks);
    if (!plan.ok()) return c.Annotate(plan.status());
    c.set_output(0, plan->output);
    return absl::OkStatus();
  }
  // Values unknown: the spec's length and masks still fix the output's rank
  // (and its new axes). Plan a whole-dims spec over unknown dims.
  int64_t n = -1;
  for (int i = 1; i <= 3 && n < 0; ++i) n = c.input(i).dims() == 1 ? c.input(i).dim_size(0) : -1;
  if (n < 0 || n > kMaxSpecEntries) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  const std::vector<int64_t> zeros(static_cast<size_t>(n), 0), ones(static_cast<size_t>(n), 1);
  absl::StatusOr<StridedSlicePlan> plan =
      PlanStridedSlice(PartialTensorShape(DimVector(static_cast<size_t>(input.dims()), -1)), zeros, zeros,
                       strides ? *strides : ones, masks);
  if (!plan.ok()) return c.Annotate(plan.status());
  c.set_output(0, plan->output);
  return absl::OkStatus();
}

absl::Status StridedSliceGradShapeFn(InferenceContext& c) {
  PartialTensorShape unused;
  for (int i = 0; i <= 3; ++i) STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &unused));
  return SetOutputFromShapeInput(c, 0, "StridedSliceGrad shape");
}

}  // namespace

STRATA_REGISTER_OP("StridedSlice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int16, int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn(StridedSliceShapeFn);

STRATA_REGISTER_OP("StridedSliceGrad")
    .Input("shape: Index")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Input("dy: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn(StridedSliceGradShapeFn);

namespace ops {

namespace {
NodeBuilder& MaskAttrs(NodeBuilder& b, const StridedSliceMasks& m) {
  return b.Attr("begin_mask", m.begin_mask)
      .Attr("end_mask", m.end_mask)
      .Attr("ellipsis_mask", m.ellipsis_mask)
      .Attr("new_axis_mask", m.new_axis_mask)
      .Attr("shrink_axis_mask", m.shrink_axis_mask);
}
Output Out0(Node* n) { return n == nullptr ? Output() : Output(n, 0); }
}  // namespace

Output StridedSlice(const Scope& scope, Output input, Output begin, Output end, Output strides,
                    const StridedSliceMasks& masks) {
  NodeBuilder b(scope, "StridedSlice");
  b.Input(input).Input(begin).Input(end).Input(strides);
  return Out0(MaskAttrs(b, masks).Finalize());
}

Output StridedSliceGrad(const Scope& scope, Output shape, Output begin, Output end, Output strides, Output dy,
                        const StridedSliceMasks& masks) {
  NodeBuilder b(scope, "StridedSliceGrad");
  b.Input(shape).Input(begin).Input(end).Input(strides).Input(dy);
  return Out0(MaskAttrs(b, masks).Finalize());
}

}  // namespace ops
}  // namespace strata
