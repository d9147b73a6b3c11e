// What the nn-family kernels of every device share: parsing their attrs at
// construction (BiasAdd's data_format; the layouts the convolution and
// pooling kernels support), reading a
// shape from an int32 sizes tensor, and the geometry of one call, checked
// against its inputs. Device code (CPU loops, CUDA launches) starts from
// these, so the checks and their messages are the same on every device.
//
//   STRATA_ASSIGN_OR_RETURN(Conv2DAttrsParsed a, ParseConvKernelAttrs(c, "CPU"));
//   STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g,
//                           ConvKernelGeometry(a, input.shape(), filter.shape(), nullptr));
//
// Thread-safety: pure functions. Ownership: plain values.
#ifndef STRATA_KERNELS_CONV_GEOMETRY_H_
#define STRATA_KERNELS_CONV_GEOMETRY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ops/nn_ops.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "kernels/op_kernel.h"

namespace strata {

// BiasAdd's and BiasAddGrad's data_format: true for NCHW, false for NHWC;
// InvalidArgument naming the attr for anything else.
absl::Status GetBiasDataFormat(const OpKernelConstruction& c, bool* nchw);

// A Conv2D-family kernel's attrs; InvalidArgument for NCHW (the kernels are
// NHWC, as TensorFlow's CPU kernels) and for EXPLICIT padding. `device`
// ("CPU", "GPU") names the kernels in the message.
absl::StatusOr<Conv2DAttrsParsed> ParseConvKernelAttrs(const OpKernelConstruction& c,
                                                       absl::string_view device);

// A MaxPool-family kernel's attrs; InvalidArgument for NCHW.
absl::StatusOr<PoolAttrsParsed> ParsePoolKernelAttrs(const OpKernelConstruction& c,
                                                     absl::string_view device);

// The 4-D shape held by `sizes` (Conv2DBackpropInput's input_sizes,
// Conv2DBackpropFilter's filter_sizes): InvalidArgument naming `what` unless
// it is an int32 vector of 4 valid dimensions.
absl::StatusOr<TensorShape> ShapeFromSizes(const Tensor& sizes, const char* what);

// The convolution's geometry, after checking that `out_backprop` (if not
// null) has the shape the forward convolution produces.
absl::StatusOr<Conv2DGeometry> ConvKernelGeometry(const Conv2DAttrsParsed& a,
                                                  const TensorShape& input,
                                                  const TensorShape& filter,
                                                  const Tensor* out_backprop);

// True when the col matrix of im2col is the input itself: a 1x1 filter,
// stride 1, no padding. For Conv2DGeometry and for a device's plain copy of
// it with the same field names (the CUDA launchers' ConvGeom).
template <typename Geometry>
bool IsPointwise(const Geometry& g) {
  return g.filter_rows == 1 && g.filter_cols == 1 && g.stride_rows == 1 && g.stride_cols == 1 &&
         g.pad_top == 0 && g.pad_left == 0;
}

// One max-pooling call over an NHWC input.
struct PoolGeometry {
  int64_t batch, in_rows, in_cols, depth;
  int64_t window_rows, window_cols, stride_rows, stride_cols;
  int64_t out_rows, out_cols, pad_top, pad_left;
};

// InvalidArgument naming the input unless it is 4-D and the window fits.
absl::StatusOr<PoolGeometry> ComputePoolGeometry(const PoolAttrsParsed& a, const TensorShape& in);

}  // namespace strata

#endif  // STRATA_KERNELS_CONV_GEOMETRY_H_
