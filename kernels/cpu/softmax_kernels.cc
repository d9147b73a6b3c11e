// CPU kernels for Softmax, LogSoftmax and SparseSoftmaxCrossEntropyWithLogits.
// All work row by row over the last dim, and all subtract the row's maximum
// before exponentiating: exp(x - max) is at most 1, so large logits cannot
// overflow, and the sum is at least 1, so its log is finite.

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/nn_ops.h"
#include "kernels/cpu/nn_kernel_helpers.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using nn_internal::ParallelForRows;

template <typename T>
using RowArray = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstRowArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename T, bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  explicit SoftmaxOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& logits = ctx.input(0);
    if (logits.dims() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          type_string(), ": logits must have rank >= 1, got shape ", logits.shape().DebugString()));
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, logits.shape(), &out));
    const int64_t cols = logits.dim_size(logits.dims() - 1);
    if (cols == 0) return absl::OkStatus();  // empty rows: nothing to normalize
    const int64_t rows = logits.NumElements() / cols;
    const T* x = logits.data<T>();
    T* y = out->data<T>();
    // `y` may alias `x` (forwarded input): each row reads x fully (the max)
    // before writing y, and later steps read only y.
    ParallelForRows(ctx, rows, cols, [=](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRowArray<T> xr(x + r * cols, cols);
        RowArray<T> yr(y + r * cols, cols);
        const T max = xr.maxCoeff();
        if (kLog) {
          // (x - max) - log_sum, not x - (max + log_sum): for large logits
          // max + log_sum would round away log_sum's low bits.
          const T log_sum = std::log((xr - max).exp().sum());
          yr = (xr - max) - log_sum;
        } else {
          yr = (xr - max).exp();
          yr *= T(1) / yr.sum();
        }
      }
    });
    return absl::OkStatus();
  }
};

template <typename T, typename Label>
class SparseSoftmaxXentOp : public OpKernel {
 public:
  explicit SparseSoftmaxXentOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (features.dims() != 2 || labels.dims() != 1 || labels.dim_size(0) != features.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SparseSoftmaxCrossEntropyWithLogits: features must be [batch, classes] and labels "
          "[batch], got features ",
          features.shape().DebugString(), " and labels ", labels.shape().DebugString()));
    }
    const int64_t batch = features.dim_size(0);
    const int64_t classes = features.dim_size(1);
    // Check every label before computing, so a bad one is an error, not a
    // read outside the row.
    const Label* lab = labels.data<Label>();
    for (int64_t r = 0; r < batch; ++r) {
      if (lab[r] < 0 || lab[r] >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SparseSoftmaxCrossEntropyWithLogits: label value ", lab[r], " in row ", r,
            " is outside the valid range of classes [0, ", classes, ")"));
      }
    }
    Tensor *loss, *backprop;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{batch}, &loss));
    STRATA_RETURN_IF_ERROR(
        ctx.forward_input_or_allocate_output({0}, 1, features.shape(), &backprop));
    if (batch == 0) return absl::OkStatus();
    const T* x = features.data<T>();
    T* l = loss->data<T>();
    T* bp = backprop->data<T>();
    ParallelForRows(ctx, batch, classes, [=](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRowArray<T> xr(x + r * classes, classes);
        RowArray<T> br(bp + r * classes, classes);
        const T max = xr.maxCoeff();
        const T label_logit = xr[lab[r]] - max;  // read before br may overwrite x
        br = (xr - max).exp();
        const T sum = br.sum();
        // loss = -log softmax[label] = log(sum exp(x - max)) - (x[label] - max).
        l[r] = std::log(sum) - label_logit;
        br *= T(1) / sum;
        br[lab[r]] -= T(1);
      }
    });
    return absl::OkStatus();
  }
};

// Dense labels: loss = sum_c labels * (logsumexp(x) - x), backprop =
// softmax(x) - labels, a row at a time (TensorFlow's definitions).
template <typename T>
class SoftmaxXentOp : public OpKernel {
 public:
  explicit SoftmaxXentOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (features.dims() != 2 || labels.shape() != features.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SoftmaxCrossEntropyWithLogits: features and labels must both be [batch, classes], got features ",
          features.shape().DebugString(), " and labels ", labels.shape().DebugString()));
    }
    const int64_t batch = features.dim_size(0);
    const int64_t classes = features.dim_size(1);
    Tensor *loss, *backprop;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{batch}, &loss));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(1, features.shape(), &backprop));
    if (batch == 0) return absl::OkStatus();
    const T* x = features.data<T>();
    const T* y = labels.data<T>();
    T* l = loss->data<T>();
    T* bp = backprop->data<T>();
    ParallelForRows(ctx, batch, classes, [=](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRowArray<T> xr(x + r * classes, classes);
        ConstRowArray<T> yr(y + r * classes, classes);
        RowArray<T> br(bp + r * classes, classes);
        const T max = classes > 0 ? xr.maxCoeff() : T(0);
        br = (xr - max).exp();
        const T log_sum = std::log(br.sum());
        // -log softmax = log_sum - (x - max), weighted by the labels.
        l[r] = (yr * (log_sum - (xr - max))).sum();
        br = br * (T(1) / br.sum()) - yr;
      }
    });
    return absl::OkStatus();
  }
};

#define REGISTER_SOFTMAX(T)                                                                  \
  STRATA_REGISTER_KERNEL(KernelBuilder("Softmax").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         SoftmaxOp<T, false>);                                               \
  STRATA_REGISTER_KERNEL(                                                                    \
      KernelBuilder("LogSoftmax").Device(kDeviceCpu).TypeConstraint<T>("T"),                 \
      SoftmaxOp<T, true>)
REGISTER_SOFTMAX(float);
REGISTER_SOFTMAX(double);
#undef REGISTER_SOFTMAX

#define REGISTER_XENT(T, L)                                               \
  STRATA_REGISTER_KERNEL(KernelBuilder("SparseSoftmaxCrossEntropyWithLogits") \
                             .Device(kDeviceCpu)                          \
                             .TypeConstraint<T>("T")                      \
                             .TypeConstraint<L>("Tlabels"),               \
                         SparseSoftmaxXentOp<T, L>)
REGISTER_XENT(float, int32_t);
REGISTER_XENT(float, int64_t);
REGISTER_XENT(double, int32_t);
REGISTER_XENT(double, int64_t);
#undef REGISTER_XENT

STRATA_REGISTER_KERNEL(KernelBuilder("SoftmaxCrossEntropyWithLogits").Device(kDeviceCpu).TypeConstraint<float>("T"),
                       SoftmaxXentOp<float>);
STRATA_REGISTER_KERNEL(KernelBuilder("SoftmaxCrossEntropyWithLogits").Device(kDeviceCpu).TypeConstraint<double>("T"),
                       SoftmaxXentOp<double>);

}  // namespace
}  // namespace strata
