#include "graph/ops/state_ops.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

absl::Status NoOutputs(InferenceContext&) { return absl::OkStatus(); }

// The handle input must be a scalar; the value's shape is checked by the
// kernel against the variable (the handle's shape says nothing about it).
absl::Status HandleIsScalar(InferenceContext& c) {
  PartialTensorShape unused;
  return c.WithRank(0, 0, &unused);
}

absl::Status HandleScalarNoOutputs(InferenceContext& c) { return HandleIsScalar(c); }

absl::Status ReadVariableShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(HandleIsScalar(c));
  c.set_output(0, PartialTensorShape::UnknownRank());
  return absl::OkStatus();
}

// The rows' shape is the variable's, which the handle does not carry: the
// output's shape is unknown here (the builder sets it from the VarHandleOp).
absl::Status ResourceGatherShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(HandleIsScalar(c));
  int64_t batch_dims = 0;
  STRATA_RETURN_IF_ERROR(c.GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) return c.Error(absl::StrCat("batch_dims ", batch_dims, " is not supported (only 0)"));
  c.set_output(0, PartialTensorShape::UnknownRank());
  return absl::OkStatus();
}

// The variable's shape is not known here; what can be checked is that
// updates (unless a scalar) start with indices' shape.
absl::Status ResourceScatterShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(HandleIsScalar(c));
  const PartialTensorShape& indices = c.input(1);
  const PartialTensorShape& updates = c.input(2);
  if (indices.unknown_rank() || updates.unknown_rank() || updates.dims() == 0) {
    return absl::OkStatus();
  }
  bool prefix = updates.dims() >= indices.dims();
  for (int i = 0; prefix && i < indices.dims(); ++i) {
    const int64_t a = indices.dim_size(i), b = updates.dim_size(i);
    prefix = a < 0 || b < 0 || a == b;
  }
  if (!prefix) {
    return c.Error(absl::StrCat("updates of shape ", updates.DebugString(),
                                " must be a scalar or start with indices' shape ",
                                indices.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status IsInitializedShape(InferenceContext& c) {
  STRATA_RETURN_IF_ERROR(HandleIsScalar(c));
  c.set_output(0, PartialTensorShape({}));
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("VarHandleOp")
    .Output("resource: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("debug_name: string = ''")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .Attr("allowed_devices: list(string) = []")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

STRATA_REGISTER_OP("ReadVariableOp")
    .Input("resource: resource")
    .Output("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(ReadVariableShape);

STRATA_REGISTER_OP("ResourceGather")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Output("output: dtype")
    .Attr("batch_dims: int = 0")
    .Attr("validate_indices: bool = true")
    .Attr("dtype: type")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(ResourceGatherShape);

STRATA_REGISTER_OP("AssignVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .Attr("validate_shape: bool = false")
    .SetIsStateful()
    .SetShapeFn(HandleScalarNoOutputs);

STRATA_REGISTER_OP("AssignAddVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(HandleScalarNoOutputs);

STRATA_REGISTER_OP("AssignSubVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(HandleScalarNoOutputs);

STRATA_REGISTER_OP("ResourceScatterAdd")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Input("updates: dtype")
    .Attr("dtype: {float, double, int32, int64, half, bfloat16}")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(ResourceScatterShape);

STRATA_REGISTER_OP("ResourceScatterSub")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Input("updates: dtype")
    .Attr("dtype: {float, double, int32, int64, half, bfloat16}")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(ResourceScatterShape);

STRATA_REGISTER_OP("ResourceScatterUpdate")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Input("updates: dtype")
    .Attr("dtype: type")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(ResourceScatterShape);

STRATA_REGISTER_OP("VarIsInitializedOp")
    .Input("resource: resource")
    .Output("is_initialized: bool")
    .SetIsStateful()
    .SetShapeFn(IsInitializedShape);

STRATA_REGISTER_OP("DestroyResourceOp")
    .Input("resource: resource")
    .Attr("ignore_lookup_error: bool = true")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

namespace ops {

Output VarHandleOp(const Scope& s, DataType dtype, const PartialTensorShape& shape,
                   const VarHandleAttrs& attrs) {
  Node* n = NodeBuilder(s, "VarHandleOp")
                .Attr("dtype", dtype)
                .Attr("shape", shape)
                .Attr("container", attrs.container)
                .Attr("shared_name", attrs.shared_name)
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Output ReadVariableOp(const Scope& s, Output resource, DataType dtype) {
  Node* n = NodeBuilder(s, "ReadVariableOp").Input(resource).Attr("dtype", dtype).Finalize();
  if (n == nullptr) return Output();
  Node* src = resource.node();
  if (src->IsOp("VarHandleOp")) {
    PartialTensorShape shape;
    if (GetAttr(src->attrs(), "shape", &shape).ok()) n->set_output_shapes({shape});
  }
  return Output(n, 0);
}

Output ResourceGather(const Scope& s, Output resource, Output indices, DataType dtype) {
  Node* n = NodeBuilder(s, "ResourceGather").Input(resource).Input(indices).Attr("dtype", dtype).Finalize();
  if (n == nullptr) return Output();
  Node* src = resource.node();
  PartialTensorShape shape;
  if (src->IsOp("VarHandleOp") && GetAttr(src->attrs(), "shape", &shape).ok()) {
    absl::StatusOr<PartialTensorShape> out = GatherOutputShape(shape, indices.shape(), 0);
    if (out.ok()) n->set_output_shapes({*out});
  }
  return Output(n, 0);
}

Node* AssignVariableOp(const Scope& s, Output resource, Output value, bool validate_shape) {
  return NodeBuilder(s, "AssignVariableOp")
      .Input(resource)
      .Input(value)
      .Attr("validate_shape", validate_shape)
      .Finalize();
}

Node* AssignAddVariableOp(const Scope& s, Output resource, Output value) {
  return NodeBuilder(s, "AssignAddVariableOp").Input(resource).Input(value).Finalize();
}

Node* AssignSubVariableOp(const Scope& s, Output resource, Output value) {
  return NodeBuilder(s, "AssignSubVariableOp").Input(resource).Input(value).Finalize();
}

Node* ResourceScatterAdd(const Scope& s, Output resource, Output indices, Output updates) {
  return NodeBuilder(s, "ResourceScatterAdd")
      .Input(resource)
      .Input(indices)
      .Input(updates)
      .Finalize();
}

Node* ResourceScatterSub(const Scope& s, Output resource, Output indices, Output updates) {
  return NodeBuilder(s, "ResourceScatterSub")
      .Input(resource)
      .Input(indices)
      .Input(updates)
      .Finalize();
}

Node* ResourceScatterUpdate(const Scope& s, Output resource, Output indices, Output updates) {
  return NodeBuilder(s, "ResourceScatterUpdate")
      .Input(resource)
      .Input(indices)
      .Input(updates)
      .Finalize();
}

Output VarIsInitializedOp(const Scope& s, Output resource) {
  Node* n = NodeBuilder(s, "VarIsInitializedOp").Input(resource).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Node* DestroyResourceOp(const Scope& s, Output resource, bool ignore_lookup_error) {
  return NodeBuilder(s, "DestroyResourceOp")
      .Input(resource)
      .Attr("ignore_lookup_error", ignore_lookup_error)
      .Finalize();
}

}  // namespace ops
}  // namespace strata
