// Gradient bucketing: fuse many small gradients into few all-reduces, as
// PyTorch DDP and Horovod do. A bucket's gradients are flattened and
// concatenated, all-reduced with one CollectiveReduce, then sliced and
// reshaped back.
//
//   std::vector<GradientSpec> specs = {{DT_FLOAT, 64 * 128, 0}, {DT_FLOAT, 128, 1}, ...};
//   std::vector<std::vector<int>> buckets = PlanGradientBuckets(specs, 25 << 20);
//   STRATA_ASSIGN_OR_RETURN(OutputList reduced,
//       AllReduceInBuckets(scope, ctx, ReduceOp::kMean, grads, shapes, buckets));
//
// Order: buckets are filled in reverse creation order of the variables, so
// the first bucket holds the last layers' gradients, which backward makes
// first. The dataflow executor starts a node once its inputs exist and
// collectives are asynchronous kernels, so a bucket's all-reduce runs while
// backward is still computing the earlier layers' gradients. A bucket holds
// one dtype; it is closed when the next gradient would take it past
// `bucket_bytes` (a gradient larger than that gets a bucket of its own).
// Every replica plans from the same variables, so the plans (and the
// collectives' instance keys) agree.
//
// Thread-safety: PlanGradientBuckets is pure; AllReduceInBuckets builds
// graph nodes (one thread per graph, as for Scope). Ownership: none kept.
#ifndef STRATA_STRATEGY_GRADIENT_BUCKETING_H_
#define STRATA_STRATEGY_GRADIENT_BUCKETING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "strategy/strategy.h"

namespace strata {
namespace distribute {

class ReplicaContext;

struct GradientSpec {
  DataType dtype = DT_FLOAT;
  int64_t num_elements = 0;
  // The variable's place in creation order (larger: made later).
  int64_t creation_index = 0;
};

// Buckets of indices into `grads`, in the order their all-reduces should be
// issued (see the file comment). `bucket_bytes` <= 0: one bucket per
// gradient, still in reverse creation order.
std::vector<std::vector<int>> PlanGradientBuckets(const std::vector<GradientSpec>& grads,
                                                  int64_t bucket_bytes);

// All-reduces `grads[i]` (of shape `shapes[i]`) across the replicas of `ctx`
// bucket by bucket; returns one reduced gradient per input, in input order.
// Nodes are made under `scope` ("bucket_<k>/..."), on the replica's device.
// InvalidArgument if the buckets do not cover every gradient exactly once or
// a bucket mixes dtypes; the all-reduce's errors.
absl::StatusOr<OutputList> AllReduceInBuckets(const strata::Scope& scope, ReplicaContext& ctx,
                                              ReduceOp op, const OutputList& grads,
                                              const std::vector<TensorShape>& shapes,
                                              const std::vector<std::vector<int>>& buckets);

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_GRADIENT_BUCKETING_H_
