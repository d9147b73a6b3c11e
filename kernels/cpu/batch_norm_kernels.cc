// FusedBatchNormV3 and FusedBatchNormGradV3 on the CPU (graph/ops/batch_norm.h),
// float and double. x is seen as [outer, C, inner] (NHWC: inner 1; NCHW:
// outer N, inner H*W); statistics accumulate in double, one channel per
// shard.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/cpu/nn_kernel_helpers.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

struct Layout {
  int64_t outer = 1, channels = 0, inner = 1;
  int64_t count() const { return outer * inner; }  // elements per channel
};

absl::StatusOr<Layout> LayoutOf(const TensorShape& x, const std::string& format, const char* op) {
  const bool channels_last = format == "NHWC" || format == "NDHWC";
  const bool channels_first = format == "NCHW" || format == "NCDHW";
  if (!channels_last && !channels_first) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": data_format '", format, "' is not NHWC, NCHW, NDHWC or NCDHW"));
  }
  const int want = format.size() == 5 ? 5 : 4;
  if (x.dims() != want) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": x must be rank ", want, " for ", format, ", got ", x.DebugString()));
  }
  const int c = channels_last ? x.dims() - 1 : 1;
  Layout l;
  l.channels = x.dim_size(c);
  for (int d = 0; d < c; ++d) l.outer *= x.dim_size(d);
  for (int d = c + 1; d < x.dims(); ++d) l.inner *= x.dim_size(d);
  return l;
}

absl::Status RequireChannels(const Tensor& t, const Layout& l, const char* op, const char* what, bool may_be_empty) {
  if (t.dims() == 1 && (t.dim_size(0) == l.channels || (may_be_empty && t.dim_size(0) == 0))) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " must be [", l.channels, "] (the channels of x), got ",
                                                 t.shape().DebugString()));
}

// Calls f(c, index of element j of channel c) for every element.
template <typename F>
void ForChannel(const Layout& l, int64_t c, F f) {
  for (int64_t o = 0; o < l.outer; ++o) {
    const int64_t base = (o * l.channels + c) * l.inner;
    for (int64_t i = 0; i < l.inner; ++i) f(base + i);
  }
}

template <typename T>
class FusedBatchNormOp : public OpKernel {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("epsilon", &epsilon_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("exponential_avg_factor", &factor_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("data_format", &format_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("is_training", &training_));
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(Layout l, LayoutOf(x.shape(), format_, "FusedBatchNormV3"));
    const bool empty_ok = training_ && factor_ == 1.0f;
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(1), l, "FusedBatchNormV3", "scale", false));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(2), l, "FusedBatchNormV3", "offset", false));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(3), l, "FusedBatchNormV3", "mean", empty_ok));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(4), l, "FusedBatchNormV3", "variance", empty_ok));
    Tensor* out[6];
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &out[0]));
    for (int i = 1; i <= 4; ++i) STRATA_RETURN_IF_ERROR(ctx.allocate_output(i, TensorShape{l.channels}, &out[i]));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(5, TensorShape{0}, &out[5]));
    const T* xs = x.data<T>();
    const T* scale = ctx.input(1).data<T>();
    const T* offset = ctx.input(2).data<T>();
    const bool have_stats = ctx.input(3).NumElements() == l.channels;
    const T* mean_in = have_stats ? ctx.input(3).data<T>() : nullptr;
    const T* var_in = have_stats ? ctx.input(4).data<T>() : nullptr;
    T* y = out[0]->data<T>();
    const int64_t n = l.count();
    nn_internal::ParallelForRows(ctx, l.channels, 3 * n, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        double m, v;  // the statistics y uses (v biased)
        if (training_) {
          double sum = 0, sq = 0;
          ForChannel(l, c, [&](int64_t k) { sum += static_cast<double>(xs[k]); });
          m = n > 0 ? sum / static_cast<double>(n) : 0.0;
          ForChannel(l, c, [&](int64_t k) {
            const double d = static_cast<double>(xs[k]) - m;
            sq += d * d;
          });
          v = n > 0 ? sq / static_cast<double>(n) : 0.0;
        } else {
          m = static_cast<double>(mean_in[c]);
          v = static_cast<double>(var_in[c]);
        }
        const double rstd = 1.0 / std::sqrt(v + static_cast<double>(epsilon_));
        const double a = static_cast<double>(scale[c]) * rstd;
        const double b = static_cast<double>(offset[c]) - a * m;
        ForChannel(l, c, [&](int64_t k) { y[k] = static_cast<T>(a * static_cast<double>(xs[k]) + b); });
        double out_mean = m, out_var = v;
        if (training_) {
          const double unbiased = n > 1 ? v * static_cast<double>(n) / static_cast<double>(n - 1) : v;
          const double f = static_cast<double>(factor_);
          out_mean = have_stats && f != 1.0 ? (1 - f) * static_cast<double>(mean_in[c]) + f * m : m;
          out_var = have_stats && f != 1.0 ? (1 - f) * static_cast<double>(var_in[c]) + f * unbiased : unbiased;
        }
        out[1]->data<T>()[c] = static_cast<T>(out_mean);
        out[2]->data<T>()[c] = static_cast<T>(out_var);
        out[3]->data<T>()[c] = static_cast<T>(m);
        out[4]->data<T>()[c] = static_cast<T>(v);
      }
    });
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f, factor_ = 1.0f;
  std::string format_;
  bool training_ = true;
};

// Training: dx = scale rstd / n (n dy - sum dy - xhat sum(dy xhat)); with
// given statistics (inference) dx = scale rstd dy. Either way
// dscale = sum(dy xhat), doffset = sum(dy).
template <typename T>
class FusedBatchNormGradOp : public OpKernel {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("epsilon", &epsilon_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("data_format", &format_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("is_training", &training_));
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    if (dy.shape() != x.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("FusedBatchNormGradV3: y_backprop ", dy.shape().DebugString(),
                                                     " and x ", x.shape().DebugString(), " must have one shape"));
    }
    STRATA_ASSIGN_OR_RETURN(Layout l, LayoutOf(x.shape(), format_, "FusedBatchNormGradV3"));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(2), l, "FusedBatchNormGradV3", "scale", false));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(3), l, "FusedBatchNormGradV3", "reserve_space_1", false));
    STRATA_RETURN_IF_ERROR(RequireChannels(ctx.input(4), l, "FusedBatchNormGradV3", "reserve_space_2", false));
    Tensor* out[5];
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &out[0]));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(1, TensorShape{l.channels}, &out[1]));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(2, TensorShape{l.channels}, &out[2]));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(3, TensorShape{0}, &out[3]));
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(4, TensorShape{0}, &out[4]));
    const T* g = dy.data<T>();
    const T* xs = x.data<T>();
    const T* scale = ctx.input(2).data<T>();
    const T* mean = ctx.input(3).data<T>();
    const T* var = ctx.input(4).data<T>();
    T* dx = out[0]->data<T>();
    const int64_t n = l.count();
    nn_internal::ParallelForRows(ctx, l.channels, 3 * n, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        const double m = static_cast<double>(mean[c]);
        const double rstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + static_cast<double>(epsilon_));
        double sum_dy = 0, sum_dy_xhat = 0;
        ForChannel(l, c, [&](int64_t k) {
          const double d = static_cast<double>(g[k]);
          sum_dy += d;
          sum_dy_xhat += d * (static_cast<double>(xs[k]) - m) * rstd;
        });
        const double s = static_cast<double>(scale[c]);
        if (training_ && n > 0) {
          const double k1 = s * rstd / static_cast<double>(n);
          ForChannel(l, c, [&](int64_t k) {
            const double xhat = (static_cast<double>(xs[k]) - m) * rstd;
            dx[k] = static_cast<T>(k1 * (static_cast<double>(n) * static_cast<double>(g[k]) - sum_dy - xhat * sum_dy_xhat));
          });
        } else {
          ForChannel(l, c, [&](int64_t k) { dx[k] = static_cast<T>(s * rstd * static_cast<double>(g[k])); });
        }
        out[1]->data<T>()[c] = static_cast<T>(sum_dy_xhat);
        out[2]->data<T>()[c] = static_cast<T>(sum_dy);
      }
    });
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f;
  std::string format_;
  bool training_ = true;
};

#define REGISTER_BN(T)                                                                                      \
  STRATA_REGISTER_KERNEL(                                                                                   \
      KernelBuilder("FusedBatchNormV3").Device(kDeviceCpu).TypeConstraint<T>("T").TypeConstraint<T>("U"), \
      FusedBatchNormOp<T>);                                                                                 \
  STRATA_REGISTER_KERNEL(                                                                                   \
      KernelBuilder("FusedBatchNormGradV3").Device(kDeviceCpu).TypeConstraint<T>("T").TypeConstraint<T>("U"), \
      FusedBatchNormGradOp<T>)
REGISTER_BN(float);
REGISTER_BN(double);
#undef REGISTER_BN

}  // namespace
}  // namespace strata
