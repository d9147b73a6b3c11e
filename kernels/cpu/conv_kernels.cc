// CPU kernels for Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter (NHWC,
// SAME/VALID padding, any strides and dilations), by im2col and a matrix
// product:
//
//   col[p, (kh, kw, ic)] = input[n, oh*sr - pad_top + kh*dr, ow*sc - pad_left + kw*dc, ic]
//                          (0 outside the input), p = (n, oh, ow)
//   output[p, oc]        = col · filter[(kh, kw, ic), oc]
//   d col                = d output · filterᵀ,  then summed back into the input (col2im)
//   d filter             = colᵀ · d output
//
// The product is Eigen's tensor contraction on the device's thread pool; the
// col matrix is built a chunk of images at a time so its memory stays bounded
// whatever the batch size. 1x1 convolutions with stride 1 skip im2col: the
// input already is the col matrix.

#include <algorithm>
#include <cstring>

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

using nn_internal::ConstMatrixMap;
using nn_internal::MatrixMap;
using nn_internal::ParallelForRows;

// The col buffer of one chunk stays under this size (at least one image).
constexpr int64_t kMaxColBytes = 64 << 20;

using ContractDims = Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1>;

int64_t PatchSize(const Conv2DGeometry& g) { return g.filter_rows * g.filter_cols * g.in_depth; }

// Images per chunk so that a chunk's col matrix stays under kMaxColBytes.
template <typename T>
int64_t ImagesPerChunk(const Conv2DGeometry& g) {
  const int64_t per_image = std::max<int64_t>(1, g.out_rows * g.out_cols * PatchSize(g) * sizeof(T));
  return std::clamp<int64_t>(kMaxColBytes / per_image, 1, std::max<int64_t>(g.batch, 1));
}

// Fills col rows [0, num_images * out_rows * out_cols) for images
// [first_image, first_image + num_images).
template <typename T>
void Im2Col(const OpKernelContext& ctx, const Conv2DGeometry& g, const T* input,
            int64_t first_image, int64_t num_images, T* col) {
  const int64_t k = PatchSize(g);
  const int64_t row_stride = g.in_cols * g.in_depth;
  const int64_t image_stride = g.in_rows * row_stride;
  const int64_t depth = g.in_depth;
  ParallelForRows(ctx, num_images * g.out_rows, g.out_cols * k, [&](int64_t begin, int64_t end) {
    for (int64_t nr = begin; nr < end; ++nr) {  // nr = (image in chunk, output row)
      const int64_t n = nr / g.out_rows, oh = nr % g.out_rows;
      const T* image = input + (first_image + n) * image_stride;
      T* dst = col + nr * g.out_cols * k;
      for (int64_t ow = 0; ow < g.out_cols; ++ow) {
        const int64_t iw0 = ow * g.stride_cols - g.pad_left;
        for (int64_t kh = 0; kh < g.filter_rows; ++kh, dst += g.filter_cols * depth) {
          const int64_t ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
          if (ih < 0 || ih >= g.in_rows) {
            std::fill(dst, dst + g.filter_cols * depth, T(0));
            continue;
          }
          const T* src_row = image + ih * row_stride;
          if (g.dilation_cols == 1) {
            // The valid taps form one run, contiguous in the input row.
            const int64_t lo = std::clamp<int64_t>(-iw0, 0, g.filter_cols);
            const int64_t hi = std::clamp<int64_t>(g.in_cols - iw0, lo, g.filter_cols);
            std::fill(dst, dst + lo * depth, T(0));
            if (hi > lo) std::memcpy(dst + lo * depth, src_row + (iw0 + lo) * depth,
                                     (hi - lo) * depth * sizeof(T));
            std::fill(dst + hi * depth, dst + g.filter_cols * depth, T(0));
          } else {
            for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
              const int64_t iw = iw0 + kw * g.dilation_cols;
              T* d = dst + kw * depth;
              if (iw < 0 || iw >= g.in_cols) {
                std::fill(d, d + depth, T(0));
              } else {
                std::memcpy(d, src_row + iw * depth, depth * sizeof(T));
              }
            }
          }
        }
      }
    }
  });
}

// input_grad[n, ih, iw, :] = sum of the col-gradient entries that im2col
// copied from (ih, iw). Written as a gather over input rows, so shards never
// write the same memory.
template <typename T>
void Col2Im(const OpKernelContext& ctx, const Conv2DGeometry& g, const T* dcol,
            int64_t first_image, int64_t num_images, T* input_grad) {
  const int64_t k = PatchSize(g);
  const int64_t depth = g.in_depth;
  const int64_t row_stride = g.in_cols * depth;
  const int64_t taps = g.filter_rows * g.filter_cols;
  ParallelForRows(ctx, num_images * g.in_rows, row_stride * taps, [&](int64_t begin, int64_t end) {
    for (int64_t nr = begin; nr < end; ++nr) {  // nr = (image in chunk, input row)
      const int64_t n = nr / g.in_rows, ih = nr % g.in_rows;
      T* dst_row = input_grad + ((first_image + n) * g.in_rows + ih) * row_stride;
      std::fill(dst_row, dst_row + row_stride, T(0));
      for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
        // The output row whose tap kh reads input row ih, if any.
        const int64_t t = ih + g.pad_top - kh * g.dilation_rows;
        if (t < 0 || t % g.stride_rows != 0 || t / g.stride_rows >= g.out_rows) continue;
        const int64_t oh = t / g.stride_rows;
        const T* src_row = dcol + ((n * g.out_rows + oh) * g.out_cols) * k + kh * g.filter_cols * depth;
        for (int64_t iw = 0; iw < g.in_cols; ++iw) {
          T* d = dst_row + iw * depth;
          for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
            const int64_t u = iw + g.pad_left - kw * g.dilation_cols;
            if (u < 0 || u % g.stride_cols != 0 || u / g.stride_cols >= g.out_cols) continue;
            const T* s = src_row + (u / g.stride_cols) * k + kw * depth;
            for (int64_t c = 0; c < depth; ++c) d[c] += s[c];
          }
        }
      }
    }
  });
}

template <typename T>
class Conv2DOp : public OpKernel {
 public:
  explicit Conv2DOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "CPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    const Tensor& filter = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g,
                            ConvKernelGeometry(attrs_, input.shape(), filter.shape(), nullptr));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(
        0, TensorShape{g.batch, g.out_rows, g.out_cols, g.out_depth}, &out));
    const int64_t k = PatchSize(g);
    const int64_t patches_per_image = g.out_rows * g.out_cols;
    if (out->NumElements() == 0) return absl::OkStatus();
    if (k == 0) {
      Flat<T>(*out).setZero();
      return absl::OkStatus();
    }
    const auto& d = ctx.eigen_cpu_device();
    const ContractDims dims = {Eigen::IndexPair<Eigen::DenseIndex>(1, 0)};
    ConstMatrixMap<T> f(filter.data<T>(), k, g.out_depth);
    if (IsPointwise(g)) {
      ConstMatrixMap<T> x(input.data<T>(), g.batch * patches_per_image, k);
      MatrixMap<T>(out->data<T>(), g.batch * patches_per_image, g.out_depth).device(d) =
          x.contract(f, dims);
      return absl::OkStatus();
    }
    const int64_t chunk = ImagesPerChunk<T>(g);
    Tensor col;
    STRATA_RETURN_IF_ERROR(
        ctx.allocate_temp(DataTypeToEnum<T>::value, TensorShape{chunk * patches_per_image, k}, &col));
    for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
      const int64_t images = std::min(chunk, g.batch - n0);
      const int64_t rows = images * patches_per_image;
      Im2Col<T>(ctx, g, input.data<T>(), n0, images, col.data<T>());
      MatrixMap<T>(out->data<T>() + n0 * patches_per_image * g.out_depth, rows, g.out_depth)
          .device(d) = ConstMatrixMap<T>(col.data<T>(), rows, k).contract(f, dims);
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

template <typename T>
class Conv2DBackpropInputOp : public OpKernel {
 public:
  explicit Conv2DBackpropInputOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "CPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& sizes = ctx.input(0);
    const Tensor& filter = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    TensorShape input_shape;
    if (sizes.dims() == 1 && sizes.NumElements() == 2 && dy.dims() == 4 && filter.dims() == 4) {
      // Only the spatial sizes given: batch from out_backprop, depth from the filter.
      const int32_t* v = sizes.data<int32_t>();
      auto s = TensorShape::FromDims({dy.dim_size(0), v[0], v[1], filter.dim_size(2)});
      if (!s.ok()) return absl::InvalidArgumentError("input_sizes holds a negative size");
      input_shape = *s;
    } else {
      STRATA_ASSIGN_OR_RETURN(input_shape, ShapeFromSizes(sizes, "input_sizes"));
    }
    STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g,
                            ConvKernelGeometry(attrs_, input_shape, filter.shape(), &dy));
    Tensor* dx;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, input_shape, &dx));
    const int64_t k = PatchSize(g);
    const int64_t patches_per_image = g.out_rows * g.out_cols;
    if (dx->NumElements() == 0) return absl::OkStatus();
    if (dy.NumElements() == 0 || k == 0) {
      Flat<T>(*dx).setZero();
      return absl::OkStatus();
    }
    const auto& d = ctx.eigen_cpu_device();
    // d col = d output · filterᵀ: contract d output's dim 1 with the filter's dim 1.
    const ContractDims dims = {Eigen::IndexPair<Eigen::DenseIndex>(1, 1)};
    ConstMatrixMap<T> f(filter.data<T>(), k, g.out_depth);
    if (IsPointwise(g)) {
      ConstMatrixMap<T> dym(dy.data<T>(), g.batch * patches_per_image, g.out_depth);
      MatrixMap<T>(dx->data<T>(), g.batch * patches_per_image, k).device(d) = dym.contract(f, dims);
      return absl::OkStatus();
    }
    const int64_t chunk = ImagesPerChunk<T>(g);
    Tensor dcol;
    STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DataTypeToEnum<T>::value,
                                             TensorShape{chunk * patches_per_image, k}, &dcol));
    for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
      const int64_t images = std::min(chunk, g.batch - n0);
      const int64_t rows = images * patches_per_image;
      ConstMatrixMap<T> dym(dy.data<T>() + n0 * patches_per_image * g.out_depth, rows, g.out_depth);
      MatrixMap<T>(dcol.data<T>(), rows, k).device(d) = dym.contract(f, dims);
      Col2Im<T>(ctx, g, dcol.data<T>(), n0, images, dx->data<T>());
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

template <typename T>
class Conv2DBackpropFilterOp : public OpKernel {
 public:
  explicit Conv2DBackpropFilterOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "CPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    const Tensor& sizes = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(TensorShape filter_shape, ShapeFromSizes(sizes, "filter_sizes"));
    STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g,
                            ConvKernelGeometry(attrs_, input.shape(), filter_shape, &dy));
    Tensor* df;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, filter_shape, &df));
    const int64_t k = PatchSize(g);
    const int64_t patches_per_image = g.out_rows * g.out_cols;
    if (df->NumElements() == 0) return absl::OkStatus();
    MatrixMap<T> dfm(df->data<T>(), k, g.out_depth);
    if (dy.NumElements() == 0) {
      Flat<T>(*df).setZero();
      return absl::OkStatus();
    }
    const auto& d = ctx.eigen_cpu_device();
    // d filter = colᵀ · d output: contract the patch dim (0) of both.
    const ContractDims dims = {Eigen::IndexPair<Eigen::DenseIndex>(0, 0)};
    if (IsPointwise(g)) {
      ConstMatrixMap<T> x(input.data<T>(), g.batch * patches_per_image, k);
      ConstMatrixMap<T> dym(dy.data<T>(), g.batch * patches_per_image, g.out_depth);
      dfm.device(d) = x.contract(dym, dims);
      return absl::OkStatus();
    }
    const int64_t chunk = ImagesPerChunk<T>(g);
    Tensor col;
    STRATA_RETURN_IF_ERROR(
        ctx.allocate_temp(DataTypeToEnum<T>::value, TensorShape{chunk * patches_per_image, k}, &col));
    for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
      const int64_t images = std::min(chunk, g.batch - n0);
      const int64_t rows = images * patches_per_image;
      Im2Col<T>(ctx, g, input.data<T>(), n0, images, col.data<T>());
      ConstMatrixMap<T> colm(col.data<T>(), rows, k);
      ConstMatrixMap<T> dym(dy.data<T>() + n0 * patches_per_image * g.out_depth, rows, g.out_depth);
      if (n0 == 0) {
        dfm.device(d) = colm.contract(dym, dims);
      } else {
        dfm.device(d) += colm.contract(dym, dims);
      }
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

#define REGISTER_CONV(T)                                                                        \
  STRATA_REGISTER_KERNEL(KernelBuilder("Conv2D").Device(kDeviceCpu).TypeConstraint<T>("T"),     \
                         Conv2DOp<T>);                                                          \
  STRATA_REGISTER_KERNEL(                                                                       \
      KernelBuilder("Conv2DBackpropInput").Device(kDeviceCpu).TypeConstraint<T>("T"),           \
      Conv2DBackpropInputOp<T>);                                                                \
  STRATA_REGISTER_KERNEL(                                                                       \
      KernelBuilder("Conv2DBackpropFilter").Device(kDeviceCpu).TypeConstraint<T>("T"),          \
      Conv2DBackpropFilterOp<T>)
REGISTER_CONV(float);
REGISTER_CONV(double);
#undef REGISTER_CONV

}  // namespace
}  // namespace strata
