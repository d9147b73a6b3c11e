// BatchMatMulV2 on the CPU: one Eigen matrix product per output batch
// (kernels/batch_matmul_plan.h broadcasts the batch dims), the batches
// spread over the device's intra-op pool when there is enough work; each
// product runs on one thread. bfloat16 and half convert to float and round
// the product once, as MatMul's kernels do.
#include <algorithm>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/math_ops.h"
#include "kernels/batch_matmul_plan.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

// Work below this many multiply-adds runs on the calling thread.
constexpr int64_t kParallelMinMacs = 64 * 64 * 64;

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// z = op(x) op(y) for one batch; x is [rows, cols] as stored.
template <typename T>
void Product(const T* x, int64_t xr, int64_t xc, bool adj_x, const T* y, int64_t yr, int64_t yc, bool adj_y, T* z,
             int64_t m, int64_t n) {
  Eigen::Map<const RowMajor<T>> a(x, xr, xc);
  Eigen::Map<const RowMajor<T>> b(y, yr, yc);
  Eigen::Map<RowMajor<T>> c(z, m, n);
  if (!adj_x && !adj_y) {
    c.noalias() = a * b;
  } else if (adj_x && !adj_y) {
    c.noalias() = a.transpose() * b;
  } else if (!adj_x) {
    c.noalias() = a * b.transpose();
  } else {
    c.noalias() = a.transpose() * b.transpose();
  }
}

template <typename T>
class BatchMatMulOp : public OpKernel {
 public:
  explicit BatchMatMulOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("adj_x", &adj_x_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("adj_y", &adj_y_));
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const BatchMatMulPlan p, PlanBatchMatMul(x.shape(), y.shape(), adj_x_, adj_y_));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, p.out, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    constexpr bool kLow = std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, Eigen::half>;
    using C = std::conditional_t<kLow, float, T>;  // what the products compute in
    Tensor xc = x, yc = y, zc = *out;
    if constexpr (kLow) {
      STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, x.shape(), &xc));
      STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, y.shape(), &yc));
      STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, p.out, &zc));
      Flat<float>(xc) = Flat<T>(x).template cast<float>();
      Flat<float>(yc) = Flat<T>(y).template cast<float>();
    }
    const int64_t xr = x.dim_size(x.dims() - 2), xcn = x.dim_size(x.dims() - 1);
    const int64_t yr = y.dim_size(y.dims() - 2), ycn = y.dim_size(y.dims() - 1);
    const C* xp = xc.data<C>();
    const C* yp = yc.data<C>();
    C* zp = zc.data<C>();
    const bool ax = adj_x_, ay = adj_y_;
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        C* z = zp + b * p.m * p.n;
        if (p.k == 0) {
          std::fill(z, z + p.m * p.n, C(0));
          continue;
        }
        Product<C>(xp + p.x_batch[b] * xr * xcn, xr, xcn, ax, yp + p.y_batch[b] * yr * ycn, yr, ycn, ay, z, p.m,
                   p.n);
      }
    };
    const Eigen::ThreadPoolDevice& d = ctx.eigen_cpu_device();
    if (p.batch * p.m * p.n * p.k < kParallelMinMacs || d.numThreads() <= 1 || p.batch == 1) {
      run(0, p.batch);
    } else {
      const double cost = static_cast<double>(p.m * p.n * p.k) * 2;
      d.parallelFor(p.batch, Eigen::TensorOpCost(0, 0, cost), run);
    }
    if constexpr (kLow) Flat<T>(*out) = Flat<float>(zc).template cast<T>();
    return absl::OkStatus();
  }

 private:
  bool adj_x_ = false;
  bool adj_y_ = false;
};

#define REGISTER_BMM(T, DT)                                                                         \
  STRATA_REGISTER_KERNEL(KernelBuilder("BatchMatMulV2").Device(kDeviceCpu).TypeConstraint("T", DT), \
                         BatchMatMulOp<T>)
REGISTER_BMM(float, DT_FLOAT);
REGISTER_BMM(double, DT_DOUBLE);
REGISTER_BMM(Eigen::bfloat16, DT_BFLOAT16);
REGISTER_BMM(Eigen::half, DT_HALF);
#undef REGISTER_BMM

}  // namespace
}  // namespace strata
