#include "graph/ops/nn_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {

absl::StatusOr<Padding> ParsePadding(const std::string& s) {
  if (s == "VALID") return Padding::kValid;
  if (s == "SAME") return Padding::kSame;
  if (s == "EXPLICIT") return Padding::kExplicit;
  return absl::InvalidArgumentError(
      absl::StrCat("attr 'padding' is '", s, "', expected SAME, VALID or EXPLICIT"));
}

absl::StatusOr<WindowedOutput> ComputeWindowedOutput(int64_t input, int64_t window,
                                                     int64_t dilation, int64_t stride,
                                                     Padding padding) {
  if (stride < 1 || window < 1 || dilation < 1) {
    return absl::InvalidArgumentError(absl::StrCat("window ", window, ", stride ", stride,
                                                   " and dilation ", dilation,
                                                   " must all be at least 1"));
  }
  if (input < 0) return absl::InvalidArgumentError(absl::StrCat("input size ", input, " < 0"));
  const int64_t effective = (window - 1) * dilation + 1;
  WindowedOutput out;
  switch (padding) {
    case Padding::kValid:
      if (effective > input) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the window (", window, dilation > 1 ? absl::StrCat(" dilated to ", effective) : "",
            ") is larger than the input (", input, ") with VALID padding"));
      }
      out.size = (input - effective + stride) / stride;
      break;
    case Padding::kSame: {
      out.size = (input + stride - 1) / stride;
      // TensorFlow puts the odd element of padding after the input.
      const int64_t needed = std::max<int64_t>(0, (out.size - 1) * stride + effective - input);
      out.pad_before = needed / 2;
      out.pad_after = needed - out.pad_before;
      break;
    }
    case Padding::kExplicit:
      return absl::InvalidArgumentError("EXPLICIT padding is not supported by Strata");
  }
  return out;
}

namespace {

absl::Status GetDataFormat(const AttrMap& attrs, bool* nchw) {
  std::string f;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, "data_format", &f));
  if (f != "NHWC" && f != "NCHW") {
    return absl::InvalidArgumentError(
        absl::StrCat("attr 'data_format' is '", f, "', expected NHWC or NCHW"));
  }
  *nchw = f == "NCHW";
  return absl::OkStatus();
}

// The (rows, cols) entries of a 4-entry attr laid out like the data; the
// batch and depth entries must be 1 (TensorFlow's restriction too).
absl::Status GetSpatialPair(const AttrMap& attrs, const std::string& name, bool nchw,
                            int64_t* rows, int64_t* cols) {
  std::vector<int64_t> v;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, name, &v));
  if (v.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("attr '", name, "' must have 4 entries, has ", v.size()));
  }
  const int n = 0, c = nchw ? 1 : 3, h = nchw ? 2 : 1, w = nchw ? 3 : 2;
  if (v[n] != 1 || v[c] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attr '", name, "' = [", absl::StrJoin(v, ","),
        "]: the batch and depth entries must be 1 (windows across them are not supported)"));
  }
  if (v[h] < 1 || v[w] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attr '", name, "' = [", absl::StrJoin(v, ","), "]: entries must be >= 1"));
  }
  *rows = v[h];
  *cols = v[w];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Conv2DAttrsParsed> ParseConv2DAttrs(const AttrMap& attrs) {
  Conv2DAttrsParsed p;
  STRATA_RETURN_IF_ERROR(GetDataFormat(attrs, &p.nchw));
  STRATA_RETURN_IF_ERROR(GetSpatialPair(attrs, "strides", p.nchw, &p.stride_rows, &p.stride_cols));
  STRATA_RETURN_IF_ERROR(
      GetSpatialPair(attrs, "dilations", p.nchw, &p.dilation_rows, &p.dilation_cols));
  std::string padding;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, "padding", &padding));
  STRATA_ASSIGN_OR_RETURN(p.padding, ParsePadding(padding));
  std::vector<int64_t> explicit_paddings;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, "explicit_paddings", &explicit_paddings));
  if (p.padding != Padding::kExplicit && !explicit_paddings.empty()) {
    return absl::InvalidArgumentError(
        "attr 'explicit_paddings' must be empty unless padding is EXPLICIT");
  }
  return p;
}

absl::StatusOr<Conv2DGeometry> ComputeConv2DGeometry(const Conv2DAttrsParsed& attrs,
                                                     absl::Span<const int64_t> input_nhwc,
                                                     absl::Span<const int64_t> filter) {
  auto shapes = [&] {
    return absl::StrCat("input [", absl::StrJoin(input_nhwc, ","), "] (NHWC), filter [",
                        absl::StrJoin(filter, ","), "]");
  };
  if (input_nhwc.size() != 4 || filter.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("input and filter must have rank 4: ", shapes()));
  }
  for (int i = 0; i < 4; ++i) {
    if (input_nhwc[i] < 0 || filter[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative dimension: ", shapes()));
    }
  }
  if (input_nhwc[3] != filter[2]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input depth ", input_nhwc[3], " does not match the filter's in_channels ", filter[2],
        " (grouped convolutions are not supported): ", shapes()));
  }
  if (attrs.padding == Padding::kExplicit) {
    return absl::InvalidArgumentError("EXPLICIT padding is not supported by Strata's Conv2D");
  }
  Conv2DGeometry g;
  g.batch = input_nhwc[0];
  g.in_rows = input_nhwc[1];
  g.in_cols = input_nhwc[2];
  g.in_depth = input_nhwc[3];
  g.filter_rows = filter[0];
  g.filter_cols = filter[1];
  g.out_depth = filter[3];
  g.stride_rows = attrs.stride_rows;
  g.stride_cols = attrs.stride_cols;
  g.dilation_rows = attrs.dilation_rows;
  g.dilation_cols = attrs.dilation_cols;
  auto rows = ComputeWindowedOutput(g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows,
                                    attrs.padding);
  if (!rows.ok()) return AnnotateStatus(rows.status(), absl::StrCat("rows of ", shapes(), ": "));
  auto cols = ComputeWindowedOutput(g.in_cols, g.filter_cols, g.dilation_cols, g.stride_cols,
                                    attrs.padding);
  if (!cols.ok()) return AnnotateStatus(cols.status(), absl::StrCat("cols of ", shapes(), ": "));
  g.out_rows = rows->size;
  g.out_cols = cols->size;
  g.pad_top = rows->pad_before;
  g.pad_left = cols->pad_before;
  return g;
}

absl::StatusOr<PoolAttrsParsed> ParsePoolAttrs(const AttrMap& attrs) {
  PoolAttrsParsed p;
  STRATA_RETURN_IF_ERROR(GetDataFormat(attrs, &p.nchw));
  STRATA_RETURN_IF_ERROR(GetSpatialPair(attrs, "ksize", p.nchw, &p.window_rows, &p.window_cols));
  STRATA_RETURN_IF_ERROR(GetSpatialPair(attrs, "strides", p.nchw, &p.stride_rows, &p.stride_cols));
  std::string padding;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, "padding", &padding));
  STRATA_ASSIGN_OR_RETURN(p.padding, ParsePadding(padding));
  if (p.padding == Padding::kExplicit) {
    return absl::InvalidArgumentError("EXPLICIT padding is not supported by Strata's pooling ops");
  }
  return p;
}

namespace {

// ---- Shape functions -------------------------------------------------------

// Both inputs must be compatible; the output is their merge (the gradient ops
// of elementwise activations).
absl::Status MergeBothShape(InferenceContext& c) {
  auto merged = c.input(0).Merge(c.input(1));
  if (!merged.ok()) {
    return c.Error(absl::StrCat("inputs must have the same shape, got ", c.input(0).DebugString(),
                                " and ", c.input(1).DebugString()));
  }
  c.set_output(0, *merged);
  return absl::OkStatus();
}

absl::Status BiasAddShape(InferenceContext& c) {
  bool nchw;
  STRATA_RETURN_IF_ERROR(c.Annotate(GetDataFormat(c.node_def().attr(), &nchw)));
  PartialTensorShape value, bias;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &value));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &bias));
  if (value.unknown_rank()) {
    c.set_output(0, value);
    return absl::OkStatus();
  }
  const int channel = nchw ? 1 : value.dims() - 1;
  DimVector dims(value.dim_sizes().begin(), value.dim_sizes().end());
  if (dims[channel] >= 0 && bias.dim_size(0) >= 0 && dims[channel] != bias.dim_size(0)) {
    return c.Error(absl::StrCat("bias length ", bias.dim_size(0), " must equal the ",
                                nchw ? "channel dim (1)" : "last dim", " of value, ",
                                dims[channel], "; value ", value.DebugString(), ", bias ",
                                bias.DebugString()));
  }
  if (dims[channel] < 0) dims[channel] = bias.dim_size(0);
  c.set_output(0, PartialTensorShape(dims));
  return absl::OkStatus();
}

absl::Status BiasAddGradShape(InferenceContext& c) {
  bool nchw;
  STRATA_RETURN_IF_ERROR(c.Annotate(GetDataFormat(c.node_def().attr(), &nchw)));
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &in));
  const int64_t channels = in.unknown_rank() ? -1 : in.dim_size(nchw ? 1 : in.dims() - 1);
  c.set_output(0, PartialTensorShape(DimVector{channels}));
  return absl::OkStatus();
}

absl::Status SoftmaxShape(InferenceContext& c) {
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 1, &in));
  c.set_output(0, in);
  return absl::OkStatus();
}

absl::Status SparseXentShape(InferenceContext& c) {
  PartialTensorShape features, labels;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 2, &features));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &labels));
  int64_t batch;
  STRATA_RETURN_IF_ERROR(c.MergeDim(features.dim_size(0), labels.dim_size(0), &batch,
                                    absl::StrCat("batch size of features ", features.DebugString(),
                                                 " vs labels ", labels.DebugString())));
  c.set_output(0, PartialTensorShape(DimVector{batch}));
  c.set_output(1, PartialTensorShape(DimVector{batch, features.dim_size(1)}));
  return absl::OkStatus();
}

absl::Status DenseXentShape(InferenceContext& c) {
  PartialTensorShape features, labels;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 2, &features));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 2, &labels));
  const std::string what = absl::StrCat("features ", features.DebugString(), " vs labels ", labels.DebugString());
  int64_t batch, classes;
  STRATA_RETURN_IF_ERROR(c.MergeDim(features.dim_size(0), labels.dim_size(0), &batch, what));
  STRATA_RETURN_IF_ERROR(c.MergeDim(features.dim_size(1), labels.dim_size(1), &classes, what));
  c.set_output(0, PartialTensorShape(DimVector{batch}));
  c.set_output(1, PartialTensorShape(DimVector{batch, classes}));
  return absl::OkStatus();
}

// Index permutations between the op's layout and NHWC.
DimVector ToNhwc(const PartialTensorShape& s, bool nchw) {
  if (!nchw) return DimVector(s.dim_sizes().begin(), s.dim_sizes().end());
  return DimVector{s.dim_size(0), s.dim_size(2), s.dim_size(3), s.dim_size(1)};
}
PartialTensorShape FromNhwc(const DimVector& d, bool nchw) {
  if (!nchw) return PartialTensorShape(d);
  return PartialTensorShape(DimVector{d[0], d[3], d[1], d[2]});
}

// One windowed dim of a partially known shape: -1 stays unknown.
absl::Status WindowedDim(InferenceContext& c, int64_t in, int64_t window, int64_t dilation,
                         int64_t stride, Padding padding, const std::string& what,
                         int64_t* out) {
  if (in < 0 || window < 0) {
    // SAME's output size does not depend on the window.
    *out = in >= 0 && padding == Padding::kSame && stride >= 1 ? (in + stride - 1) / stride : -1;
    return absl::OkStatus();
  }
  auto w = ComputeWindowedOutput(in, window, dilation, stride, padding);
  if (!w.ok()) return c.Error(absl::StrCat(what, ": ", w.status().message()));
  *out = w->size;
  return absl::OkStatus();
}

// Conv2D's output shape (in the op's layout) from partially known input
// (op's layout) and filter shapes.
absl::Status ConvOutputShape(InferenceContext& c, const Conv2DAttrsParsed& a,
                             const PartialTensorShape& input, const PartialTensorShape& filter,
                             PartialTensorShape* out) {
  if (a.padding == Padding::kExplicit) {
    return c.Error("EXPLICIT padding is not supported by Strata's Conv2D");
  }
  const DimVector in = ToNhwc(input, a.nchw);
  const std::string shapes = absl::StrCat("input ", input.DebugString(), ", filter ",
                                          filter.DebugString());
  if (in[3] >= 0 && filter.dim_size(2) >= 0 && in[3] != filter.dim_size(2)) {
    return c.Error(absl::StrCat("input depth ", in[3], " does not match the filter's in_channels ",
                                filter.dim_size(2), " (grouped convolutions are not supported): ",
                                shapes));
  }
  int64_t rows, cols;
  STRATA_RETURN_IF_ERROR(WindowedDim(c, in[1], filter.dim_size(0), a.dilation_rows, a.stride_rows,
                                     a.padding, "rows of " + shapes, &rows));
  STRATA_RETURN_IF_ERROR(WindowedDim(c, in[2], filter.dim_size(1), a.dilation_cols, a.stride_cols,
                                     a.padding, "cols of " + shapes, &cols));
  *out = FromNhwc(DimVector{in[0], rows, cols, filter.dim_size(3)}, a.nchw);
  return absl::OkStatus();
}

absl::Status Conv2DShape(InferenceContext& c) {
  auto attrs = ParseConv2DAttrs(c.node_def().attr());
  if (!attrs.ok()) return c.Error(std::string(attrs.status().message()));
  PartialTensorShape input, filter, out;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 4, &input));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 4, &filter));
  STRATA_RETURN_IF_ERROR(ConvOutputShape(c, *attrs, input, filter, &out));
  c.set_output(0, out);
  return absl::OkStatus();
}

// The shape held by a constant int32 "sizes" input (4 entries, or 2 spatial
// ones), or unknown dims of rank 4 if the value is not a constant.
absl::Status ShapeFromSizesInput(InferenceContext& c, int i, PartialTensorShape* out,
                                 bool* two_entries) {
  PartialTensorShape sizes_shape;
  STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &sizes_shape));
  const int64_t n = sizes_shape.dim_size(0);
  *two_entries = n == 2;
  if (n >= 0 && n != 4 && n != 2) {
    return c.Error(absl::StrCat("input ", i, " (sizes) must have 4 (or 2 spatial) entries, has ",
                                n));
  }
  *out = PartialTensorShape(DimVector(4, -1));
  const Tensor* t = c.input_tensor(i);
  if (t == nullptr || t->dtype() != DT_INT32) return absl::OkStatus();
  if (t->NumElements() != 4 && t->NumElements() != 2) {
    return c.Error(absl::StrCat("input ", i, " (sizes) must have 4 (or 2 spatial) entries, has ",
                                t->NumElements()));
  }
  *two_entries = t->NumElements() == 2;
  const int32_t* v = t->data<int32_t>();
  for (int64_t k = 0; k < t->NumElements(); ++k) {
    if (v[k] < 0) return c.Error(absl::StrCat("input ", i, " (sizes) has a negative entry ", v[k]));
  }
  if (t->NumElements() == 4) *out = PartialTensorShape(DimVector{v[0], v[1], v[2], v[3]});
  if (t->NumElements() == 2) *out = PartialTensorShape(DimVector{-1, v[0], v[1], -1});
  return absl::OkStatus();
}

absl::Status Conv2DBackpropInputShape(InferenceContext& c) {
  auto attrs = ParseConv2DAttrs(c.node_def().attr());
  if (!attrs.ok()) return c.Error(std::string(attrs.status().message()));
  PartialTensorShape sizes, filter, grad;
  bool spatial_only;
  STRATA_RETURN_IF_ERROR(ShapeFromSizesInput(c, 0, &sizes, &spatial_only));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 4, &filter));
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 4, &grad));
  // Two entries hold only the spatial dims (in layout order); batch comes from
  // out_backprop and depth from the filter.
  DimVector in(sizes.dim_sizes().begin(), sizes.dim_sizes().end());
  if (spatial_only) {
    in = attrs->nchw ? DimVector{-1, -1, in[1], in[2]} : DimVector{-1, in[1], in[2], -1};
  }
  PartialTensorShape input(in);
  DimVector nhwc = ToNhwc(input, attrs->nchw);
  const DimVector g = ToNhwc(grad, attrs->nchw);
  STRATA_RETURN_IF_ERROR(c.MergeDim(nhwc[0], g[0], &nhwc[0], "batch of input_sizes vs out_backprop"));
  STRATA_RETURN_IF_ERROR(
      c.MergeDim(nhwc[3], filter.dim_size(2), &nhwc[3], "depth of input_sizes vs filter"));
  input = FromNhwc(nhwc, attrs->nchw);
  // The forward output these sizes imply must be out_backprop's shape.
  PartialTensorShape expected;
  STRATA_RETURN_IF_ERROR(ConvOutputShape(c, *attrs, input, filter, &expected));
  if (!expected.IsCompatibleWith(grad)) {
    return c.Error(absl::StrCat("out_backprop ", grad.DebugString(),
                                " does not match the Conv2D output ", expected.DebugString(),
                                " of input ", input.DebugString(), " and filter ",
                                filter.DebugString()));
  }
  c.set_output(0, input);
  return absl::OkStatus();
}

absl::Status Conv2DBackpropFilterShape(InferenceContext& c) {
  auto attrs = ParseConv2DAttrs(c.node_def().attr());
  if (!attrs.ok()) return c.Error(std::string(attrs.status().message()));
  PartialTensorShape input, sizes, grad;
  bool spatial_only;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 4, &input));
  STRATA_RETURN_IF_ERROR(ShapeFromSizesInput(c, 1, &sizes, &spatial_only));
  if (spatial_only) {
    return c.Error("filter_sizes must have 4 entries [rows, cols, in_channels, out_channels]");
  }
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 4, &grad));
  DimVector f(sizes.dim_sizes().begin(), sizes.dim_sizes().end());
  const DimVector in = ToNhwc(input, attrs->nchw);
  const DimVector g = ToNhwc(grad, attrs->nchw);
  STRATA_RETURN_IF_ERROR(c.MergeDim(f[2], in[3], &f[2], "filter_sizes in_channels vs input depth"));
  STRATA_RETURN_IF_ERROR(
      c.MergeDim(f[3], g[3], &f[3], "filter_sizes out_channels vs out_backprop depth"));
  PartialTensorShape filter(f), expected;
  STRATA_RETURN_IF_ERROR(ConvOutputShape(c, *attrs, input, filter, &expected));
  if (!expected.IsCompatibleWith(grad)) {
    return c.Error(absl::StrCat("out_backprop ", grad.DebugString(),
                                " does not match the Conv2D output ", expected.DebugString(),
                                " of input ", input.DebugString(), " and filter ",
                                filter.DebugString()));
  }
  c.set_output(0, filter);
  return absl::OkStatus();
}

absl::Status PoolOutputShape(InferenceContext& c, const PartialTensorShape& input,
                             PartialTensorShape* out) {
  auto attrs = ParsePoolAttrs(c.node_def().attr());
  if (!attrs.ok()) return c.Error(std::string(attrs.status().message()));
  const DimVector in = ToNhwc(input, attrs->nchw);
  const std::string what = absl::StrCat(" of input ", input.DebugString());
  int64_t rows, cols;
  STRATA_RETURN_IF_ERROR(WindowedDim(c, in[1], attrs->window_rows, 1, attrs->stride_rows,
                                     attrs->padding, "rows" + what, &rows));
  STRATA_RETURN_IF_ERROR(WindowedDim(c, in[2], attrs->window_cols, 1, attrs->stride_cols,
                                     attrs->padding, "cols" + what, &cols));
  *out = FromNhwc(DimVector{in[0], rows, cols, in[3]}, attrs->nchw);
  return absl::OkStatus();
}

absl::Status MaxPoolShape(InferenceContext& c) {
  PartialTensorShape input, out;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 4, &input));
  STRATA_RETURN_IF_ERROR(PoolOutputShape(c, input, &out));
  c.set_output(0, out);
  return absl::OkStatus();
}

// AvgPoolGrad: the input's shape (orig_input_shape, when constant); grad
// must have its pooled shape.
absl::Status AvgPoolGradShape(InferenceContext& c) {
  PartialTensorShape sizes, grad, expected;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 1, &sizes));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 4, &grad));
  STRATA_RETURN_IF_ERROR(SetOutputFromShapeInput(c, 0, "AvgPoolGrad orig_input_shape"));
  PartialTensorShape input = c.output(0);
  if (input.unknown_rank()) input = PartialTensorShape({-1, -1, -1, -1});
  if (input.dims() != 4) {
    return c.Error(absl::StrCat("AvgPoolGrad orig_input_shape must hold 4 dims, got ", input.DebugString()));
  }
  STRATA_RETURN_IF_ERROR(PoolOutputShape(c, input, &expected));
  if (!expected.IsCompatibleWith(grad)) {
    return c.Error(absl::StrCat("grad ", grad.DebugString(), " must match the pooled shape ", expected.DebugString(),
                                " of orig_input_shape ", input.DebugString()));
  }
  c.set_output(0, input);
  return absl::OkStatus();
}

absl::Status MaxPoolGradShape(InferenceContext& c) {
  PartialTensorShape input, orig_out, grad, expected;
  STRATA_RETURN_IF_ERROR(c.WithRank(0, 4, &input));
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 4, &orig_out));
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 4, &grad));
  STRATA_RETURN_IF_ERROR(PoolOutputShape(c, input, &expected));
  if (!expected.IsCompatibleWith(orig_out) || !expected.IsCompatibleWith(grad)) {
    return c.Error(absl::StrCat("orig_output ", orig_out.DebugString(), " and grad ",
                                grad.DebugString(), " must match the pooled shape ",
                                expected.DebugString(), " of orig_input ", input.DebugString()));
  }
  c.set_output(0, input);
  return absl::OkStatus();
}

// ---- Registrations ---------------------------------------------------------
// Allowed types are TensorFlow's lists, less the types Strata cannot name
// (complex, quantized); kernels exist for a subset (see kernels/cpu/).

#define STRATA_NN_REAL_TYPES \
  "{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}"
#define STRATA_NN_FLOAT_TYPES "{half, bfloat16, float, double}"

STRATA_REGISTER_OP("Relu")
    .Input("features: T")
    .Output("activations: T")
    .Attr("T: " STRATA_NN_REAL_TYPES)
    .SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("ReluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Output("backprops: T")
    .Attr("T: " STRATA_NN_REAL_TYPES)
    .SetShapeFn(MergeBothShape);

STRATA_REGISTER_OP("Sigmoid")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("SigmoidGrad")
    .Input("y: T")
    .Input("dy: T")
    .Output("z: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(MergeBothShape);

STRATA_REGISTER_OP("Tanh")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("TanhGrad")
    .Input("y: T")
    .Input("dy: T")
    .Output("z: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(MergeBothShape);

STRATA_REGISTER_OP("BiasAdd")
    .Input("value: T")
    .Input("bias: T")
    .Output("output: T")
    .Attr("T: " STRATA_NN_REAL_TYPES)
    .Attr("data_format: string = 'NHWC'")
    .SetShapeFn(BiasAddShape);

STRATA_REGISTER_OP("BiasAddGrad")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: " STRATA_NN_REAL_TYPES)
    .Attr("data_format: string = 'NHWC'")
    .SetShapeFn(BiasAddGradShape);

STRATA_REGISTER_OP("Softmax")
    .Input("logits: T")
    .Output("softmax: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(SoftmaxShape);

STRATA_REGISTER_OP("LogSoftmax")
    .Input("logits: T")
    .Output("logsoftmax: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(SoftmaxShape);

STRATA_REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: Tlabels")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .Attr("Tlabels: {int32, int64} = int64")
    .SetShapeFn(SparseXentShape);

STRATA_REGISTER_OP("SoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: T")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .SetShapeFn(DenseXentShape);

STRATA_REGISTER_OP("Conv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: string")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: string = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DShape);

STRATA_REGISTER_OP("Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: string")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: string = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DBackpropInputShape);

STRATA_REGISTER_OP("Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: " STRATA_NN_FLOAT_TYPES)
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: string")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: string = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DBackpropFilterShape);

STRATA_REGISTER_OP("MaxPool")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16} = float")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: string")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: string = 'NHWC'")
    .SetShapeFn(MaxPoolShape);

STRATA_REGISTER_OP("AvgPool")
    .Input("value: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: string")
    .Attr("data_format: string = 'NHWC'")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(MaxPoolShape);

STRATA_REGISTER_OP("AvgPoolGrad")
    .Input("orig_input_shape: int32")
    .Input("grad: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: string")
    .Attr("data_format: string = 'NHWC'")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(AvgPoolGradShape);

STRATA_REGISTER_OP("MaxPoolGrad")
    .Input("orig_input: T")
    .Input("orig_output: T")
    .Input("grad: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: string")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: string = 'NHWC'")
    .Attr("T: " STRATA_NN_REAL_TYPES " = float")
    .SetShapeFn(MaxPoolGradShape);

#undef STRATA_NN_REAL_TYPES
#undef STRATA_NN_FLOAT_TYPES

Output FirstOutput(Node* n) { return n == nullptr ? Output() : Output(n, 0); }

void AddConvAttrs(NodeBuilder& b, const std::vector<int>& strides, const std::string& padding,
                  const ops::Conv2DOptions& o) {
  b.Attr("strides", strides)
      .Attr("padding", padding)
      .Attr("data_format", o.data_format)
      .Attr("dilations", o.dilations)
      .Attr("explicit_paddings", o.explicit_paddings)
      .Attr("use_cudnn_on_gpu", o.use_cudnn_on_gpu);
}

}  // namespace

namespace ops {

Output Relu(const Scope& scope, Output features) {
  return FirstOutput(NodeBuilder(scope, "Relu").Input(features).Finalize());
}
Output Sigmoid(const Scope& scope, Output x) {
  return FirstOutput(NodeBuilder(scope, "Sigmoid").Input(x).Finalize());
}
Output Tanh(const Scope& scope, Output x) {
  return FirstOutput(NodeBuilder(scope, "Tanh").Input(x).Finalize());
}
Output ReluGrad(const Scope& scope, Output gradients, Output features) {
  return FirstOutput(NodeBuilder(scope, "ReluGrad").Input(gradients).Input(features).Finalize());
}
Output SigmoidGrad(const Scope& scope, Output y, Output dy) {
  return FirstOutput(NodeBuilder(scope, "SigmoidGrad").Input(y).Input(dy).Finalize());
}
Output TanhGrad(const Scope& scope, Output y, Output dy) {
  return FirstOutput(NodeBuilder(scope, "TanhGrad").Input(y).Input(dy).Finalize());
}

Output BiasAdd(const Scope& scope, Output value, Output bias, const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "BiasAdd")
                         .Input(value)
                         .Input(bias)
                         .Attr("data_format", data_format)
                         .Finalize());
}
Output BiasAddGrad(const Scope& scope, Output out_backprop, const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "BiasAddGrad")
                         .Input(out_backprop)
                         .Attr("data_format", data_format)
                         .Finalize());
}

Output Softmax(const Scope& scope, Output logits) {
  return FirstOutput(NodeBuilder(scope, "Softmax").Input(logits).Finalize());
}
Output LogSoftmax(const Scope& scope, Output logits) {
  return FirstOutput(NodeBuilder(scope, "LogSoftmax").Input(logits).Finalize());
}

SparseSoftmaxCrossEntropyWithLogitsOutputs SoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                                         Output labels) {
  Node* n = NodeBuilder(scope, "SoftmaxCrossEntropyWithLogits").Input(features).Input(labels).Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

SparseSoftmaxCrossEntropyWithLogitsOutputs SparseSoftmaxCrossEntropyWithLogits(
    const Scope& scope, Output features, Output labels) {
  Node* n = NodeBuilder(scope, "SparseSoftmaxCrossEntropyWithLogits")
                .Input(features)
                .Input(labels)
                .Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output Conv2D(const Scope& scope, Output input, Output filter, const std::vector<int>& strides,
              const std::string& padding, const Conv2DOptions& options) {
  NodeBuilder b(scope, "Conv2D");
  b.Input(input).Input(filter);
  AddConvAttrs(b, strides, padding, options);
  return FirstOutput(b.Finalize());
}

Output Conv2DBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                           Output out_backprop, const std::vector<int>& strides,
                           const std::string& padding, const Conv2DOptions& options) {
  NodeBuilder b(scope, "Conv2DBackpropInput");
  b.Input(input_sizes).Input(filter).Input(out_backprop);
  AddConvAttrs(b, strides, padding, options);
  return FirstOutput(b.Finalize());
}

Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                            Output out_backprop, const std::vector<int>& strides,
                            const std::string& padding, const Conv2DOptions& options) {
  NodeBuilder b(scope, "Conv2DBackpropFilter");
  b.Input(input).Input(filter_sizes).Input(out_backprop);
  AddConvAttrs(b, strides, padding, options);
  return FirstOutput(b.Finalize());
}

Output MaxPool(const Scope& scope, Output input, const std::vector<int>& ksize,
               const std::vector<int>& strides, const std::string& padding,
               const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "MaxPool")
                         .Input(input)
                         .Attr("ksize", ksize)
                         .Attr("strides", strides)
                         .Attr("padding", padding)
                         .Attr("data_format", data_format)
                         .Finalize());
}

Output AvgPool(const Scope& scope, Output value, const std::vector<int>& ksize, const std::vector<int>& strides,
               const std::string& padding, const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "AvgPool")
                         .Input(value)
                         .Attr("ksize", ksize)
                         .Attr("strides", strides)
                         .Attr("padding", padding)
                         .Attr("data_format", data_format)
                         .Finalize());
}

Output AvgPoolGrad(const Scope& scope, Output orig_input_shape, Output grad, const std::vector<int>& ksize,
                   const std::vector<int>& strides, const std::string& padding, const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "AvgPoolGrad")
                         .Input(orig_input_shape)
                         .Input(grad)
                         .Attr("ksize", ksize)
                         .Attr("strides", strides)
                         .Attr("padding", padding)
                         .Attr("data_format", data_format)
                         .Finalize());
}

Output MaxPoolGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                   const std::vector<int>& ksize, const std::vector<int>& strides,
                   const std::string& padding, const std::string& data_format) {
  return FirstOutput(NodeBuilder(scope, "MaxPoolGrad")
                         .Input(orig_input)
                         .Input(orig_output)
                         .Input(grad)
                         .Attr("ksize", ksize)
                         .Attr("strides", strides)
                         .Attr("padding", padding)
                         .Attr("data_format", data_format)
                         .Finalize());
}

}  // namespace ops
}  // namespace strata
