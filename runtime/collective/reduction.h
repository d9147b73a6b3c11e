// Elementwise reduction kernels the collective algorithms use to merge a
// peer's chunk into their own: MergeInto (Add, Mul, Min, Max) and DivideBy
// (the Div final op), for float, double, int32, int64, half and bfloat16
// (the narrow types are widened to float to merge, and rounded back).
//
//   STRATA_RETURN_IF_ERROR(CheckReducible(DT_FLOAT, MergeOp::kAdd));
//   MergeInto(MergeOp::kAdd, DT_FLOAT, acc, peer_chunk, n);   // acc[i] = acc[i] + peer[i]
//   DivideBy(DT_FLOAT, acc, n, group_size);                    // acc[i] /= group_size
//   // out[i] = (in[0][i] + ... + in[k-1][i]) / group_size, one pass over memory:
//   ReduceInputs(MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT, ins, k, begin, end, out, group_size);
//
// Integer Div truncates, as TensorFlow's does. Thread-safety: pure functions.
#ifndef STRATA_RUNTIME_COLLECTIVE_REDUCTION_H_
#define STRATA_RUNTIME_COLLECTIVE_REDUCTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "graph/types.h"
#include "kernels/collective.h"

namespace strata {

// Unimplemented naming the dtype unless MergeInto/DivideBy support it.
absl::Status CheckReducible(DataType dtype);

// acc[i] = op(acc[i], in[i]) for i < n. `dtype` must pass CheckReducible.
void MergeInto(MergeOp op, DataType dtype, void* acc, const void* in, int64_t n);
// acc[i] /= divisor for i < n.
void DivideBy(DataType dtype, void* acc, int64_t n, int64_t divisor);
// out[i] = op(...op(op(inputs[0][i], inputs[1][i]), inputs[2][i])...), then
// divided by `divisor` when final_op is Div, for begin <= i < end (half and
// bfloat16: the whole fold in float, rounded once); `out` is
// indexed like the inputs (element i at out + i). Up to 4 inputs are merged
// in one pass (more take a pass per 3 more, over L1-sized blocks of `out`),
// so memory sees each input once and `out` once. `out` may not overlap any
// input.
void ReduceInputs(MergeOp op, FinalOp final_op, DataType dtype, const void* const* inputs,
                  int num_inputs, int64_t begin, int64_t end, void* out, int64_t divisor);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_REDUCTION_H_
