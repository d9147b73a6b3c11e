#include "graph/ops/array_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

std::string DimsString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// Product of the known (>= 0) dims, or an error on int64 overflow.
absl::StatusOr<int64_t> KnownProduct(absl::Span<const int64_t> dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) continue;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", DimsString(dims), " has more than 2^63-1 elements"));
    }
    n *= d;
  }
  return n;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> IntTensorValues(const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.NumElements()));
  if (t.dtype() == DT_INT32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<int32_t>()[i];
  } else if (t.dtype() == DT_INT64) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<int64_t>()[i];
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be int32 or int64, got ", DataTypeString(t.dtype())));
  }
  return v;
}

absl::StatusOr<TensorShape> ShapeFromShapeTensor(const Tensor& t, const char* what) {
  if (t.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a 1-D tensor, got shape ", t.shape().DebugString()));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntTensorValues(t, what));
  auto shape = TensorShape::FromDims(dims);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", DimsString(dims),
                                                   " is not a valid shape: ",
                                                   shape.status().message()));
  }
  return shape;
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", axis, " is out of range [", -rank,
                                                   ", ", rank, ") for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::StatusOr<PartialTensorShape> GatherOutputShape(const PartialTensorShape& params,
                                                     const PartialTensorShape& indices, int64_t axis) {
  if (params.unknown_rank() || indices.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int64_t rank = params.dims();
  if (rank < 1) return absl::InvalidArgumentError("GatherV2 params must be at least 1-D, got a scalar");
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("GatherV2 axis ", axis, " is outside [", -rank, ", ", rank, ") for params ", params.DebugString()));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> out(params.dim_sizes().begin(), params.dim_sizes().begin() + axis);
  out.insert(out.end(), indices.dim_sizes().begin(), indices.dim_sizes().end());
  out.insert(out.end(), params.dim_sizes().begin() + axis + 1, params.dim_sizes().end());
  return PartialTensorShape(out);
}

absl::StatusOr<GatherPlan> PlanGather(const TensorShape& params, const TensorShape& indices, int64_t axis) {
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape out, GatherOutputShape(params, indices, axis));
  GatherPlan p;
  STRATA_ASSIGN_OR_RETURN(p.out, out.AsTensorShape());
  if (axis < 0) axis += params.dims();
  for (int d = 0; d < axis; ++d) p.outer *= params.dim_size(d);
  for (int d = static_cast<int>(axis) + 1; d < params.dims(); ++d) p.inner *= params.dim_size(d);
  p.n = params.dim_size(static_cast<int>(axis));
  return p;
}

absl::StatusOr<PartialTensorShape> SegmentSumOutputShape(const PartialTensorShape& data,
                                                         const PartialTensorShape& segment_ids, int64_t num_segments) {
  if (num_segments < 0) {
    return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum num_segments is ", num_segments));
  }
  if (data.unknown_rank() || segment_ids.unknown_rank()) return PartialTensorShape::UnknownRank();
  if (segment_ids.dims() > data.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum segment_ids ", segment_ids.DebugString(),
                                                   " have more dims than data ", data.DebugString()));
  }
  for (int i = 0; i < segment_ids.dims(); ++i) {
    const int64_t a = segment_ids.dim_size(i), b = data.dim_size(i);
    if (a >= 0 && b >= 0 && a != b) {
      return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum segment_ids ", segment_ids.DebugString(),
                                                     " are not a prefix of data's shape ", data.DebugString()));
    }
  }
  std::vector<int64_t> out = {num_segments};
  out.insert(out.end(), data.dim_sizes().begin() + segment_ids.dims(), data.dim_sizes().end());
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> ExpandDimsOutputShape(const PartialTensorShape& input, int64_t dim) {
  if (input.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int64_t rank = input.dims();
  if (dim < -rank - 1 || dim > rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExpandDims dim ", dim, " is outside [", -rank - 1, ", ", rank, "] for shape ", input.DebugString()));
  }
  if (dim < 0) dim += rank + 1;
  std::vector<int64_t> dims(input.dim_sizes().begin(), input.dim_sizes().end());
  dims.insert(dims.begin() + dim, 1);
  return PartialTensorShape(dims);
}

absl::StatusOr<PartialTensorShape> SqueezeOutputShape(const PartialTensorShape& input,
                                                      absl::Span<const int64_t> dims) {
  if (input.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int64_t rank = input.dims();
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    if (d < -rank || d >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Squeeze dim ", d, " is outside [", -rank, ", ", rank, ") for shape ", input.DebugString()));
    }
    const int64_t i = d < 0 ? d + rank : d;
    if (input.dim_size(static_cast<int>(i)) > 1 || input.dim_size(static_cast<int>(i)) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("Squeeze dim ", d, " has size ",
                                                     input.dim_size(static_cast<int>(i)), ", not 1, in shape ",
                                                     input.DebugString()));
    }
    drop[static_cast<size_t>(i)] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t size = input.dim_size(static_cast<int>(i));
    if (dims.empty() && size == -1) return PartialTensorShape::UnknownRank();  // 1 or not
    if (drop[static_cast<size_t>(i)] || (dims.empty() && size == 1)) continue;
    out.push_back(size);
  }
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> ReshapeOutputShape(const PartialTensorShape& input,
                                                      absl::Span<const int64_t> requested) {
  int unknown = -1;
  for (int i = 0; i < static_cast<int>(requested.size()); ++i) {
    if (requested[i] >= 0) continue;
    if (requested[i] != -1) {
      return absl::InvalidArgumentError(absl::StrCat("requested shape ", DimsString(requested),
                                                     " has negative dimension ", requested[i]));
    }
    if (unknown >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "requested shape ", DimsString(requested), " has more than one -1 dimension"));
    }
    unknown = i;
  }
  STRATA_ASSIGN_OR_RETURN(int64_t product, KnownProduct(requested, "requested shape"));
  DimVector out(requested.begin(), requested.end());
  if (!input.IsFullyDefined()) return PartialTensorShape(out);  // the -1 stays unknown

  const int64_t n = input.AsTensorShape()->num_elements();
  auto mismatch = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape a tensor of shape ", input.DebugString(), " (", n,
        " elements) into shape ", DimsString(requested),
        unknown < 0 ? absl::StrCat(" (", product, " elements)") : std::string()));
  };
  if (unknown < 0) {
    if (product != n) return mismatch();
  } else {
    // A zero among the other dims would leave the -1 ambiguous.
    if (product == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot infer the -1 in requested shape ", DimsString(requested),
                       " when its other dimensions multiply to 0"));
    }
    if (n % product != 0) return mismatch();
    out[unknown] = n / product;
  }
  return PartialTensorShape(out);
}

absl::StatusOr<std::vector<int>> NormalizePermutation(absl::Span<const int64_t> perm, int rank) {
  if (static_cast<int>(perm.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("perm ", DimsString(perm), " has ",
                                                   perm.size(), " entries for a tensor of rank ",
                                                   rank));
  }
  std::vector<int> out(rank);
  std::vector<bool> seen(rank, false);
  for (int i = 0; i < rank; ++i) {
    STRATA_ASSIGN_OR_RETURN(out[i], NormalizeAxis(perm[i], rank, "perm entry"));
    if (seen[out[i]]) {
      return absl::InvalidArgumentError(absl::StrCat("perm ", DimsString(perm),
                                                     " is not a permutation: ", out[i],
                                                     " appears twice"));
    }
    seen[out[i]] = true;
  }
  return out;
}

absl::StatusOr<PartialTensorShape> TransposeOutputShape(const PartialTensorShape& input,
                                                        absl::Span<const int64_t> perm) {
  const int rank = static_cast<int>(perm.size());
  if (!input.unknown_rank() && input.dims() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("perm ", DimsString(perm), " has ", rank,
                                                   " entries but the input ", input.DebugString(),
                                                   " has rank ", input.dims()));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<int> p, NormalizePermutation(perm, rank));
  DimVector out(rank, -1);
  if (!input.unknown_rank()) {
    for (int i = 0; i < rank; ++i) out[i] = input.dim_size(p[i]);
  }
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> ConcatOutputShape(absl::Span<const PartialTensorShape> inputs,
                                                     int64_t axis) {
  int rank = -1;
  for (const auto& s : inputs) {
    if (s.unknown_rank()) continue;
    if (rank >= 0 && s.dims() != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcatV2 inputs must have the same rank, got ", inputs[0].DebugString(), " and ",
          s.DebugString()));
    }
    rank = s.dims();
  }
  if (rank < 0) return PartialTensorShape::UnknownRank();
  if (rank == 0) {
    return absl::InvalidArgumentError("cannot concatenate scalars (use Pack to stack them)");
  }
  STRATA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, rank, "concat axis"));
  DimVector out(rank, -1);
  int64_t axis_size = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& s = inputs[k];
    if (s.unknown_rank()) {
      axis_size = -1;
      continue;
    }
    for (int i = 0; i < rank; ++i) {
      if (i == a) continue;
      const int64_t d = s.dim_size(i);
      if (out[i] >= 0 && d >= 0 && out[i] != d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ConcatV2 input ", k, " has shape ", s.DebugString(), " but dimension ", i,
            " of the others is ", out[i], " (concatenating along axis ", a, ")"));
      }
      if (d >= 0) out[i] = d;
    }
    const int64_t d = s.dim_size(a);
    if (axis_size >= 0 && d >= 0) {
      if (d > std::numeric_limits<int64_t>::max() - axis_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("ConcatV2 output dimension ", a, " overflows int64"));
      }
      axis_size += d;
    } else {
      axis_size = -1;
    }
  }
  out[a] = axis_size;
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> SliceOutputShape(const PartialTensorShape& input,
                                                    absl::Span<const int64_t> begin,
                                                    absl::Span<const int64_t> size) {
  if (begin.size() != size.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Slice begin ", DimsString(begin), " and size ",
                                                   DimsString(size), " differ in length"));
  }
  const int rank = static_cast<int>(begin.size());
  if (!input.unknown_rank() && input.dims() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Slice begin and size have ", rank,
                                                   " entries for input of shape ",
                                                   input.DebugString()));
  }
  DimVector out(rank, -1);
  for (int i = 0; i < rank; ++i) {
    const int64_t dim = input.unknown_rank() ? -1 : input.dim_size(i);
    if (begin[i] < 0 || (dim >= 0 && begin[i] > dim)) {
      return absl::InvalidArgumentError(absl::StrCat("Slice begin[", i, "] = ", begin[i],
                                                     " is outside [0, ", dim, "] for input ",
                                                     input.DebugString()));
    }
    if (size[i] == -1) {
      out[i] = dim >= 0 ? dim - begin[i] : -1;
      continue;
    }
    if (size[i] < 0 || (dim >= 0 && size[i] > dim - begin[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Slice size[", i, "] = ", size[i], " with begin ", begin[i], " does not fit input ",
          input.DebugString(), " (size must be -1 or in [0, dim - begin])"));
    }
    out[i] = size[i];
  }
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> PackOutputShape(absl::Span<const PartialTensorShape> inputs,
                                                   int64_t axis) {
  PartialTensorShape merged = PartialTensorShape::UnknownRank();
  for (size_t k = 0; k < inputs.size(); ++k) {
    auto m = merged.Merge(inputs[k]);
    if (!m.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("Pack inputs must have one shape, but input ",
                                                     k, " has shape ", inputs[k].DebugString(),
                                                     " and the ones before ",
                                                     merged.DebugString()));
    }
    merged = *m;
  }
  if (merged.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int rank = merged.dims();
  STRATA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, rank + 1, "Pack axis"));
  DimVector out(merged.dim_sizes().begin(), merged.dim_sizes().end());
  out.insert(out.begin() + a, static_cast<int64_t>(inputs.size()));
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> OneHotOutputShape(const PartialTensorShape& indices,
                                                     int64_t depth, int64_t axis) {
  if (depth < -1) {
    return absl::InvalidArgumentError(absl::StrCat("OneHot depth must be >= 0, got ", depth));
  }
  if (axis < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("OneHot axis must be -1 or in [0, rank of indices], got ", axis));
  }
  if (indices.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int rank = indices.dims();
  if (axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("OneHot axis must be -1 or in [0, ", rank,
                                                   "] for indices of shape ",
                                                   indices.DebugString(), ", got ", axis));
  }
  DimVector out(indices.dim_sizes().begin(), indices.dim_sizes().end());
  out.insert(out.begin() + (axis == -1 ? rank : axis), depth);
  if (indices.IsFullyDefined() && depth >= 0) {
    auto full = TensorShape::FromDims(out);
    if (!full.ok()) return full.status();
  }
  return PartialTensorShape(out);
}

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

}  // namespace

absl::StatusOr<int64_t> RangeLength(double start, double limit, double delta) {
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
    return absl::InvalidArgumentError("Range: start, limit and delta must be finite");
  }
  if (delta == 0) return absl::InvalidArgumentError("Range: delta must not be 0");
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(absl::StrCat("Range: start ", start, " > limit ", limit, " with delta > 0"));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(absl::StrCat("Range: start ", start, " < limit ", limit, " with delta < 0"));
  }
  const double n = std::ceil(std::abs((limit - start) / delta));
  if (n > static_cast<double>(int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("Range: ", n, " elements is too many"));
  }
  return static_cast<int64_t>(n);
}

absl::StatusOr<int64_t> RangeLength(int64_t start, int64_t limit, int64_t delta) {
  if (delta == 0) return absl::InvalidArgumentError("Range: delta must not be 0");
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(absl::StrCat("Range: start ", start, " > limit ", limit, " with delta > 0"));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(absl::StrCat("Range: start ", start, " < limit ", limit, " with delta < 0"));
  }
  // In unsigned arithmetic: |limit - start| may not fit int64.
  const uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                  : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
  const uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
  const uint64_t n = span / step + (span % step != 0 ? 1 : 0);
  if (n > (uint64_t{1} << 40)) return absl::InvalidArgumentError(absl::StrCat("Range: ", n, " elements is too many"));
  return static_cast<int64_t>(n);
}

absl::StatusOr<PartialTensorShape> TileOutputShape(const PartialTensorShape& input,
                                                   absl::Span<const int64_t> multiples) {
  if (input.unknown_rank()) return UnknownDimsOfLength(static_cast<int64_t>(multiples.size()));
  if (static_cast<int>(multiples.size()) != input.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("Tile multiples must have one entry per dim of the input (",
                                                   input.dims(), "), got ", multiples.size()));
  }
  DimVector out;
  for (int i = 0; i < input.dims(); ++i) {
    const int64_t m = multiples[i], d = input.dim_size(i);
    if (m < 0) return absl::InvalidArgumentError(absl::StrCat("Tile multiples[", i, "] is ", m, ", must be >= 0"));
    if (d < 0) {
      out.push_back(m == 0 ? 0 : -1);
      continue;
    }
    if (m > 0 && d > std::numeric_limits<int64_t>::max() / m) {
      return absl::InvalidArgumentError(absl::StrCat("Tile: dim ", i, " of size ", d, " times ", m, " overflows"));
    }
    out.push_back(d * m);
  }
  PartialTensorShape shape(out);
  if (shape.IsFullyDefined() && !shape.AsTensorShape().ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Tile: the output ", shape.DebugString(), " has too many elements"));
  }
  return shape;
}

absl::StatusOr<std::vector<PartialTensorShape>> SplitOutputShapes(const PartialTensorShape& input, int64_t axis,
                                                                  int64_t num_split,
                                                                  absl::Span<const int64_t> sizes) {
  const char* op = sizes.empty() ? "Split" : "SplitV";
  if (num_split < 1) return absl::InvalidArgumentError(absl::StrCat(op, ": num_split must be >= 1"));
  if (input.unknown_rank()) return std::vector<PartialTensorShape>(num_split, PartialTensorShape::UnknownRank());
  if (input.dims() == 0) return absl::InvalidArgumentError(absl::StrCat(op, ": cannot split a scalar"));
  STRATA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, input.dims(), "split_dim"));
  const int64_t d = input.dim_size(a);
  std::vector<int64_t> parts;
  if (sizes.empty()) {
    if (d >= 0 && d % num_split != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Split: dim ", a, " of size ", d,
                                                     " does not split into ", num_split, " equal parts"));
    }
    parts.assign(num_split, d >= 0 ? d / num_split : -1);
  } else {
    if (static_cast<int64_t>(sizes.size()) != num_split) {
      return absl::InvalidArgumentError(absl::StrCat("SplitV: ", sizes.size(), " size_splits for num_split ", num_split));
    }
    int64_t known = 0, unknown_at = -1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == -1 && unknown_at < 0) {
        unknown_at = static_cast<int64_t>(i);
        continue;
      }
      if (sizes[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits[", i, "] is ", sizes[i],
                                                       " (one may be -1, the rest >= 0)"));
      }
      if (sizes[i] > std::numeric_limits<int64_t>::max() - known) {
        return absl::InvalidArgumentError("SplitV: size_splits overflow");
      }
      known += sizes[i];
    }
    parts.assign(sizes.begin(), sizes.end());
    if (d >= 0 && (unknown_at < 0 ? known != d : known > d)) {
      return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits sum to ", known, unknown_at < 0 ? "" : " (and a -1)",
                                                     ", dim ", a, " has size ", d));
    }
    if (unknown_at >= 0) parts[unknown_at] = d >= 0 ? d - known : -1;
  }
  std::vector<PartialTensorShape> out;
  for (int64_t p : parts) {
    DimVector dims(input.dim_sizes().begin(), input.dim_sizes().end());
    dims[a] = p;
    out.emplace_back(dims);
  }
  return out;
}

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
