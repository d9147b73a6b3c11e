// GPU kernels for Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (NHWC,
// SAME/VALID padding, strides and dilations); attrs and geometry are
// kernels/conv_geometry.h's, shared with the CPU kernels.
//
// Convolutions are im2col + cuBLAS products (the CPU kernels' formulation):
//   col [P, K] (P = images*out_rows*out_cols, K = filter_rows*filter_cols*in_depth)
//   output      = col · filter[K, out_depth]
//   d col       = d output · filterᵀ, gathered back into the input (col2im)
//   d filter   += colᵀ · d output, chunk by chunk
// Why not cuDNN: it would add a library to link and ship beside cuBLAS, and
// its descriptor and algorithm-selection state, for models whose
// convolutions are small (the trainer's CNN runs on 8x8 digits); the products
// here are cuBLAS GEMMs already. The col buffer is built a chunk of images at
// a time (at most kMaxColBytes, at least one image). 1x1 convolutions with
// stride 1 and no padding use the input as the col matrix.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/nn_ops.h"
#include "kernels/conv_geometry.h"
#include "kernels/gpu/blas.h"
#include "kernels/gpu/conv_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

constexpr int64_t kMaxColBytes = int64_t{256} << 20;

// The shared geometry (kernels/conv_geometry.h) as the launchers' plain struct.
absl::StatusOr<ConvGeom> Geometry(const Conv2DAttrsParsed& a, const TensorShape& input, const TensorShape& filter,
                                  const Tensor* out_backprop) {
  STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g, ConvKernelGeometry(a, input, filter, out_backprop));
  return ConvGeom{g.batch,        g.in_rows,       g.in_cols,       g.in_depth,      g.filter_rows,
                  g.filter_cols,  g.out_depth,     g.stride_rows,   g.stride_cols,   g.dilation_rows,
                  g.dilation_cols, g.out_rows,     g.out_cols,      g.pad_top,       g.pad_left};
}

// Images per col chunk, and the chunk's col temporary.
absl::Status ColChunk(OpKernelContext& ctx, DataType dt, const ConvGeom& g, int64_t* images, Tensor* col) {
  const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
  const int64_t per_image = std::max<int64_t>(1, g.out_rows * g.out_cols * k * static_cast<int64_t>(DataTypeSize(dt)));
  *images = std::clamp<int64_t>(kMaxColBytes / per_image, 1, std::max<int64_t>(g.batch, 1));
  return AllocateDeviceTemp(ctx, dt, TensorShape{*images * g.out_rows * g.out_cols, k}, col);
}

class Conv2DOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit Conv2DOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "GPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    const Tensor& filter = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(const ConvGeom g, Geometry(attrs_, input.shape(), filter.shape(), nullptr));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(input.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.batch, g.out_rows, g.out_cols, g.out_depth}, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
    const int64_t rows_per_image = g.out_rows * g.out_cols;
    const size_t esize = DataTypeSize(input.dtype());
    if (IsPointwise(g)) {
      return Gemm(ctx, input.dtype(), false, false, g.batch * rows_per_image, g.out_depth, k, input.raw_data(), k,
                  filter.raw_data(), g.out_depth, out->raw_data(), false);
    }
    int64_t chunk;
    Tensor col;
    STRATA_RETURN_IF_ERROR(ColChunk(ctx, input.dtype(), g, &chunk, &col));
    for (int64_t first = 0; first < g.batch; first += chunk) {
      const int64_t images = std::min(chunk, g.batch - first);
      STRATA_RETURN_IF_ERROR(
          CudaStatus(LaunchIm2Col(t, input.raw_data(), col.raw_data(), g, first, images, stream), "Conv2D im2col"));
      char* dst = static_cast<char*>(out->raw_data()) + first * rows_per_image * g.out_depth * esize;
      STRATA_RETURN_IF_ERROR(Gemm(ctx, input.dtype(), false, false, images * rows_per_image, g.out_depth, k,
                                  col.raw_data(), k, filter.raw_data(), g.out_depth, dst, false));
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

class Conv2DBackpropInputOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit Conv2DBackpropInputOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "GPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(const TensorShape in_shape, ShapeFromSizes(ctx.input(0), "input_sizes"));
    const Tensor& filter = ctx.input(1);
    const Tensor& dout = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(const ConvGeom g, Geometry(attrs_, in_shape, filter.shape(), &dout));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(dout.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* din;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, in_shape, &din));
    if (din->NumElements() == 0) return absl::OkStatus();
    const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
    const int64_t rows_per_image = g.out_rows * g.out_cols;
    const size_t esize = DataTypeSize(dout.dtype());
    if (IsPointwise(g)) {
      return Gemm(ctx, dout.dtype(), false, true, g.batch * rows_per_image, k, g.out_depth, dout.raw_data(),
                  g.out_depth, filter.raw_data(), g.out_depth, din->raw_data(), false);
    }
    int64_t chunk;
    Tensor col;
    STRATA_RETURN_IF_ERROR(ColChunk(ctx, dout.dtype(), g, &chunk, &col));
    for (int64_t first = 0; first < g.batch; first += chunk) {
      const int64_t images = std::min(chunk, g.batch - first);
      const char* src = static_cast<const char*>(dout.raw_data()) + first * rows_per_image * g.out_depth * esize;
      STRATA_RETURN_IF_ERROR(Gemm(ctx, dout.dtype(), false, true, images * rows_per_image, k, g.out_depth, src,
                                  g.out_depth, filter.raw_data(), g.out_depth, col.raw_data(), false));
      STRATA_RETURN_IF_ERROR(CudaStatus(LaunchCol2Im(t, col.raw_data(), din->raw_data(), g, first, images, stream),
                                        "Conv2DBackpropInput col2im"));
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

class Conv2DBackpropFilterOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit Conv2DBackpropFilterOp(OpKernelConstruction& c) : OpKernel(c) {
    auto a = ParseConvKernelAttrs(c, "GPU");
    STRATA_KERNEL_REQUIRES_OK(c, a.status());
    attrs_ = *a;
  }
  bool IsExpensive() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& input = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(const TensorShape f_shape, ShapeFromSizes(ctx.input(1), "filter_sizes"));
    const Tensor& dout = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(const ConvGeom g, Geometry(attrs_, input.shape(), f_shape, &dout));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(input.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* df;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, f_shape, &df));
    if (df->NumElements() == 0) return absl::OkStatus();
    const int64_t k = g.filter_rows * g.filter_cols * g.in_depth;
    const int64_t rows_per_image = g.out_rows * g.out_cols;
    const size_t esize = DataTypeSize(input.dtype());
    if (g.batch * rows_per_image == 0) {
      return CudaStatus(cudaMemsetAsync(df->raw_data(), 0, df->TotalBytes(), stream), "Conv2DBackpropFilter");
    }
    if (IsPointwise(g)) {
      return Gemm(ctx, input.dtype(), true, false, k, g.out_depth, g.batch * rows_per_image, input.raw_data(), k,
                  dout.raw_data(), g.out_depth, df->raw_data(), false);
    }
    int64_t chunk;
    Tensor col;
    STRATA_RETURN_IF_ERROR(ColChunk(ctx, input.dtype(), g, &chunk, &col));
    for (int64_t first = 0; first < g.batch; first += chunk) {
      const int64_t images = std::min(chunk, g.batch - first);
      STRATA_RETURN_IF_ERROR(CudaStatus(LaunchIm2Col(t, input.raw_data(), col.raw_data(), g, first, images, stream),
                                        "Conv2DBackpropFilter im2col"));
      const char* src = static_cast<const char*>(dout.raw_data()) + first * rows_per_image * g.out_depth * esize;
      STRATA_RETURN_IF_ERROR(Gemm(ctx, input.dtype(), true, false, k, g.out_depth, images * rows_per_image,
                                  col.raw_data(), k, src, g.out_depth, df->raw_data(), /*accumulate=*/first > 0));
    }
    return absl::OkStatus();
  }

 private:
  Conv2DAttrsParsed attrs_;
};

#define REGISTER(op, dt, cls) STRATA_REGISTER_KERNEL(KernelBuilder(op).Device(kDeviceGpu).TypeConstraint("T", dt), cls)
REGISTER("Conv2D", DT_FLOAT, Conv2DOp);
REGISTER("Conv2D", DT_DOUBLE, Conv2DOp);
REGISTER("Conv2DBackpropInput", DT_FLOAT, Conv2DBackpropInputOp);
REGISTER("Conv2DBackpropInput", DT_DOUBLE, Conv2DBackpropInputOp);
REGISTER("Conv2DBackpropFilter", DT_FLOAT, Conv2DBackpropFilterOp);
REGISTER("Conv2DBackpropFilter", DT_DOUBLE, Conv2DBackpropFilterOp);
#undef REGISTER

}  // namespace
}  // namespace gpu
}  // namespace strata
