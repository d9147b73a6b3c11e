// StridedSlice and StridedSliceGrad, TensorFlow's names, inputs and attrs:
//
//   StridedSlice(input: T, begin: Index, end: Index, strides: Index;
//                attrs begin_mask, end_mask, ellipsis_mask, new_axis_mask,
//                shrink_axis_mask) -> output: T
//   StridedSliceGrad(shape: Index, begin, end, strides, dy: T; same attrs)
//       -> output: T   (zeros of `shape` with dy where the slice took x)
//
// Python's x[1:-1:2, ..., tf.newaxis, 3] is one StridedSlice: entry i of
// begin/end/strides is one index of the spec; bit i of a mask marks entry i
// as "begin from the start" (begin_mask), "to the end" (end_mask), the
// ellipsis (at most one; it spans the dims no other entry names), a new
// axis of size 1 (new_axis_mask), or a single index whose dim the output
// drops (shrink_axis_mask). Without an ellipsis the dims after the last
// entry are taken whole. Negative begin/end count from the end of the dim;
// out-of-range ones are clamped, as Python's slices are, except for a
// shrink index, which must lie in the dim.
//
//   // x[:, 1] of a [batch, 4] tensor: a [batch] vector.
//   Output col = ops::StridedSlice(s, x, ops::Const<int32_t>(s, {0, 1}),
//                                  ops::Const<int32_t>(s, {0, 2}), ops::Const<int32_t>(s, {1, 1}),
//                                  {.begin_mask = 1, .end_mask = 1, .shrink_axis_mask = 2});
//
// PlanStridedSlice is the rule the shape function (partial shapes) and the
// kernels (full shapes) share, so both refuse the same specs with the same
// messages (InvalidArgument without a node prefix).
//
// Thread-safety: registrations are static; builders follow Scope's
// contract; PlanStridedSlice is pure.
#ifndef STRATA_GRAPH_OPS_STRIDED_SLICE_H_
#define STRATA_GRAPH_OPS_STRIDED_SLICE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"

namespace strata {

// The five mask attrs, bit i for entry i of begin/end/strides.
struct StridedSliceMasks {
  int64_t begin_mask = 0;
  int64_t end_mask = 0;
  int64_t ellipsis_mask = 0;
  int64_t new_axis_mask = 0;
  int64_t shrink_axis_mask = 0;
};

// What a spec takes from an input: for each input dim d, the elements
// begin[d], begin[d] + stride[d], ... (size[d] of them; -1 when the dim is
// unknown). The output holds them in row-major order under `output`'s shape,
// which adds the new axes and drops the shrunk dims.
struct StridedSlicePlan {
  std::vector<int64_t> begin, stride, size;
  PartialTensorShape output;
  // Every dim taken whole in order: the output is the input reshaped.
  bool whole = false;
};

// InvalidArgument for specs of different lengths or longer than 32 entries,
// more than one ellipsis, more entries than the input has dims, a zero
// stride, or a shrink index outside its dim (or with a negative stride).
// `input` must have a known rank.
absl::StatusOr<StridedSlicePlan> PlanStridedSlice(const PartialTensorShape& input,
                                                  absl::Span<const int64_t> begin,
                                                  absl::Span<const int64_t> end,
                                                  absl::Span<const int64_t> strides,
                                                  const StridedSliceMasks& masks);

// StridedSliceGrad's check that dy has the shape of `plan`'s slice of
// `shape`; InvalidArgument naming both otherwise.
absl::Status CheckStridedSliceGradDy(const StridedSlicePlan& plan, const TensorShape& shape, const TensorShape& dy);

// The masks read from a StridedSlice or StridedSliceGrad node's attrs through
// `c`'s GetAttr (an InferenceContext or an OpKernelConstruction).
template <typename Ctx>
absl::Status ReadStridedSliceMasks(const Ctx& c, StridedSliceMasks* m) {
  for (auto [name, field] : {std::pair{"begin_mask", &m->begin_mask}, std::pair{"end_mask", &m->end_mask},
                             std::pair{"ellipsis_mask", &m->ellipsis_mask},
                             std::pair{"new_axis_mask", &m->new_axis_mask},
                             std::pair{"shrink_axis_mask", &m->shrink_axis_mask}}) {
    absl::Status s = c.GetAttr(name, field);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace ops {

Output StridedSlice(const Scope& scope, Output input, Output begin, Output end, Output strides,
                    const StridedSliceMasks& masks = {});
Output StridedSliceGrad(const Scope& scope, Output shape, Output begin, Output end, Output strides,
                        Output dy, const StridedSliceMasks& masks = {});

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_STRIDED_SLICE_H_
