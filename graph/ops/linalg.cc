#include "graph/ops/linalg.h"

#include <algorithm>
#include <vector>

#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {
namespace {

// input [..., M, N]: q [..., M, K], r [..., K, N]; K = M when full_matrices,
// else min(M, N) (unknown if either is).
absl::Status QrShape(InferenceContext& c) {
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &in));
  bool full = false;
  STRATA_RETURN_IF_ERROR(c.GetAttr("full_matrices", &full));
  if (in.unknown_rank()) {
    c.set_output(0, PartialTensorShape::UnknownRank());
    c.set_output(1, PartialTensorShape::UnknownRank());
    return absl::OkStatus();
  }
  const int rank = in.dims();
  const int64_t m = in.dim_size(rank - 2), n = in.dim_size(rank - 1);
  const int64_t k = full ? m : (m < 0 || n < 0 ? -1 : std::min(m, n));
  std::vector<int64_t> q, r;
  for (int d = 0; d < rank - 2; ++d) {
    q.push_back(in.dim_size(d));
    r.push_back(in.dim_size(d));
  }
  q.push_back(m);
  q.push_back(k);
  r.push_back(k);
  r.push_back(n);
  c.set_output(0, PartialTensorShape(q));
  c.set_output(1, PartialTensorShape(r));
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("Qr")
    .Input("input: T")
    .Output("q: T")
    .Output("r: T")
    .Attr("full_matrices: bool = false")
    .Attr("T: {double, float}")
    .SetShapeFn(QrShape);

namespace ops {

QrOutputs Qr(const Scope& s, Output input, bool full_matrices) {
  Node* n = NodeBuilder(s, "Qr").Input(input).Attr("full_matrices", full_matrices).Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

}  // namespace ops
}  // namespace strata
