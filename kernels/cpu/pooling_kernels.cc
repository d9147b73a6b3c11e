// CPU kernels for MaxPool, MaxPoolGrad, AvgPool and AvgPoolGrad (NHWC,
// SAME/VALID padding). Padded positions never win the max and never count
// in a mean: a window pools its in-range taps only, as TensorFlow's does. The inner loops run over the depth dim,
// which is contiguous in NHWC, so they vectorize.

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/nn_ops.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/nn_kernel_helpers.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using nn_internal::ParallelForRows;

// The in-range part [begin, end) of the window of output index `o`.
inline void WindowRange(int64_t o, int64_t stride, int64_t pad, int64_t window, int64_t in,
                        int64_t* begin, int64_t* end) {
  const int64_t start = o * stride - pad;
  *begin = std::max<int64_t>(start, 0);
  *end = std::min<int64_t>(start + window, in);
}

// The in-range window [h0, h1) x [w0, w1) of each output position of
// output row `oh`: f(ow, h0, h1, w0, w1).
template <typename F>
inline void ForWindowsOfRow(const PoolGeometry& g, int64_t oh, F f) {
  int64_t h0, h1;
  WindowRange(oh, g.stride_rows, g.pad_top, g.window_rows, g.in_rows, &h0, &h1);
  for (int64_t ow = 0; ow < g.out_cols; ++ow) {
    int64_t w0, w1;
    WindowRange(ow, g.stride_cols, g.pad_left, g.window_cols, g.in_cols, &w0, &w1);
    f(ow, h0, h1, w0, w1);
  }
}

// A pooling kernel's attrs, parsed once.
class PoolKernel : public OpKernel {
 public:
  explicit PoolKernel(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParsePoolKernelAttrs(c, "CPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }

 protected:
  PoolAttrsParsed attrs_;
};

template <typename T>
class MaxPoolOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(PoolGeometry g, ComputePoolGeometry(attrs_, input.shape()));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.batch, g.out_rows, g.out_cols, g.depth}, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    const T* x = input.data<T>();
    T* y = out->data<T>();
    const int64_t depth = g.depth;
    ParallelForRows(ctx, g.batch * g.out_rows, g.out_cols * g.window_rows * g.window_cols * depth,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t nr = begin; nr < end; ++nr) {  // nr = (image, output row)
                        const int64_t n = nr / g.out_rows;
                        ForWindowsOfRow(g, nr % g.out_rows, [&](int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                                                                int64_t w1) {
                          T* dst = y + (nr * g.out_cols + ow) * depth;
                          std::fill(dst, dst + depth, std::numeric_limits<T>::lowest());
                          for (int64_t h = h0; h < h1; ++h) {
                            for (int64_t w = w0; w < w1; ++w) {
                              const T* src = x + ((n * g.in_rows + h) * g.in_cols + w) * depth;
                              for (int64_t c = 0; c < depth; ++c) dst[c] = std::max(dst[c], src[c]);
                            }
                          }
                        });
                      }
                    });
    return absl::OkStatus();
  }
};

template <typename T>
class MaxPoolGradOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    const Tensor& orig_out = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(PoolGeometry g, ComputePoolGeometry(attrs_, input.shape()));
    const TensorShape pooled{g.batch, g.out_rows, g.out_cols, g.depth};
    if (orig_out.shape() != pooled || grad.shape() != pooled) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MaxPoolGrad: orig_output ", orig_out.shape().DebugString(), " and grad ",
          grad.shape().DebugString(), " must have the pooled shape ", pooled.DebugString(),
          " of orig_input ", input.shape().DebugString()));
    }
    Tensor* dx;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, input.shape(), &dx));
    if (dx->NumElements() == 0) return absl::OkStatus();
    const T* x = input.data<T>();
    const T* dy = grad.data<T>();
    T* out = dx->data<T>();
    const int64_t depth = g.depth;
    const int64_t image_size = g.in_rows * g.in_cols * depth;
    // Windows overlap within an image, so shards are whole images: each
    // writes only its own image's gradient.
    ParallelForRows(
        ctx, g.batch, g.out_rows * g.out_cols * g.window_rows * g.window_cols * depth,
        [&](int64_t begin, int64_t end) {
          std::vector<T> best(depth);
          std::vector<int64_t> arg(depth);
          for (int64_t n = begin; n < end; ++n) {
            const T* xi = x + n * image_size;
            T* di = out + n * image_size;
            std::fill(di, di + image_size, T(0));
            for (int64_t oh = 0; oh < g.out_rows; ++oh) {
              ForWindowsOfRow(g, oh, [&](int64_t ow, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
                if (h0 >= h1 || w0 >= w1) return;
                // The first maximum in row-major window order takes the
                // gradient (TensorFlow's rule for ties). Starting from the
                // first tap rather than -inf keeps a window of all -inf
                // routing its gradient somewhere.
                const int64_t first = (h0 * g.in_cols + w0) * depth;
                for (int64_t c = 0; c < depth; ++c) {
                  best[c] = xi[first + c];
                  arg[c] = first + c;
                }
                for (int64_t h = h0; h < h1; ++h) {
                  for (int64_t w = w0; w < w1; ++w) {
                    const int64_t base = (h * g.in_cols + w) * depth;
                    for (int64_t c = 0; c < depth; ++c) {
                      if (xi[base + c] > best[c]) {
                        best[c] = xi[base + c];
                        arg[c] = base + c;
                      }
                    }
                  }
                }
                const T* gy = dy + ((n * g.out_rows + oh) * g.out_cols + ow) * depth;
                for (int64_t c = 0; c < depth; ++c) di[arg[c]] += gy[c];
              });
            }
          }
        });
    return absl::OkStatus();
  }
};

template <typename T>
class AvgPoolOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(PoolGeometry g, ComputePoolGeometry(attrs_, input.shape()));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.batch, g.out_rows, g.out_cols, g.depth}, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    const T* x = input.data<T>();
    T* y = out->data<T>();
    const int64_t depth = g.depth;
    ParallelForRows(ctx, g.batch * g.out_rows, g.out_cols * g.window_rows * g.window_cols * depth,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t nr = begin; nr < end; ++nr) {  // nr = (image, output row)
                        const int64_t n = nr / g.out_rows;
                        ForWindowsOfRow(g, nr % g.out_rows, [&](int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                                                                int64_t w1) {
                          T* dst = y + (nr * g.out_cols + ow) * depth;
                          std::fill(dst, dst + depth, T(0));
                          for (int64_t h = h0; h < h1; ++h) {
                            for (int64_t w = w0; w < w1; ++w) {
                              const T* src = x + ((n * g.in_rows + h) * g.in_cols + w) * depth;
                              for (int64_t c = 0; c < depth; ++c) dst[c] += src[c];
                            }
                          }
                          const T count = static_cast<T>(std::max<int64_t>((h1 - h0) * (w1 - w0), 1));
                          for (int64_t c = 0; c < depth; ++c) dst[c] /= count;
                        });
                      }
                    });
    return absl::OkStatus();
  }
};

template <typename T>
class AvgPoolGradOp : public PoolKernel {
 public:
  using PoolKernel::PoolKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(TensorShape in_shape, ShapeFromSizes(ctx.input(0), "AvgPoolGrad orig_input_shape"));
    const Tensor& grad = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(PoolGeometry g, ComputePoolGeometry(attrs_, in_shape));
    const TensorShape pooled{g.batch, g.out_rows, g.out_cols, g.depth};
    if (grad.shape() != pooled) {
      return absl::InvalidArgumentError(absl::StrCat("AvgPoolGrad: grad ", grad.shape().DebugString(),
                                                     " must have the pooled shape ", pooled.DebugString(),
                                                     " of orig_input_shape ", in_shape.DebugString()));
    }
    Tensor* dx;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, in_shape, &dx));
    if (dx->NumElements() == 0) return absl::OkStatus();
    const T* dy = grad.data<T>();
    T* out = dx->data<T>();
    const int64_t depth = g.depth;
    const int64_t image_size = g.in_rows * g.in_cols * depth;
    // Windows overlap within an image: shards are whole images.
    ParallelForRows(ctx, g.batch, g.out_rows * g.out_cols * g.window_rows * g.window_cols * depth,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t n = begin; n < end; ++n) {
                        T* di = out + n * image_size;
                        std::fill(di, di + image_size, T(0));
                        for (int64_t oh = 0; oh < g.out_rows; ++oh) {
                          ForWindowsOfRow(g, oh, [&](int64_t ow, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
                            if (h0 >= h1 || w0 >= w1) return;
                            const T count = static_cast<T>((h1 - h0) * (w1 - w0));
                            const T* gy = dy + ((n * g.out_rows + oh) * g.out_cols + ow) * depth;
                            for (int64_t h = h0; h < h1; ++h) {
                              for (int64_t w = w0; w < w1; ++w) {
                                T* d = di + (h * g.in_cols + w) * depth;
                                for (int64_t c = 0; c < depth; ++c) d[c] += gy[c] / count;
                              }
                            }
                          });
                        }
                      }
                    });
    return absl::OkStatus();
  }
};

#define REGISTER_AVGPOOL(T)                                                                         \
  STRATA_REGISTER_KERNEL(KernelBuilder("AvgPool").Device(kDeviceCpu).TypeConstraint<T>("T"), AvgPoolOp<T>); \
  STRATA_REGISTER_KERNEL(KernelBuilder("AvgPoolGrad").Device(kDeviceCpu).TypeConstraint<T>("T"), AvgPoolGradOp<T>)
REGISTER_AVGPOOL(float);
REGISTER_AVGPOOL(double);
#undef REGISTER_AVGPOOL

#define REGISTER_MAXPOOL(T)                                                                  \
  STRATA_REGISTER_KERNEL(KernelBuilder("MaxPool").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         MaxPoolOp<T>)
REGISTER_MAXPOOL(float);
REGISTER_MAXPOOL(double);
REGISTER_MAXPOOL(int32_t);
REGISTER_MAXPOOL(int64_t);
#undef REGISTER_MAXPOOL

STRATA_REGISTER_KERNEL(KernelBuilder("MaxPoolGrad").Device(kDeviceCpu).TypeConstraint<float>("T"),
                       MaxPoolGradOp<float>);
STRATA_REGISTER_KERNEL(
    KernelBuilder("MaxPoolGrad").Device(kDeviceCpu).TypeConstraint<double>("T"),
    MaxPoolGradOp<double>);

}  // namespace
}  // namespace strata
