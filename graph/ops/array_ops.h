// The array op family: ops that move, copy or describe elements without
// arithmetic. Op names, inputs, outputs and attrs are TensorFlow's, so
// GraphDefs written by TensorFlow import unchanged:
//
//   Reshape(tensor: T, shape: Tshape)            Transpose(x: T, perm: Tperm)
//   ConcatV2(values: N * T, axis: Tidx)          Slice(input: T, begin: Index, size: Index)
//   Pack(values: N * T; attr axis)               Fill(dims: index_type, value: T)
//   ZerosLike(x: T)   OnesLike(x: T)             Shape(input: T; attr out_type = int32)
//   OneHot(indices: TI, depth: int32, on_value: T, off_value: T; attr axis = -1)
//   Range(start: Tidx, limit: Tidx, delta: Tidx)  Tile(input: T, multiples: Tmultiples)
//   MatrixBandPart(input: T, num_lower: Tindex, num_upper: Tindex)
//   Split(split_dim: int32, value: T; attr num_split) -> num_split * T
//   SplitV(value: T, size_splits: Tlen, split_dim: int32; attr num_split) -> num_split * T
//   DynamicPartition(data: T, partitions: int32; attr num_partitions) -> num_partitions * T
//   DynamicStitch(indices: N * int32, data: N * T) -> merged: T
//
// Each op has a shape function that uses the constant value of its shape,
// perm, axis, begin/size or depth input when that input is a Const, and the
// builder functions below (namespace strata::ops):
//
//   Scope s = Scope::NewRootScope();
//   Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 784}));
//   Output img = ops::Reshape(s, x, ops::Const<int32_t>(s, {-1, 28, 28, 1}));
//   Output both = ops::Concat(s, {a, b}, ops::Const(s, 0));
//   Output rows = ops::Stack(s, {a, b}, /*axis=*/1);
//
// The shape rules (the "*OutputShape" functions) are shared by the shape
// functions, which see partial shapes, and the CPU kernels, which see full
// ones, so both reject the same inputs with the same messages. Their errors
// are InvalidArgument without a node prefix; shape functions add the node's
// name, the executor adds it for kernels.
//
// Thread-safety: the op registrations are static; builder functions follow
// Scope's contract (one thread per graph at a time). The free functions are
// pure and thread-safe.
#ifndef STRATA_GRAPH_OPS_ARRAY_OPS_H_
#define STRATA_GRAPH_OPS_ARRAY_OPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"

namespace strata {

class InferenceContext;

// ---- Reading index tensors -------------------------------------------------

// The values of an int32 or int64 tensor (any rank, flattened) as int64;
// InvalidArgument naming `what` for another dtype.
absl::StatusOr<std::vector<int64_t>> IntTensorValues(const Tensor& t, const char* what);

// For shape functions: the values of input `i` (int32/int64) when it is a
// constant known at graph-build time, nullopt when it is not; an error
// naming the node and `what` for another dtype.
absl::StatusOr<std::optional<std::vector<int64_t>>> ConstIntInput(InferenceContext& c, int i,
                                                                  const char* what);

// A shape given as a 1-D int32/int64 tensor (Fill's `dims`, the random ops'
// `shape`). InvalidArgument naming `what` if the tensor is not 1-D, a dim is
// negative or the element count overflows int64.
absl::StatusOr<TensorShape> ShapeFromShapeTensor(const Tensor& t, const char* what);

// `axis` in [-rank, rank) mapped to [0, rank); InvalidArgument naming `what`
// otherwise.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank, const char* what);

// For a shape function: sets output 0 to the shape held by 1-D input `input`
// (Fill's dims, the random ops' shape): the full shape when the input is a
// constant, else its rank when the input's length is known.
absl::Status SetOutputFromShapeInput(InferenceContext& c, int input, const char* what);

// ---- Shape rules (partial shapes in, partial shapes out) --------------------
// A fully defined input gives a fully defined output.

// Reshape to `requested` (at most one -1, which takes the remaining size).
absl::StatusOr<PartialTensorShape> ReshapeOutputShape(const PartialTensorShape& input,
                                                      absl::Span<const int64_t> requested);

// A dim of size 1 inserted at `dim`, in [-rank - 1, rank] (negative counts
// from the end, as TensorFlow's ExpandDims).
absl::StatusOr<PartialTensorShape> ExpandDimsOutputShape(const PartialTensorShape& input, int64_t dim);
// `dims` (each in [-rank, rank), each of size 1 or unknown) removed; empty
// `dims`: every dim of size 1 (the output's rank is then unknown if some
// dim is).
absl::StatusOr<PartialTensorShape> SqueezeOutputShape(const PartialTensorShape& input,
                                                      absl::Span<const int64_t> dims);

// GatherV2 (batch_dims 0): params.shape[:axis] + indices.shape +
// params.shape[axis + 1:], `axis` in [-rank, rank).
absl::StatusOr<PartialTensorShape> GatherOutputShape(const PartialTensorShape& params,
                                                     const PartialTensorShape& indices, int64_t axis);
// MatrixBandPart's kernels: num_lower at most the rows and num_upper at
// most the columns of input's innermost matrices (rank >= 2);
// InvalidArgument naming both otherwise.
absl::Status CheckBandBounds(const TensorShape& input, int64_t num_lower, int64_t num_upper);
// A gather's layout for the kernels: params seen as [outer, n, inner]
// (n along the axis), the output as [outer, indices, inner].
struct GatherPlan {
  TensorShape out;
  int64_t outer = 1, n = 0, inner = 1;
};
absl::StatusOr<GatherPlan> PlanGather(const TensorShape& params, const TensorShape& indices, int64_t axis);
// UnsortedSegmentSum: [num_segments] + data.shape[segment_ids.rank:];
// segment_ids' shape must be a prefix of data's.
absl::StatusOr<PartialTensorShape> SegmentSumOutputShape(const PartialTensorShape& data,
                                                         const PartialTensorShape& segment_ids, int64_t num_segments);

// `perm` checked to be a permutation of [0, rank) (entries may be negative,
// counting from the end), returned normalized.
absl::StatusOr<std::vector<int>> NormalizePermutation(absl::Span<const int64_t> perm, int rank);
absl::StatusOr<PartialTensorShape> TransposeOutputShape(const PartialTensorShape& input,
                                                        absl::Span<const int64_t> perm);

// Inputs of one rank >= 1 agreeing on every dim but `axis`.
absl::StatusOr<PartialTensorShape> ConcatOutputShape(absl::Span<const PartialTensorShape> inputs,
                                                     int64_t axis);

// `begin[i]` in [0, dim i], `size[i]` -1 (to the end) or with begin + size <=
// dim i; both of the input's rank.
absl::StatusOr<PartialTensorShape> SliceOutputShape(const PartialTensorShape& input,
                                                    absl::Span<const int64_t> begin,
                                                    absl::Span<const int64_t> size);

// Inputs of one shape, stacked along a new dim at `axis` in [-(rank+1), rank].
absl::StatusOr<PartialTensorShape> PackOutputShape(absl::Span<const PartialTensorShape> inputs,
                                                   int64_t axis);

// Range's length: ceil((limit - start) / delta) for floating types,
// (|limit - start| + |delta| - 1) / |delta| for integers (TensorFlow's);
// InvalidArgument for a zero delta, a delta that moves away from limit, or
// more than 2^40 elements.
absl::StatusOr<int64_t> RangeLength(double start, double limit, double delta);
absl::StatusOr<int64_t> RangeLength(int64_t start, int64_t limit, int64_t delta);

// Tile: dim i times multiples[i] (>= 0), one multiple per dim.
absl::StatusOr<PartialTensorShape> TileOutputShape(const PartialTensorShape& input,
                                                   absl::Span<const int64_t> multiples);

// Split and SplitV: each output's shape, the input cut along `axis` (in
// [-rank, rank)) into `sizes` (SplitV: at most one -1, which takes the rest;
// they sum to the dim) or, for Split (`sizes` empty), into `num_split` equal
// parts (the dim a multiple of num_split).
absl::StatusOr<std::vector<PartialTensorShape>> SplitOutputShapes(const PartialTensorShape& input, int64_t axis,
                                                                  int64_t num_split,
                                                                  absl::Span<const int64_t> sizes);

// Indices' shape with `depth` (-1 unknown) inserted at `axis` (-1: last).
absl::StatusOr<PartialTensorShape> OneHotOutputShape(const PartialTensorShape& indices,
                                                     int64_t depth, int64_t axis);

// DynamicPartition: each output's shape, [count] + data.shape[partitions.rank:]
// (`count` -1 when unknown); partitions' shape must be a prefix of data's.
absl::StatusOr<PartialTensorShape> DynamicPartitionOutputShape(const PartialTensorShape& data,
                                                               const PartialTensorShape& partitions,
                                                               int64_t count);
// DynamicStitch: merged's shape, [rows] + the slices' shape (`rows` -1 when
// unknown). Each data[m]'s shape must be indices[m]'s followed by the
// slices' shape, the same for every m (data[0].shape[indices[0].rank:] once
// all are known); InvalidArgument naming the input otherwise.
absl::StatusOr<PartialTensorShape> DynamicStitchOutputShape(
    absl::Span<const PartialTensorShape> indices, absl::Span<const PartialTensorShape> data,
    int64_t rows);

namespace ops {

Output Reshape(const Scope& scope, Output tensor, Output shape);
Output ExpandDims(const Scope& scope, Output input, Output dim);
Output Squeeze(const Scope& scope, Output input, const std::vector<int64_t>& squeeze_dims = {});
// Rows (along `axis`) of `params` at `indices`: an embedding lookup.
Output GatherV2(const Scope& scope, Output params, Output indices, Output axis);
// out[segment_ids[i]] += data[i] (an embedding's gradient); ids in
// [0, num_segments).
Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids, Output num_segments);
Output Transpose(const Scope& scope, Output x, Output perm);
// ConcatV2: at least two values.
Output Concat(const Scope& scope, const OutputList& values, Output axis);
Output Slice(const Scope& scope, Output input, Output begin, Output size);
// Pack.
Output Stack(const Scope& scope, const OutputList& values, int64_t axis = 0);
Output Fill(const Scope& scope, Output dims, Output value);
Output ZerosLike(const Scope& scope, Output x);
Output OnesLike(const Scope& scope, Output x);
Output Shape(const Scope& scope, Output input, DataType out_type = DT_INT32);
Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value,
              Output off_value, int64_t axis = -1);
// start, limit and delta: scalars of one type (int32, int64, float, double).
Output Range(const Scope& scope, Output start, Output limit, Output delta);
Output Tile(const Scope& scope, Output input, Output multiples);
// The band of each innermost matrix of `input` (rank >= 2): element (i, j)
// is kept where i - j <= num_lower and j - i <= num_upper (a negative width
// keeps that whole triangle), zero elsewhere. (0, -1) is a causal mask's
// lower triangle.
Output MatrixBandPart(const Scope& scope, Output input, Output num_lower, Output num_upper);
// num_split equal parts along `axis` (an int32 scalar).
OutputList Split(const Scope& scope, Output axis, Output value, int64_t num_split);
// Parts of the sizes `size_splits` holds (one may be -1) along `axis`.
OutputList SplitV(const Scope& scope, Output value, Output size_splits, Output axis, int64_t num_split);
// DynamicPartition: the slices data[j...] (j running over the positions of
// int32 `partitions`, whose shape is a prefix of data's) sent to output
// partitions[j...], each output keeping them in row-major order of j. Output
// i has shape [number of j with partitions[j...] == i] +
// data.shape[partitions.rank:]. num_partitions >= 1. A partition value
// outside [0, num_partitions) is InvalidArgument (at run time) naming the op,
// its position and its value; partitions' shape not a prefix of data's,
// InvalidArgument (when building, if the shapes are known).
OutputList DynamicPartition(const Scope& scope, Output data, Output partitions,
                            int64_t num_partitions);
// DynamicStitch: merged[indices[m][i...], ...] = data[m][i..., ...], for
// equally long lists (at least one each) of int32 `indices` and of `data`
// of one dtype; DynamicPartition's inverse. merged has shape [max index + 1
// (0 without indices)] + data[0].shape[indices[0].rank:], and each data[m]
// must have shape indices[m].shape + that suffix. Where an index appears
// twice the later one wins (larger m, then later position); rows no index
// names are zeros. InvalidArgument naming the op and the input for a shape
// mismatch, a negative index, or a largest index that would make merged
// larger than the device's allocator can give (its byte limit, else the
// host's memory) instead of trying to allocate it.
Output DynamicStitch(const Scope& scope, const OutputList& indices, const OutputList& data);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_ARRAY_OPS_H_
