// CPU MatMul on Eigen. Large products on a multi-threaded device use Eigen's
// tensor contraction on the intra-op pool (it shards the output into blocks
// and packs panels per thread). Small products, and any product on a
// one-thread device, use Eigen's Matrix product on the calling thread: the
// pool hand-off costs more than the arithmetic for the former, and the
// latter is the same GEBP kernel with less set-up. matmul_bench.cc measures this against Eigen and OpenBLAS.

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/math_ops.h"
#include "kernels/batch_matmul_plan.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

// Products with fewer multiply-adds than this run on the calling thread.
constexpr int64_t kMatMulParallelMinMacs = 64 * 64 * 64;

template <typename T>
class MatMulKernel : public OpKernel {
 public:
  explicit MatMulKernel(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_a", &transpose_a_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_b", &transpose_b_));
  }

  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const MatMulDims d, PlanMatMul(a.shape(), b.shape(), transpose_a_, transpose_b_));
    const int64_t m = d.m, n = d.n, k = d.k;
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{m, n}, &out));
    if (m == 0 || n == 0) return absl::OkStatus();
    auto z = Matrix<T>(*out);
    if (k == 0) {
      z.setZero();
      return absl::OkStatus();
    }
    // Contract a's dim (1 - transpose_a) with b's dim transpose_b: a plain
    // product contracts a's columns with b's rows.
    Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1> dims;
    dims[0] = Eigen::IndexPair<Eigen::DenseIndex>(transpose_a_ ? 0 : 1, transpose_b_ ? 1 : 0);
    auto x = Matrix<T>(a);
    auto y = Matrix<T>(b);
    if (m * n * k < kMatMulParallelMinMacs || ctx.eigen_cpu_device().numThreads() <= 1) {
      // One thread: Eigen's Matrix product (same GEBP kernel, less set-up
      // than the tensor contraction's evaluator; measured a few % faster at
      // 512^3, and it switches to a coefficient-wise product for tiny sizes).
      using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      Eigen::Map<const Mat> am(a.data<T>(), a.dim_size(0), a.dim_size(1));
      Eigen::Map<const Mat> bm(b.data<T>(), b.dim_size(0), b.dim_size(1));
      Eigen::Map<Mat> cm(out->data<T>(), m, n);
      if (!transpose_a_ && !transpose_b_) {
        cm.noalias() = am * bm;
      } else if (transpose_a_ && !transpose_b_) {
        cm.noalias() = am.transpose() * bm;
      } else if (!transpose_a_) {
        cm.noalias() = am * bm.transpose();
      } else {
        cm.noalias() = am.transpose() * bm.transpose();
      }
    } else {
      z.device(ctx.eigen_cpu_device()) = x.contract(y, dims);
    }
    return absl::OkStatus();
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

// bfloat16 and half (mixed precision): the operands are converted to float,
// multiplied with float accumulation (as cuBLAS does on a GPU) and the
// product rounded once.
template <typename T>
class LowPrecisionMatMulKernel : public OpKernel {
 public:
  explicit LowPrecisionMatMulKernel(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_a", &transpose_a_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("transpose_b", &transpose_b_));
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const MatMulDims d, PlanMatMul(a.shape(), b.shape(), transpose_a_, transpose_b_));
    const int64_t m = d.m, n = d.n, k = d.k;
    Tensor af, bf;
    STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, a.shape(), &af));
    STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, b.shape(), &bf));
    Flat<float>(af).device(ctx.eigen_cpu_device()) = Flat<T>(a).template cast<float>();
    Flat<float>(bf).device(ctx.eigen_cpu_device()) = Flat<T>(b).template cast<float>();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{m, n}, &out));
    if (m == 0 || n == 0) return absl::OkStatus();
    Tensor zf;
    STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, TensorShape{m, n}, &zf));
    Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1> dims;
    dims[0] = Eigen::IndexPair<Eigen::DenseIndex>(transpose_a_ ? 0 : 1, transpose_b_ ? 1 : 0);
    if (k == 0) {
      Matrix<float>(zf).setZero();
    } else {
      Matrix<float>(zf).device(ctx.eigen_cpu_device()) = Matrix<float>(af).contract(Matrix<float>(bf), dims);
    }
    Flat<T>(*out).device(ctx.eigen_cpu_device()) = Flat<float>(zf).template cast<T>();
    return absl::OkStatus();
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceCpu).TypeConstraint("T", DT_BFLOAT16),
                       LowPrecisionMatMulKernel<Eigen::bfloat16>);
STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceCpu).TypeConstraint("T", DT_HALF),
                       LowPrecisionMatMulKernel<Eigen::half>);

#define REGISTER_MATMUL(T)                                                                 \
  STRATA_REGISTER_KERNEL(KernelBuilder("MatMul").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         MatMulKernel<T>)

REGISTER_MATMUL(float);
REGISTER_MATMUL(double);
REGISTER_MATMUL(int32_t);
REGISTER_MATMUL(int64_t);

}  // namespace
}  // namespace strata
