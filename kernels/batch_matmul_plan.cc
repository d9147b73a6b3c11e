#include "kernels/batch_matmul_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

absl::StatusOr<BatchMatMulPlan> PlanBatchMatMul(const TensorShape& x, const TensorShape& y, bool adj_x,
                                                bool adj_y) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("BatchMatMulV2: ", why, "; x ", x.DebugString(),
                                                   " (adj_x=", adj_x, "), y ", y.DebugString(), " (adj_y=", adj_y,
                                                   ")"));
  };
  if (x.dims() < 2 || y.dims() < 2) return bad("x and y need at least 2 dims");
  BatchMatMulPlan p;
  const int xr = x.dims(), yr = y.dims();
  p.m = x.dim_size(adj_x ? xr - 1 : xr - 2);
  p.k = x.dim_size(adj_x ? xr - 2 : xr - 1);
  const int64_t ky = y.dim_size(adj_y ? yr - 1 : yr - 2);
  p.n = y.dim_size(adj_y ? yr - 2 : yr - 1);
  if (p.k != ky) return bad(absl::StrCat("inner dimensions differ (", p.k, " vs ", ky, ")"));
  // Batch dims, right-aligned.
  const int xb = xr - 2, yb = yr - 2, rank = std::max(xb, yb);
  std::vector<int64_t> dims(rank), xd(rank, 1), yd(rank, 1);
  for (int i = 0; i < rank; ++i) {
    const int ix = xb - rank + i, iy = yb - rank + i;
    xd[i] = ix >= 0 ? x.dim_size(ix) : 1;
    yd[i] = iy >= 0 ? y.dim_size(iy) : 1;
    if (xd[i] != yd[i] && xd[i] != 1 && yd[i] != 1) {
      return bad(absl::StrCat("batch dimension ", i, " does not broadcast (", xd[i], " vs ", yd[i], ")"));
    }
    dims[i] = xd[i] == 1 ? yd[i] : xd[i];
  }
  for (int64_t d : dims) {
    STRATA_RETURN_IF_ERROR(p.out.AddDim(d));
    p.batch *= d;
  }
  STRATA_RETURN_IF_ERROR(p.out.AddDim(p.m));
  STRATA_RETURN_IF_ERROR(p.out.AddDim(p.n));
  p.x_batch.resize(p.batch);
  p.y_batch.resize(p.batch);
  int64_t x_count = 1, y_count = 1;
  for (int i = 0; i < rank; ++i) {
    x_count *= xd[i];
    y_count *= yd[i];
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    int64_t r = b, xi = 0, yi = 0, xs = 1, ys = 1;
    for (int i = rank - 1; i >= 0; --i) {
      const int64_t c = r % dims[i];
      r /= dims[i];
      xi += (xd[i] == 1 ? 0 : c) * xs;
      yi += (yd[i] == 1 ? 0 : c) * ys;
      xs *= xd[i];
      ys *= yd[i];
    }
    p.x_batch[b] = xi;
    p.y_batch[b] = yi;
  }
  const bool x_affine = x_count == 1 || x_count == p.batch;
  const bool y_affine = y_count == 1 || y_count == p.batch;
  p.strided = x_affine && y_affine;
  p.x_stride = x_count == 1 ? 0 : 1;
  p.y_stride = y_count == 1 ? 0 : 1;
  return p;
}

absl::StatusOr<MatMulDims> PlanMatMul(const TensorShape& a, const TensorShape& b, bool ta, bool tb) {
  if (a.dims() != 2 || b.dims() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul needs matrices, but a has shape ", a.DebugString(),
                                                   " and b has shape ", b.DebugString()));
  }
  MatMulDims d;
  d.m = a.dim_size(ta ? 1 : 0);
  d.k = a.dim_size(ta ? 0 : 1);
  const int64_t k2 = b.dim_size(tb ? 1 : 0);
  d.n = b.dim_size(tb ? 0 : 1);
  if (d.k != k2) {
    return absl::InvalidArgumentError(absl::StrCat("Matrix size-incompatible: In[0]: ", a.DebugString(),
                                                   " (transpose_a=", ta, "), In[1]: ", b.DebugString(),
                                                   " (transpose_b=", tb, ")"));
  }
  return d;
}

}  // namespace strata
