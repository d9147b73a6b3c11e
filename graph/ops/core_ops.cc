#include "graph/ops/core_ops.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

// Const's output shape is its value's; the value's dtype must be `dtype`.
// Only the proto's shape is read here: parsing the contents of a large
// constant is the kernel's job, once.
absl::Status ConstShape(InferenceContext& c) {
  auto it = c.node_def().attr().find("value");
  if (it == c.node_def().attr().end() || it->second.value_case() != AttrValue::kTensor) {
    return c.Error("attr 'value' is missing or not a tensor");
  }
  const ::tensorflow::TensorProto& value = it->second.tensor();
  DataType dtype;
  STRATA_RETURN_IF_ERROR(c.GetAttr("dtype", &dtype));
  if (value.dtype() != dtype) {
    return c.Error(absl::StrCat("attr 'dtype' is ", DataTypeString(dtype),
                                " but attr 'value' holds ", DataTypeString(value.dtype())));
  }
  auto shape = TensorShape::FromProto(value.tensor_shape());
  if (!shape.ok()) return c.Annotate(AnnotateStatus(shape.status(), "attr 'value': "));
  c.set_output(0, *shape);
  return absl::OkStatus();
}

absl::Status PlaceholderShape(InferenceContext& c) {
  PartialTensorShape shape;
  STRATA_RETURN_IF_ERROR(c.GetAttr("shape", &shape));
  c.set_output(0, shape);
  return absl::OkStatus();
}

absl::Status NoOutputs(InferenceContext&) { return absl::OkStatus(); }

// Both outputs are the data's shape; the predicate is a scalar.
absl::Status SwitchShape(InferenceContext& c) {
  PartialTensorShape pred;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 0, &pred));
  c.set_output(0, c.input(0));
  c.set_output(1, c.input(0));
  return absl::OkStatus();
}

// The inputs' common shape where they agree (the dims that differ unknown:
// either may be the live one), and a scalar index.
absl::Status MergeShape(InferenceContext& c) {
  PartialTensorShape out = c.input(0);
  for (int i = 1; i < c.num_inputs() && !out.unknown_rank(); ++i) {
    const PartialTensorShape& in = c.input(i);
    if (in.unknown_rank() || in.dims() != out.dims()) {
      out = PartialTensorShape::UnknownRank();
      break;
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < out.dims(); ++d) dims.push_back(out.dim_size(d) == in.dim_size(d) ? out.dim_size(d) : -1);
    out = PartialTensorShape(dims);
  }
  c.set_output(0, out);
  c.set_output(1, PartialTensorShape({}));
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("Const")
    .Output("output: dtype")
    .Attr("value: tensor")
    .Attr("dtype: type")
    .SetShapeFn(ConstShape);

STRATA_REGISTER_OP("Placeholder")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape = <unknown>")
    .SetShapeFn(PlaceholderShape);

STRATA_REGISTER_OP("Identity")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(UnchangedShape);

// The identity in the forward pass; backpropagation stops at it (no
// gradient flows to its input).
STRATA_REGISTER_OP("StopGradient")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(UnchangedShape);

STRATA_REGISTER_OP("NoOp").SetShapeFn(NoOutputs);

// Forwards `data` to output_true when `pred` is true, else to output_false;
// the other output is dead for the step (runtime/executor.h).
STRATA_REGISTER_OP("Switch")
    .Input("data: T")
    .Input("pred: bool")
    .Output("output_false: T")
    .Output("output_true: T")
    .Attr("T: type")
    .SetShapeFn(SwitchShape);

// Forwards its live input and that input's index; dead when every input is.
STRATA_REGISTER_OP("Merge")
    .Input("inputs: N * T")
    .Output("output: T")
    .Output("value_index: int32")
    .Attr("T: type")
    .Attr("N: int >= 1")
    .SetShapeFn(MergeShape);

STRATA_REGISTER_OP("_Arg")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

STRATA_REGISTER_OP("_Retval")
    .Input("input: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

// A step partition's inputs and outputs in the device's own memory (as
// TensorFlow's _DeviceArg/_DeviceRetval): a recorded GPU partition
// (runtime/step_graph.h) takes its _Recv values and gives its _Send values
// through these, from and to buffers the recording owns.
STRATA_REGISTER_OP("_DeviceArg")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

STRATA_REGISTER_OP("_DeviceRetval")
    .Input("input: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

STRATA_REGISTER_OP("_Send")
    .Input("tensor: T")
    .Attr("T: type")
    .Attr("tensor_name: string")
    .Attr("send_device: string")
    .Attr("send_device_incarnation: int")
    .Attr("recv_device: string")
    .Attr("client_terminated: bool = false")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

STRATA_REGISTER_OP("_Recv")
    .Output("tensor: tensor_type")
    .Attr("tensor_type: type")
    .Attr("tensor_name: string")
    .Attr("send_device: string")
    .Attr("send_device_incarnation: int")
    .Attr("recv_device: string")
    .Attr("client_terminated: bool = false")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

namespace ops {

Output Const(const Scope& s, const Tensor& value) {
  if (!value.IsInitialized()) {
    s.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "building node '", s.GetUniqueNameForOp("Const"), "': Const of an uninitialized tensor")));
    return Output();
  }
  Node* n = NodeBuilder(s, "Const")
                .Attr("value", MakeAttr(value))
                .Attr("dtype", MakeAttr(value.dtype()))
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Output Placeholder(const Scope& s, DataType dtype, const PartialTensorShape& shape) {
  Node* n = NodeBuilder(s, "Placeholder")
                .Attr("dtype", MakeAttr(dtype))
                .Attr("shape", MakeAttr(shape))
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Output Identity(const Scope& s, Output input) {
  Node* n = NodeBuilder(s, "Identity").Input(input).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Output StopGradient(const Scope& s, Output input) {
  Node* n = NodeBuilder(s, "StopGradient").Input(input).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Node* NoOp(const Scope& s) { return NodeBuilder(s, "NoOp").Finalize(); }

SwitchOutputs Switch(const Scope& s, Output data, Output pred) {
  Node* n = NodeBuilder(s, "Switch").Input(data).Input(pred).Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

MergeOutputs Merge(const Scope& s, const OutputList& inputs) {
  Node* n = NodeBuilder(s, "Merge").Input(inputs).Finalize();
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output Arg(const Scope& s, DataType dtype, int index) {
  Node* n = NodeBuilder(s, "_Arg", "_arg")
                .Attr("T", MakeAttr(dtype))
                .Attr("index", MakeAttr(index))
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Node* Retval(const Scope& s, Output input, int index) {
  return NodeBuilder(s, "_Retval", "_retval").Input(input).Attr("index", MakeAttr(index)).Finalize();
}

namespace {
void SetSendRecvAttrs(NodeBuilder& b, const SendRecvAttrs& a) {
  b.Attr("tensor_name", MakeAttr(a.tensor_name))
      .Attr("send_device", MakeAttr(a.send_device))
      .Attr("send_device_incarnation", MakeAttr(a.send_device_incarnation))
      .Attr("recv_device", MakeAttr(a.recv_device))
      .Attr("client_terminated", MakeAttr(a.client_terminated));
}
}  // namespace

Node* Send(const Scope& s, Output tensor, const SendRecvAttrs& attrs) {
  NodeBuilder b(s, "_Send", "_send");
  b.Input(tensor);
  SetSendRecvAttrs(b, attrs);
  return b.Finalize();
}

Output Recv(const Scope& s, DataType dtype, const SendRecvAttrs& attrs) {
  NodeBuilder b(s, "_Recv", "_recv");
  b.Attr("tensor_type", MakeAttr(dtype));
  SetSendRecvAttrs(b, attrs);
  Node* n = b.Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

}  // namespace ops
}  // namespace strata
