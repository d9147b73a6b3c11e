#include "graph/ops/batch_norm.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {
namespace {

// The channel dim of a rank-4/5 shape in `format`, or an error.
absl::StatusOr<int> ChannelDim(const std::string& format, int rank) {
  if (format == "NHWC" || format == "NDHWC") return rank - 1;
  if (format == "NCHW" || format == "NCDHW") return 1;
  return absl::InvalidArgumentError(
      absl::StrCat("attr 'data_format' is '", format, "', expected NHWC, NCHW, NDHWC or NCDHW"));
}

// Merges the channel count with a [C] input `i` (an empty [0] one is
// allowed for mean/variance when `may_be_empty`).
absl::Status MergeChannels(InferenceContext& c, int i, const char* what, bool may_be_empty, int64_t* channels) {
  PartialTensorShape v;
  STRATA_RETURN_IF_ERROR(c.WithRank(i, 1, &v));
  if (v.unknown_rank()) return absl::OkStatus();
  const int64_t d = v.dim_size(0);
  if (may_be_empty && d == 0) return absl::OkStatus();
  return c.MergeDim(*channels, d, channels, absl::StrCat(what, " vs the channels of x"));
}

absl::Status FusedBatchNormShape(InferenceContext& c) {
  std::string format;
  bool is_training = true;
  float factor = 1;
  STRATA_RETURN_IF_ERROR(c.GetAttr("data_format", &format));
  STRATA_RETURN_IF_ERROR(c.GetAttr("is_training", &is_training));
  STRATA_RETURN_IF_ERROR(c.GetAttr("exponential_avg_factor", &factor));
  const PartialTensorShape& x = c.input(0);
  int64_t channels = -1;
  if (!x.unknown_rank()) {
    const int want = format.size() == 5 ? 5 : 4;
    if (x.dims() != want) {
      return c.Error(absl::StrCat("x must be rank ", want, " for data_format ", format, ", got ", x.DebugString()));
    }
    absl::StatusOr<int> cd = ChannelDim(format, x.dims());
    if (!cd.ok()) return c.Annotate(cd.status());
    channels = x.dim_size(*cd);
  }
  const bool empty_ok = is_training && factor == 1.0f;
  STRATA_RETURN_IF_ERROR(MergeChannels(c, 1, "scale", false, &channels));
  STRATA_RETURN_IF_ERROR(MergeChannels(c, 2, "offset", false, &channels));
  STRATA_RETURN_IF_ERROR(MergeChannels(c, 3, "mean", empty_ok, &channels));
  STRATA_RETURN_IF_ERROR(MergeChannels(c, 4, "variance", empty_ok, &channels));
  c.set_output(0, x);
  for (int i = 1; i <= 4; ++i) c.set_output(i, PartialTensorShape({channels}));
  c.set_output(5, PartialTensorShape({0}));
  return absl::OkStatus();
}

absl::Status FusedBatchNormGradShape(InferenceContext& c) {
  auto merged = c.input(0).Merge(c.input(1));
  if (!merged.ok()) {
    return c.Error(absl::StrCat("y_backprop ", c.input(0).DebugString(), " and x ", c.input(1).DebugString(),
                                " must have one shape"));
  }
  PartialTensorShape scale;
  STRATA_RETURN_IF_ERROR(c.WithRank(2, 1, &scale));
  const int64_t channels = scale.unknown_rank() ? -1 : scale.dim_size(0);
  c.set_output(0, *merged);
  c.set_output(1, PartialTensorShape({channels}));
  c.set_output(2, PartialTensorShape({channels}));
  c.set_output(3, PartialTensorShape({0}));
  c.set_output(4, PartialTensorShape({0}));
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("FusedBatchNormV3")
    .Input("x: T")
    .Input("scale: U")
    .Input("offset: U")
    .Input("mean: U")
    .Input("variance: U")
    .Output("y: T")
    .Output("batch_mean: U")
    .Output("batch_variance: U")
    .Output("reserve_space_1: U")
    .Output("reserve_space_2: U")
    .Output("reserve_space_3: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .Attr("epsilon: float = 0.0001")
    .Attr("exponential_avg_factor: float = 1.0")
    .Attr("data_format: string = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormShape);

STRATA_REGISTER_OP("FusedBatchNormGradV3")
    .Input("y_backprop: T")
    .Input("x: T")
    .Input("scale: U")  // TensorFlow: float; U here so that double works too
    .Input("reserve_space_1: U")
    .Input("reserve_space_2: U")
    .Input("reserve_space_3: U")
    .Output("x_backprop: T")
    .Output("scale_backprop: U")
    .Output("offset_backprop: U")
    .Output("reserve_space_4: U")
    .Output("reserve_space_5: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .Attr("epsilon: float = 0.0001")
    .Attr("data_format: string = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormGradShape);

namespace ops {

FusedBatchNormV3Outputs FusedBatchNormV3(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                                         Output variance, const FusedBatchNormAttrs& attrs) {
  Node* n = NodeBuilder(scope, "FusedBatchNormV3")
                .Input(x)
                .Input(scale)
                .Input(offset)
                .Input(mean)
                .Input(variance)
                .Attr("epsilon", attrs.epsilon)
                .Attr("exponential_avg_factor", attrs.exponential_avg_factor)
                .Attr("data_format", attrs.data_format)
                .Attr("is_training", attrs.is_training)
                .Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3), Output(n, 4), Output(n, 5)};
}

}  // namespace ops
}  // namespace strata
