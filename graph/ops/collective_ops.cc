#include "graph/ops/collective_ops.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "graph/ops/core_ops.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

// The op registry has no allowed-values list for string attrs, so the shape
// functions check merge_op/final_op: a bad value fails when the node is built
// or imported, not first at run time.
absl::Status CheckStringAttr(InferenceContext& c, const std::string& attr,
                             std::initializer_list<const char*> allowed) {
  std::string v;
  STRATA_RETURN_IF_ERROR(c.GetAttr(attr, &v));
  for (const char* a : allowed) {
    if (v == a) return absl::OkStatus();
  }
  std::string list;
  for (const char* a : allowed) absl::StrAppend(&list, list.empty() ? "" : ", ", a);
  return c.Error(absl::StrCat("attr '", attr, "' is '", v, "', expected one of ", list));
}

// group_size, group_key, instance_key: int32 scalars at inputs first..first+2.
absl::Status CheckKeyInputs(InferenceContext& c, int first) {
  PartialTensorShape unused;
  for (int i = first; i < first + 3; ++i) STRATA_RETURN_IF_ERROR(c.WithRank(i, 0, &unused));
  return absl::OkStatus();
}

absl::Status ReduceShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(CheckStringAttr(c, "merge_op", {"Min", "Max", "Mul", "Add"}));
  STRATA_RETURN_IF_ERROR(CheckStringAttr(c, "final_op", {"Id", "Div"}));
  STRATA_RETURN_IF_ERROR(CheckKeyInputs(c, 1));
  c.set_output(0, c.input(0));
  return absl::OkStatus();
}

absl::Status BcastSendShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(CheckKeyInputs(c, 1));
  c.set_output(0, c.input(0));
  return absl::OkStatus();
}

// Dim 0 grows group_size times; unknown when either is unknown.
absl::Status GatherShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(CheckKeyInputs(c, 1));
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 1, &in));
  if (in.unknown_rank()) {
    c.set_output(0, in);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(in.dim_sizes().begin(), in.dim_sizes().end());
  const Tensor* group_size = c.input_tensor(1);
  if (group_size != nullptr && group_size->dtype() == DT_INT32 && group_size->NumElements() == 1 &&
      dims[0] >= 0) {
    dims[0] *= group_size->data<int32_t>()[0];
  } else {
    dims[0] = -1;
  }
  c.set_output(0, PartialTensorShape(dims));
  return absl::OkStatus();
}

// Dim 0 shrinks group_size times (it must divide); unknown when either is
// unknown.
absl::Status ReduceScatterShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(CheckStringAttr(c, "merge_op", {"Min", "Max", "Mul", "Add"}));
  STRATA_RETURN_IF_ERROR(CheckStringAttr(c, "final_op", {"Id", "Div"}));
  STRATA_RETURN_IF_ERROR(CheckKeyInputs(c, 1));
  PartialTensorShape in;
  STRATA_RETURN_IF_ERROR(c.WithRankAtLeast(0, 1, &in));
  if (in.unknown_rank()) {
    c.set_output(0, in);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(in.dim_sizes().begin(), in.dim_sizes().end());
  const Tensor* group_size = c.input_tensor(1);
  if (group_size != nullptr && group_size->dtype() == DT_INT32 && group_size->NumElements() == 1 &&
      dims[0] >= 0) {
    const int32_t g = group_size->data<int32_t>()[0];
    if (g < 1 || dims[0] % g != 0) {
      return c.Error(absl::StrCat("reduce-scatter: dimension 0 of the input (", dims[0],
                                  ") does not split into group_size ", g, " equal blocks"));
    }
    dims[0] /= g;
  } else {
    dims[0] = -1;
  }
  c.set_output(0, PartialTensorShape(dims));
  return absl::OkStatus();
}

// The output shape is the `shape` input's value when it is a constant.
absl::Status BcastRecvShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(CheckKeyInputs(c, 0));
  PartialTensorShape shape_shape;
  STRATA_RETURN_IF_ERROR(c.WithRank(3, 1, &shape_shape));
  const Tensor* shape = c.input_tensor(3);
  if (shape == nullptr) {
    c.set_output(0, shape_shape.unknown_rank() || shape_shape.dim_size(0) < 0
                        ? PartialTensorShape::UnknownRank()
                        : PartialTensorShape(std::vector<int64_t>(shape_shape.dim_size(0), -1)));
    return absl::OkStatus();
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < shape->NumElements(); ++i) {
    const int64_t d = shape->dtype() == DT_INT32 ? shape->data<int32_t>()[i]
                                                 : shape->data<int64_t>()[i];
    if (d < 0) return c.Error(absl::StrCat("input 'shape' has a negative dimension ", d));
    dims.push_back(d);
  }
  c.set_output(0, PartialTensorShape(dims));
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("CollectiveReduceV2")
    .Input("input: T")
    .Input("group_size: int32")
    .Input("group_key: int32")
    .Input("instance_key: int32")
    .Input("ordering_token: Nordering_token * resource")
    .Output("data: T")
    .Attr("T: {bfloat16, float, half, double, int32, int64}")
    .Attr("merge_op: string")
    .Attr("final_op: string")
    .Attr("communication_hint: string = 'auto'")
    .Attr("timeout_seconds: float = 0")
    .Attr("is_stateless: bool = false")
    .Attr("Nordering_token: int >= 0 = 0")
    .Attr("max_subdivs_per_device: int = -1")
    .SetIsStateful()
    .SetShapeFn(ReduceShape);

STRATA_REGISTER_OP("CollectiveGatherV2")
    .Input("input: T")
    .Input("group_size: int32")
    .Input("group_key: int32")
    .Input("instance_key: int32")
    .Input("ordering_token: Nordering_token * resource")
    .Output("data: T")
    .Attr("T: {float, half, double, int32, int64}")
    .Attr("communication_hint: string = 'auto'")
    .Attr("timeout_seconds: float = 0")
    .Attr("is_stateless: bool = false")
    .Attr("Nordering_token: int >= 0 = 0")
    .SetIsStateful()
    .SetShapeFn(GatherShape);

STRATA_REGISTER_OP("CollectiveReduceScatterV2")
    .Input("input: T")
    .Input("group_size: int32")
    .Input("group_key: int32")
    .Input("instance_key: int32")
    .Input("ordering_token: Nordering_token * resource")
    .Output("data: T")
    .Attr("T: {bfloat16, float, half, double, int32, int64}")
    .Attr("merge_op: string")
    .Attr("final_op: string")
    .Attr("communication_hint: string = 'auto'")
    .Attr("timeout_seconds: float = 0")
    .Attr("is_stateless: bool = false")
    .Attr("Nordering_token: int >= 0 = 0")
    .Attr("max_subdivs_per_device: int = -1")
    .SetIsStateful()
    .SetShapeFn(ReduceScatterShape);

STRATA_REGISTER_OP("CollectiveBcastSendV2")
    .Input("input: T")
    .Input("group_size: int32")
    .Input("group_key: int32")
    .Input("instance_key: int32")
    .Output("data: T")
    .Attr("T: {bool, float, half, double, int32, int64}")
    .Attr("communication_hint: string = 'auto'")
    .Attr("timeout_seconds: float = 0")
    .SetIsStateful()
    .SetShapeFn(BcastSendShape);

STRATA_REGISTER_OP("CollectiveBcastRecvV2")
    .Input("group_size: int32")
    .Input("group_key: int32")
    .Input("instance_key: int32")
    .Input("shape: Tshape")
    .Output("data: T")
    .Attr("T: {bool, float, half, double, int32, int64}")
    .Attr("Tshape: {int32, int64} = int32")
    .Attr("communication_hint: string = 'auto'")
    .Attr("timeout_seconds: float = 0")
    .SetIsStateful()
    .SetShapeFn(BcastRecvShape);

namespace ops {

namespace {

void AddCommonAttrs(NodeBuilder& b, const CollectiveAttrs& a) {
  b.Attr("communication_hint", MakeAttr(a.communication_hint_))
      .Attr("timeout_seconds", MakeAttr(a.timeout_seconds_));
}

// The key inputs are Const nodes with default names: the caller's op name
// (WithOpName) belongs to the collective node itself.
Output KeyConst(const Scope& s, int v) { return Const(s.NewSubScope(""), int32_t{v}); }

Output Finish(NodeBuilder& b) {
  Node* n = b.Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

}  // namespace

Output CollectiveReduce(const Scope& s, Output input, int group_size, int group_key,
                        int instance_key, const CollectiveAttrs& attrs) {
  NodeBuilder b(s, "CollectiveReduceV2");
  b.Input(input)
      .Input(KeyConst(s, group_size))
      .Input(KeyConst(s, group_key))
      .Input(KeyConst(s, instance_key))
      .Input(OutputList{})
      .Attr("merge_op", MakeAttr(attrs.merge_op_))
      .Attr("final_op", MakeAttr(attrs.final_op_));
  if (attrs.backward_instance_key_ >= 0) {
    b.Attr(kBackwardInstanceKeyAttr, MakeAttr(int64_t{attrs.backward_instance_key_}));
  }
  AddCommonAttrs(b, attrs);
  return Finish(b);
}

Output CollectiveReduceScatter(const Scope& s, Output input, int group_size, int group_key,
                               int instance_key, const CollectiveAttrs& attrs) {
  NodeBuilder b(s, "CollectiveReduceScatterV2");
  b.Input(input)
      .Input(KeyConst(s, group_size))
      .Input(KeyConst(s, group_key))
      .Input(KeyConst(s, instance_key))
      .Input(OutputList{})
      .Attr("merge_op", MakeAttr(attrs.merge_op_))
      .Attr("final_op", MakeAttr(attrs.final_op_));
  AddCommonAttrs(b, attrs);
  return Finish(b);
}

Output CollectiveGather(const Scope& s, Output input, int group_size, int group_key,
                        int instance_key, const CollectiveAttrs& attrs) {
  NodeBuilder b(s, "CollectiveGatherV2");
  b.Input(input)
      .Input(KeyConst(s, group_size))
      .Input(KeyConst(s, group_key))
      .Input(KeyConst(s, instance_key))
      .Input(OutputList{});
  AddCommonAttrs(b, attrs);
  return Finish(b);
}

Output CollectiveBcastSend(const Scope& s, Output input, int group_size, int group_key,
                           int instance_key, const CollectiveAttrs& attrs) {
  NodeBuilder b(s, "CollectiveBcastSendV2");
  b.Input(input)
      .Input(KeyConst(s, group_size))
      .Input(KeyConst(s, group_key))
      .Input(KeyConst(s, instance_key));
  AddCommonAttrs(b, attrs);
  return Finish(b);
}

Output CollectiveBcastRecv(const Scope& s, DataType dtype, const TensorShape& shape,
                           int group_size, int group_key, int instance_key,
                           const CollectiveAttrs& attrs) {
  std::vector<int32_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(static_cast<int32_t>(shape.dim_size(i)));
  NodeBuilder b(s, "CollectiveBcastRecvV2");
  b.Input(KeyConst(s, group_size))
      .Input(KeyConst(s, group_key))
      .Input(KeyConst(s, instance_key))
      .Input(Const<int32_t>(s.NewSubScope(""), dims, TensorShape{static_cast<int64_t>(dims.size())}))
      .Attr("T", MakeAttr(dtype));
  AddCommonAttrs(b, attrs);
  return Finish(b);
}

}  // namespace ops
}  // namespace strata
