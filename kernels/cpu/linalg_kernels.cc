// Qr on the CPU (graph/ops/linalg.h): Eigen's Householder QR of each matrix
// of the batch, the thin or full factors copied out.
#include <algorithm>

#include "Eigen/QR"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/ops/linalg.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

template <typename T>
class QrOp : public OpKernel {
 public:
  explicit QrOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("full_matrices", &full_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    if (a.dims() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("input must be at least a matrix, got shape ", a.shape().DebugString()));
    }
    const int rank = a.dims();
    const int64_t m = a.dim_size(rank - 2), n = a.dim_size(rank - 1);
    const int64_t k = full_ ? m : std::min(m, n);
    TensorShape q_shape, r_shape;
    for (int d = 0; d < rank - 2; ++d) {
      STRATA_RETURN_IF_ERROR(q_shape.AddDim(a.dim_size(d)));
      STRATA_RETURN_IF_ERROR(r_shape.AddDim(a.dim_size(d)));
    }
    STRATA_RETURN_IF_ERROR(q_shape.AddDim(m));
    STRATA_RETURN_IF_ERROR(q_shape.AddDim(k));
    STRATA_RETURN_IF_ERROR(r_shape.AddDim(k));
    STRATA_RETURN_IF_ERROR(r_shape.AddDim(n));
    Tensor* q = nullptr;
    Tensor* r = nullptr;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, q_shape, &q));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(1, r_shape, &r));
    const int64_t batch = m * n == 0 ? 0 : a.NumElements() / (m * n);
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ConstMap = Eigen::Map<const Matrix>;
    using Map = Eigen::Map<Matrix>;
    if (m == 0 || n == 0) {
      // Nothing to factor: q is the identity's first k columns, r empty.
      for (int64_t b = 0; b < q->NumElements() / std::max<int64_t>(1, m * k); ++b) {
        Map(q->data<T>() + b * m * k, m, k) = Matrix::Identity(m, k);
      }
      std::fill(r->data<T>(), r->data<T>() + r->NumElements(), T(0));
      return absl::OkStatus();
    }
    for (int64_t b = 0; b < batch; ++b) {
      Eigen::HouseholderQR<Matrix> qr(ConstMap(a.data<T>() + b * m * n, m, n));
      Map(q->data<T>() + b * m * k, m, k) = qr.householderQ() * Matrix::Identity(m, k);
      Map(r->data<T>() + b * k * n, k, n) =
          qr.matrixQR().topRows(k).template triangularView<Eigen::Upper>();
    }
    return absl::OkStatus();
  }

 private:
  bool full_ = false;
};

STRATA_REGISTER_KERNEL(KernelBuilder("Qr").Device(kDeviceCpu).TypeConstraint<float>("T"),
                       QrOp<float>);
STRATA_REGISTER_KERNEL(KernelBuilder("Qr").Device(kDeviceCpu).TypeConstraint<double>("T"),
                       QrOp<double>);

}  // namespace
}  // namespace strata
