#include "strategy/gradient_bucketing.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "strategy/replica_context.h"

namespace strata {
namespace distribute {

std::vector<std::vector<int>> PlanGradientBuckets(const std::vector<GradientSpec>& grads,
                                                  int64_t bucket_bytes) {
  // Visit the gradients from the last-made variable to the first; ties keep
  // the given order reversed, which is the same on every replica.
  std::vector<int> order(grads.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return grads[a].creation_index > grads[b].creation_index;
  });

  struct Open {
    std::vector<int> members;
    int64_t bytes = 0;
    size_t first_visit = 0;  // when it was opened, to order the leftovers
  };
  std::vector<std::vector<int>> out;
  std::map<DataType, Open> open;  // one filling bucket per dtype
  for (size_t v = 0; v < order.size(); ++v) {
    const int i = order[v];
    const int64_t bytes = grads[i].num_elements * DataTypeSize(grads[i].dtype);
    Open& b = open[grads[i].dtype];
    if (!b.members.empty() && (bucket_bytes <= 0 || b.bytes + bytes > bucket_bytes)) {
      out.push_back(std::move(b.members));
      b = Open();
    }
    if (b.members.empty()) b.first_visit = v;
    b.members.push_back(i);
    b.bytes += bytes;
  }
  std::vector<Open> rest;
  for (auto& [dtype, b] : open) {
    if (!b.members.empty()) rest.push_back(std::move(b));
  }
  std::sort(rest.begin(), rest.end(),
            [](const Open& a, const Open& b) { return a.first_visit < b.first_visit; });
  for (Open& b : rest) out.push_back(std::move(b.members));
  return out;
}

absl::StatusOr<OutputList> AllReduceInBuckets(const strata::Scope& scope, ReplicaContext& ctx,
                                              ReduceOp op, const OutputList& grads,
                                              const std::vector<TensorShape>& shapes,
                                              const std::vector<std::vector<int>>& buckets) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (shapes.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("AllReduceInBuckets: ", grads.size(),
                                                   " gradients but ", shapes.size(), " shapes"));
  }
  std::vector<int> seen(grads.size(), 0);
  for (const auto& bucket : buckets) {
    for (int i : bucket) {
      if (i < 0 || i >= static_cast<int>(grads.size()) || seen[i]++ > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("AllReduceInBuckets: gradient index ", i, " is out of range or repeated"));
      }
      if (grads[i].type() != grads[bucket[0]].type()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "AllReduceInBuckets: a bucket mixes ", DataTypeString(grads[bucket[0]].type()),
            " and ", DataTypeString(grads[i].type())));
      }
    }
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (seen[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllReduceInBuckets: gradient ", i, " is in no bucket"));
    }
  }

  const strata::Scope base = scope.WithDevice(ctx.device());
  OutputList out(grads.size());
  for (size_t k = 0; k < buckets.size(); ++k) {
    const std::vector<int>& bucket = buckets[k];
    const strata::Scope s = base.NewSubScope(absl::StrCat("bucket_", k));
    if (bucket.size() == 1) {
      // Nothing to fuse: reduce the gradient as it is.
      STRATA_ASSIGN_OR_RETURN(out[bucket[0]], ctx.AllReduce(s, op, grads[bucket[0]]));
      continue;
    }
    // Flatten + concatenate, one all-reduce, slice + reshape back.
    OutputList flat;
    for (int i : bucket) flat.push_back(ops::Reshape(s, grads[i], ops::Const<int64_t>(s, {-1})));
    Output fused = ops::Concat(s, flat, ops::Const(s, 0));
    STRATA_ASSIGN_OR_RETURN(Output reduced, ctx.AllReduce(s, op, fused));
    int64_t offset = 0;
    for (int i : bucket) {
      const int64_t n = shapes[i].num_elements();
      Output part = ops::Slice(s, reduced, ops::Const<int64_t>(s, {offset}),
                               ops::Const<int64_t>(s, {n}));
      const std::vector<int64_t> dims(shapes[i].dim_sizes().begin(), shapes[i].dim_sizes().end());
      out[i] = ops::Reshape(s, part,
                            ops::Const(s, dims, TensorShape{static_cast<int64_t>(dims.size())}));
      offset += n;
    }
    STRATA_RETURN_IF_ERROR(scope.status());
  }
  return out;
}

}  // namespace distribute
}  // namespace strata
