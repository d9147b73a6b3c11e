#include "kernels/conv_geometry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata {

absl::Status GetBiasDataFormat(const OpKernelConstruction& c, bool* nchw) {
  std::string f;
  STRATA_RETURN_IF_ERROR(c.GetAttr("data_format", &f));
  if (f != "NHWC" && f != "NCHW") {
    return absl::InvalidArgumentError(
        absl::StrCat("attr 'data_format' is '", f, "', expected NHWC or NCHW"));
  }
  *nchw = f == "NCHW";
  return absl::OkStatus();
}

absl::StatusOr<Conv2DAttrsParsed> ParseConvKernelAttrs(const OpKernelConstruction& c,
                                                       absl::string_view device) {
  STRATA_ASSIGN_OR_RETURN(Conv2DAttrsParsed a, ParseConv2DAttrs(c.def().attr()));
  if (a.nchw) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", device, " convolution kernels support only data_format NHWC (as TensorFlow's)"));
  }
  if (a.padding == Padding::kExplicit) {
    return absl::InvalidArgumentError("EXPLICIT padding is not supported by Strata's Conv2D");
  }
  return a;
}

absl::StatusOr<PoolAttrsParsed> ParsePoolKernelAttrs(const OpKernelConstruction& c,
                                                     absl::string_view device) {
  STRATA_ASSIGN_OR_RETURN(PoolAttrsParsed a, ParsePoolAttrs(c.def().attr()));
  if (a.nchw) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", device, " max pooling kernels support only data_format NHWC (as TensorFlow's)"));
  }
  return a;
}

absl::StatusOr<TensorShape> ShapeFromSizes(const Tensor& sizes, const char* what) {
  if (sizes.dtype() != DT_INT32 || sizes.dims() != 1 || sizes.NumElements() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be an int32 vector of 4 entries, got ",
                                                   DataTypeString(sizes.dtype()), " ",
                                                   sizes.shape().DebugString()));
  }
  const int32_t* v = sizes.data<int32_t>();
  auto s = TensorShape::FromDims({v[0], v[1], v[2], v[3]});
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " [", absl::StrJoin(sizes.span<int32_t>(), ","), "] is not a valid shape"));
  }
  return *s;
}

absl::StatusOr<Conv2DGeometry> ConvKernelGeometry(const Conv2DAttrsParsed& a,
                                                  const TensorShape& input,
                                                  const TensorShape& filter,
                                                  const Tensor* out_backprop) {
  STRATA_ASSIGN_OR_RETURN(Conv2DGeometry g,
                          ComputeConv2DGeometry(a, input.dim_sizes(), filter.dim_sizes()));
  if (out_backprop != nullptr) {
    const TensorShape expected{g.batch, g.out_rows, g.out_cols, g.out_depth};
    if (out_backprop->shape() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "out_backprop has shape ", out_backprop->shape().DebugString(),
          " but the convolution of input ", input.DebugString(), " with filter ",
          filter.DebugString(), " has output shape ", expected.DebugString()));
    }
  }
  return g;
}

absl::StatusOr<PoolGeometry> ComputePoolGeometry(const PoolAttrsParsed& a, const TensorShape& in) {
  if (in.dims() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("input must be 4-D [batch, rows, cols, depth], got shape ", in.DebugString()));
  }
  PoolGeometry g;
  g.batch = in.dim_size(0);
  g.in_rows = in.dim_size(1);
  g.in_cols = in.dim_size(2);
  g.depth = in.dim_size(3);
  g.window_rows = a.window_rows;
  g.window_cols = a.window_cols;
  g.stride_rows = a.stride_rows;
  g.stride_cols = a.stride_cols;
  auto rows = ComputeWindowedOutput(g.in_rows, g.window_rows, 1, g.stride_rows, a.padding);
  if (!rows.ok()) {
    return AnnotateStatus(rows.status(), absl::StrCat("rows of input ", in.DebugString(), ": "));
  }
  auto cols = ComputeWindowedOutput(g.in_cols, g.window_cols, 1, g.stride_cols, a.padding);
  if (!cols.ok()) {
    return AnnotateStatus(cols.status(), absl::StrCat("cols of input ", in.DebugString(), ": "));
  }
  g.out_rows = rows->size;
  g.out_cols = cols->size;
  g.pad_top = rows->pad_before;
  g.pad_left = cols->pad_before;
  return g;
}

}  // namespace strata
