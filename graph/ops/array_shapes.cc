// The array op family's shape rules (graph/ops/array_ops.h, "Shape
// rules"): pure functions of partial shapes and constant values, shared by
// the shape functions (array_ops.cc) and the kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"

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

// Whether `shape`'s first dims are those of `prefix` (unknown dims match
// anything); both of known rank.
bool StartsWith(const PartialTensorShape& shape, const PartialTensorShape& prefix) {
  if (prefix.dims() > shape.dims()) return false;
  for (int i = 0; i < prefix.dims(); ++i) {
    const int64_t a = prefix.dim_size(i), b = shape.dim_size(i);
    if (a >= 0 && b >= 0 && a != b) return false;
  }
  return true;
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

absl::Status CheckBandBounds(const TensorShape& input, int64_t num_lower, int64_t num_upper) {
  const int64_t m = input.dim_size(input.dims() - 2), n = input.dim_size(input.dims() - 1);
  if (num_lower > m || num_upper > n) {
    return absl::InvalidArgumentError(absl::StrCat("MatrixBandPart num_lower ", num_lower, " must be at most ", m,
                                                   " and num_upper ", num_upper, " at most ", n, " (the matrix is ",
                                                   m, " x ", n, ")"));
  }
  return absl::OkStatus();
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
  if (input.unknown_rank()) return PartialTensorShape(DimVector(multiples.size(), -1));
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

absl::StatusOr<PartialTensorShape> DynamicPartitionOutputShape(const PartialTensorShape& data,
                                                               const PartialTensorShape& partitions,
                                                               int64_t count) {
  if (data.unknown_rank() || partitions.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int p = partitions.dims();
  if (!StartsWith(data, partitions)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DynamicPartition partitions' shape ", partitions.DebugString(),
                     " must be a prefix of data's shape ", data.DebugString()));
  }
  std::vector<int64_t> out = {count};
  out.insert(out.end(), data.dim_sizes().begin() + p, data.dim_sizes().end());
  return PartialTensorShape(out);
}

absl::StatusOr<PartialTensorShape> DynamicStitchOutputShape(
    absl::Span<const PartialTensorShape> indices, absl::Span<const PartialTensorShape> data,
    int64_t rows) {
  if (indices.size() != data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DynamicStitch has ", indices.size(), " indices inputs but ", data.size(), " data inputs"));
  }
  // The slices' shape, merged over every input whose ranks are known.
  PartialTensorShape slice = PartialTensorShape::UnknownRank();
  for (size_t m = 0; m < indices.size(); ++m) {
    const PartialTensorShape& idx = indices[m];
    const PartialTensorShape& d = data[m];
    if (idx.unknown_rank() || d.unknown_rank()) continue;
    if (!StartsWith(d, idx)) {
      return absl::InvalidArgumentError(
          absl::StrCat("DynamicStitch data[", m, "] has shape ", d.DebugString(),
                       ", which does not start with indices[", m, "]'s shape ", idx.DebugString()));
    }
    const PartialTensorShape own(d.dim_sizes().subspan(static_cast<size_t>(idx.dims())));
    absl::StatusOr<PartialTensorShape> merged = slice.Merge(own);
    if (!merged.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DynamicStitch data[", m, "] has shape ", d.DebugString(), ": its slices (after indices[",
          m, "]'s shape ", idx.DebugString(), ") have shape ", own.DebugString(),
          " where earlier inputs' have ", slice.DebugString()));
    }
    slice = *std::move(merged);
  }
  if (slice.unknown_rank()) return PartialTensorShape::UnknownRank();
  std::vector<int64_t> out = {rows};
  out.insert(out.end(), slice.dim_sizes().begin(), slice.dim_sizes().end());
  return PartialTensorShape(out);
}

}  // namespace strata
