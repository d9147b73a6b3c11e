// MatMul's and BatchMatMulV2's shapes, shared by the CPU and GPU kernels.
// BatchMatMulV2: x [..., r, c]
// and y [..., r', c'] (adj_x / adj_y transpose the last two dims), batch
// dims broadcast as numpy's, output [broadcast batch..., m, n]. The plan
// gives, for each output batch (row-major over the broadcast batch dims),
// which x and y batches it multiplies.
//
//   STRATA_ASSIGN_OR_RETURN(BatchMatMulPlan p, PlanBatchMatMul(x.shape(), y.shape(), adj_x, adj_y));
//   for (int64_t b = 0; b < p.batch; ++b) ... x batch p.x_batch[b], y batch p.y_batch[b] ...
//
// Errors: InvalidArgument naming both shapes (rank under 2, inner
// dimensions that differ, batch dims that do not broadcast).
#ifndef STRATA_KERNELS_BATCH_MATMUL_PLAN_H_
#define STRATA_KERNELS_BATCH_MATMUL_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor_shape.h"

namespace strata {

struct BatchMatMulPlan {
  TensorShape out;
  int64_t batch = 1;  // output batches (the product of the broadcast batch dims)
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> x_batch, y_batch;  // per output batch
  // Where x_batch[b] == b * x_stride for every b (x_stride 0: one x for
  // all, 1: one each), and likewise y: one strided batched product does it.
  bool strided = false;
  int64_t x_stride = 0, y_stride = 0;
};

absl::StatusOr<BatchMatMulPlan> PlanBatchMatMul(const TensorShape& x, const TensorShape& y, bool adj_x, bool adj_y);

// MatMul's (2-D, no batch): op(a) [m, k] · op(b) [k, n]. InvalidArgument as
// TensorFlow words it ("MatMul needs matrices", "Matrix size-incompatible").
struct MatMulDims {
  int64_t m = 0, n = 0, k = 0;
};
absl::StatusOr<MatMulDims> PlanMatMul(const TensorShape& a, const TensorShape& b, bool transpose_a, bool transpose_b);

}  // namespace strata

#endif  // STRATA_KERNELS_BATCH_MATMUL_PLAN_H_
