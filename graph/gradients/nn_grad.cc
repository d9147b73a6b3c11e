// Gradients of the nn op family (graph/ops/nn_ops.h). Most use the gradient
// ops the family provides (ReluGrad, BiasAddGrad, Conv2DBackprop*, ...);
// the gradient ops themselves have no gradient yet (no second derivatives).
#include <string>

#include "graph/gradients/grad_registry.h"
#include "graph/gradients/grad_util.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"

namespace strata {
namespace {

absl::Status ReluGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  // The output is > 0 exactly where the input is.
  out->push_back(ops::ReluGrad(s, g[0], OpOutput(op, 0)));
  return s.status();
}

absl::Status SigmoidGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::SigmoidGrad(s, OpOutput(op, 0), g[0]));
  return s.status();
}

absl::Status TanhGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::TanhGrad(s, OpOutput(op, 0), g[0]));
  return s.status();
}

absl::Status BiasAddGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  std::string data_format = "NHWC";
  auto st = GetAttr(op.attrs(), "data_format", &data_format);
  if (!st.ok()) return st;
  out->push_back(g[0]);
  out->push_back(ops::BiasAddGrad(s, g[0], data_format));
  return s.status();
}

// Softmax's Jacobian applied to g: (g - sum(g * y)) * y along the last dim.
Output SoftmaxBackward(const Scope& s, const Output& y, const Output& g) {
  Output last = ops::Const(s, int32_t{-1});
  Output dot = ops::Sum(s, ops::Mul(s, g, y), last, ops::ReductionAttrs().KeepDims(true));
  return ops::Mul(s, ops::Sub(s, g, dot), y);
}

absl::Status SoftmaxGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(SoftmaxBackward(s, OpOutput(op, 0), g[0]));
  return s.status();
}

// y = x - logsumexp(x): dx = g - softmax(x) * sum(g), softmax(x) = exp(y).
absl::Status LogSoftmaxGrad(const Scope& s, const Node& op, const OutputList& g,
                            OutputList* out) {
  Output last = ops::Const(s, int32_t{-1});
  Output total = ops::Sum(s, g[0], last, ops::ReductionAttrs().KeepDims(true));
  out->push_back(ops::Sub(s, g[0], ops::Mul(s, ops::Exp(s, OpOutput(op, 0)), total)));
  return s.status();
}

// loss[b] = logsumexp(x[b]) - x[b, label]: dloss/dx is the op's own second
// output, softmax(x) - one_hot(label), scaled per row by dL/dloss. A
// gradient flowing into that second output (softmax minus a constant) goes
// through softmax's Jacobian.
absl::Status SparseXentGrad(const Scope& s, const Node& op, const OutputList& g,
                            OutputList* out) {
  Output features = OpInput(op, 0);
  Output dx;
  if (g[0].ok()) {
    Output column = ops::Reshape(s, g[0], ops::Const<int32_t>(s, {-1, 1}));
    dx = ops::Mul(s, OpOutput(op, 1), column);
  }
  if (g[1].ok()) {
    Output extra = SoftmaxBackward(s, ops::Softmax(s, features), g[1]);
    dx = dx.ok() ? ops::AddV2(s, dx, extra) : extra;
  }
  out->push_back(dx);
  out->push_back(Output());
  return s.status();
}

// Dense labels: dx = dL/dloss (per row) * backprop, plus softmax's Jacobian
// applied to a gradient of backprop; dlabels = dL/dloss * -log_softmax(x)
// (TensorFlow's).
absl::Status DenseXentGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output features = OpInput(op, 0);
  Output dx, dlabels;
  if (g[0].ok()) {
    Output column = ops::Reshape(s, g[0], ops::Const<int32_t>(s, {-1, 1}));
    dx = ops::Mul(s, OpOutput(op, 1), column);
    dlabels = ops::Mul(s, ops::Neg(s, ops::LogSoftmax(s, features)), column);
  }
  if (g[1].ok()) {
    Output extra = SoftmaxBackward(s, ops::Softmax(s, features), g[1]);
    dx = dx.ok() ? ops::AddV2(s, dx, extra) : extra;
    // backprop = softmax - labels: -g[1] reaches the labels.
    dlabels = dlabels.ok() ? ops::Sub(s, dlabels, g[1]) : ops::Neg(s, g[1]);
  }
  out->push_back(dx);
  out->push_back(dlabels);
  return s.status();
}

// Copies the forward node's attrs (strides, padding, formats, ...) onto a
// gradient op that declares the same ones; T follows from the inputs.
void CopyAttrs(const Node& from, NodeBuilder& to, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto it = from.attrs().find(name);
    if (it != from.attrs().end()) to.Attr(name, it->second);
  }
}

Output First(Node* n) { return n == nullptr ? Output() : Output(n, 0); }

absl::Status Conv2DGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output input = OpInput(op, 0), filter = OpInput(op, 1);
  const auto attrs = {"strides",   "padding",          "explicit_paddings",
                      "dilations", "use_cudnn_on_gpu", "data_format"};
  NodeBuilder dx(s, "Conv2DBackpropInput");
  dx.Input(grad::ShapeOf(s, input)).Input(filter).Input(g[0]);
  CopyAttrs(op, dx, attrs);
  out->push_back(First(dx.Finalize()));
  NodeBuilder dw(s, "Conv2DBackpropFilter");
  dw.Input(input).Input(grad::ShapeOf(s, filter)).Input(g[0]);
  CopyAttrs(op, dw, attrs);
  out->push_back(First(dw.Finalize()));
  return s.status();
}

absl::Status MaxPoolGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  NodeBuilder dx(s, "MaxPoolGrad");
  dx.Input(OpInput(op, 0)).Input(OpOutput(op, 0)).Input(g[0]);
  CopyAttrs(op, dx, {"ksize", "strides", "padding", "explicit_paddings", "data_format"});
  out->push_back(First(dx.Finalize()));
  return s.status();
}

// The mean's gradient spreads dy evenly over each window (AvgPoolGrad).
absl::Status AvgPoolGradient(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  NodeBuilder dx(s, "AvgPoolGrad");
  dx.Input(grad::ShapeOf(s, OpInput(op, 0))).Input(g[0]);
  CopyAttrs(op, dx, {"ksize", "strides", "padding", "data_format"});
  out->push_back(First(dx.Finalize()));
  return s.status();
}

// AvgPoolGrad is AvgPool's adjoint (linear in grad): its own gradient is AvgPool.
absl::Status AvgPoolGradGradient(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  NodeBuilder y(s, "AvgPool");
  y.Input(g[0]);
  CopyAttrs(op, y, {"ksize", "strides", "padding", "data_format"});
  out->push_back(Output());
  out->push_back(First(y.Finalize()));
  return s.status();
}

// The gradients of x, scale and offset through y (the statistics' outputs
// carry none), from FusedBatchNormGradV3 with the statistics y used.
absl::Status FusedBatchNormGradient(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  if (!g[0].ok()) {
    for (int i = 0; i < 5; ++i) out->push_back(Output());
    return absl::OkStatus();
  }
  NodeBuilder b(s, "FusedBatchNormGradV3");
  b.Input(g[0]).Input(OpInput(op, 0)).Input(OpInput(op, 1)).Input(OpOutput(op, 3)).Input(OpOutput(op, 4)).Input(
      OpOutput(op, 5));
  CopyAttrs(op, b, {"epsilon", "data_format", "is_training"});
  Node* n = b.Finalize();
  if (n == nullptr) return s.status();
  out->push_back(Output(n, 0));
  out->push_back(Output(n, 1));
  out->push_back(Output(n, 2));
  out->push_back(Output());
  out->push_back(Output());
  return s.status();
}

STRATA_REGISTER_GRADIENT("Relu", ReluGrad);
STRATA_REGISTER_GRADIENT("Sigmoid", SigmoidGrad);
STRATA_REGISTER_GRADIENT("Tanh", TanhGrad);
STRATA_REGISTER_GRADIENT("BiasAdd", BiasAddGrad);
STRATA_REGISTER_GRADIENT("Softmax", SoftmaxGrad);
STRATA_REGISTER_GRADIENT("LogSoftmax", LogSoftmaxGrad);
STRATA_REGISTER_GRADIENT("SparseSoftmaxCrossEntropyWithLogits", SparseXentGrad);
STRATA_REGISTER_GRADIENT("SoftmaxCrossEntropyWithLogits", DenseXentGrad);
STRATA_REGISTER_GRADIENT("Conv2D", Conv2DGrad);
STRATA_REGISTER_GRADIENT("MaxPool", MaxPoolGrad);
STRATA_REGISTER_GRADIENT("AvgPool", AvgPoolGradient);
STRATA_REGISTER_GRADIENT("FusedBatchNormV3", FusedBatchNormGradient);
STRATA_REGISTER_GRADIENT("AvgPoolGrad", AvgPoolGradGradient);

}  // namespace
}  // namespace strata
