// The neural-network op family: activations (Relu, Sigmoid, Tanh), BiasAdd,
// Softmax / LogSoftmax, SparseSoftmaxCrossEntropyWithLogits, Conv2D, MaxPool, AvgPool,
// and the gradient ops training needs (ReluGrad, SigmoidGrad, TanhGrad,
// BiasAddGrad, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPoolGrad, AvgPoolGrad).
// Names, inputs, outputs and attrs (with defaults) are TensorFlow's, so
// GraphDefs written by TensorFlow import; shape functions name the node and
// the shapes on error.
//
//   Scope s = Scope::NewRootScope();
//   Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 28, 28, 1}));
//   Output h = ops::Relu(s, ops::Conv2D(s, x, w, {1, 1, 1, 1}, "SAME"));   // [?,28,28,32]
//   Output p = ops::MaxPool(s, h, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");   // [?,14,14,32]
//   ops::SparseSoftmaxCrossEntropyWithLogitsOutputs xent =
//       ops::SparseSoftmaxCrossEntropyWithLogits(s, logits, labels);       // xent.loss, xent.backprop
//
// The window arithmetic (output size and padding for SAME / VALID) is public
// so CPU and GPU kernels compute exactly what the shape functions promise.
//
// Thread-safety: builder functions follow Scope's rules (one thread per scope
// tree); the window helpers are pure functions. Ownership: returned Outputs
// point at nodes owned by the scope's graph.
#ifndef STRATA_GRAPH_OPS_NN_OPS_H_
#define STRATA_GRAPH_OPS_NN_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/attr_value.h"
#include "graph/scope.h"

namespace strata {

enum class Padding { kValid, kSame, kExplicit };

// "SAME", "VALID" or "EXPLICIT"; InvalidArgument naming the value otherwise.
absl::StatusOr<Padding> ParsePadding(const std::string& s);

// Output size and padding of one spatial dimension under TensorFlow's rules:
// VALID: out = ceil((in - eff + 1) / stride), no padding; SAME: out =
// ceil(in / stride), padding split with the extra element after. `eff` is the
// dilated window, (window - 1) * dilation + 1. InvalidArgument if a stride,
// window or dilation is < 1, or if a VALID window is larger than the input.
// EXPLICIT padding is not handled here (InvalidArgument).
struct WindowedOutput {
  int64_t size = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;
};
absl::StatusOr<WindowedOutput> ComputeWindowedOutput(int64_t input, int64_t window,
                                                     int64_t dilation, int64_t stride,
                                                     Padding padding);

// The attrs Conv2D and its two gradient ops share, checked: four strides and
// four dilations with batch and depth entries 1, padding SAME or VALID (or
// EXPLICIT, which is parsed but rejected by ComputeConv2DGeometry), data
// format NHWC or NCHW. Errors name the attr.
struct Conv2DAttrsParsed {
  int64_t stride_rows = 1, stride_cols = 1;
  int64_t dilation_rows = 1, dilation_cols = 1;
  Padding padding = Padding::kValid;
  bool nchw = false;
};
absl::StatusOr<Conv2DAttrsParsed> ParseConv2DAttrs(const AttrMap& attrs);

// Every size one 2-D convolution needs, in NHWC terms. Filters are
// [filter_rows, filter_cols, in_depth, out_depth].
struct Conv2DGeometry {
  int64_t batch = 0, in_rows = 0, in_cols = 0, in_depth = 0;
  int64_t filter_rows = 0, filter_cols = 0, out_depth = 0;
  int64_t stride_rows = 1, stride_cols = 1, dilation_rows = 1, dilation_cols = 1;
  int64_t out_rows = 0, out_cols = 0;
  int64_t pad_top = 0, pad_left = 0;
};
// `input` is [batch, rows, cols, depth] (NHWC) and `filter` as above; fails
// (InvalidArgument naming both shapes) if the depths differ, a dim is
// negative, padding is EXPLICIT or a VALID window is larger than the input.
absl::StatusOr<Conv2DGeometry> ComputeConv2DGeometry(const Conv2DAttrsParsed& attrs,
                                                     absl::Span<const int64_t> input_nhwc,
                                                     absl::Span<const int64_t> filter);

// MaxPool's attrs, checked: ksize and strides of four entries >= 1 with batch
// and depth entries 1, padding SAME or VALID, data format NHWC or NCHW.
struct PoolAttrsParsed {
  int64_t window_rows = 1, window_cols = 1;
  int64_t stride_rows = 1, stride_cols = 1;
  Padding padding = Padding::kValid;
  bool nchw = false;
};
absl::StatusOr<PoolAttrsParsed> ParsePoolAttrs(const AttrMap& attrs);

namespace ops {

Output Relu(const Scope& scope, Output features);
Output Sigmoid(const Scope& scope, Output x);
Output Tanh(const Scope& scope, Output x);
// `gradients` * (features > 0).
Output ReluGrad(const Scope& scope, Output gradients, Output features);
// dy * y * (1 - y), where y = Sigmoid(x).
Output SigmoidGrad(const Scope& scope, Output y, Output dy);
// dy * (1 - y * y), where y = Tanh(x).
Output TanhGrad(const Scope& scope, Output y, Output dy);

// `value` + `bias` along the channel dim (last for NHWC, 1 for NCHW).
Output BiasAdd(const Scope& scope, Output value, Output bias,
               const std::string& data_format = "NHWC");
// Sums `out_backprop` over every dim but the channel dim.
Output BiasAddGrad(const Scope& scope, Output out_backprop,
                   const std::string& data_format = "NHWC");

// Over the last dim.
Output Softmax(const Scope& scope, Output logits);
Output LogSoftmax(const Scope& scope, Output logits);

struct SparseSoftmaxCrossEntropyWithLogitsOutputs {
  Output loss;      // [batch]
  Output backprop;  // [batch, classes]: softmax(features) - one_hot(labels)
};
// `features` [batch, classes] float/double, `labels` [batch] int32/int64.
SparseSoftmaxCrossEntropyWithLogitsOutputs SparseSoftmaxCrossEntropyWithLogits(
    const Scope& scope, Output features, Output labels);

// Dense labels (a distribution per row, Keras's categorical crossentropy
// from logits): loss[b] = sum_c labels[b, c] * (logsumexp(features[b]) -
// features[b, c]); backprop = softmax(features) - labels, which is
// dloss/dfeatures when each row of labels sums to 1 (a distribution, as
// TensorFlow requires). `features` and `labels`: [batch, classes] of one
// float type.
SparseSoftmaxCrossEntropyWithLogitsOutputs SoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                                         Output labels);

// TensorFlow's optional Conv2D attrs with TensorFlow's defaults.
struct Conv2DOptions {
  std::string data_format = "NHWC";
  std::vector<int> dilations = {1, 1, 1, 1};
  std::vector<int> explicit_paddings;
  bool use_cudnn_on_gpu = true;
};

// `input` [batch, rows, cols, in_depth], `filter` [rows, cols, in_depth,
// out_depth]; `padding` "SAME" or "VALID".
Output Conv2D(const Scope& scope, Output input, Output filter, const std::vector<int>& strides,
              const std::string& padding, const Conv2DOptions& options = {});
// The gradient of Conv2D's output with respect to its input; `input_sizes`
// is an int32 vector holding the input's shape.
Output Conv2DBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                           Output out_backprop, const std::vector<int>& strides,
                           const std::string& padding, const Conv2DOptions& options = {});
// The gradient with respect to the filter; `filter_sizes` is an int32 vector
// holding the filter's shape.
Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                            Output out_backprop, const std::vector<int>& strides,
                            const std::string& padding, const Conv2DOptions& options = {});

Output MaxPool(const Scope& scope, Output input, const std::vector<int>& ksize,
               const std::vector<int>& strides, const std::string& padding,
               const std::string& data_format = "NHWC");
// The mean of each window's in-range taps (SAME padding divides by the
// taps inside the input, as TensorFlow does). half, bfloat16, float, double.
Output AvgPool(const Scope& scope, Output value, const std::vector<int>& ksize, const std::vector<int>& strides,
               const std::string& padding, const std::string& data_format = "NHWC");
// Spreads each `grad` entry evenly over its window's in-range taps, into a
// tensor of the int32 shape `orig_input_shape`.
Output AvgPoolGrad(const Scope& scope, Output orig_input_shape, Output grad, const std::vector<int>& ksize,
                   const std::vector<int>& strides, const std::string& padding,
                   const std::string& data_format = "NHWC");
// Routes each `grad` entry to the position of its window's maximum in
// `orig_input` (the first one, in row-major window order, on ties).
Output MaxPoolGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                   const std::vector<int>& ksize, const std::vector<int>& strides,
                   const std::string& padding, const std::string& data_format = "NHWC");

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_NN_OPS_H_
