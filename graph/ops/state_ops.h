// The resource-variable op family, with TensorFlow's names, inputs and attrs:
//
//   VarHandleOp() -> resource: resource
//       attrs container: string = "", shared_name: string = "", debug_name: string = "",
//             dtype: type, shape: shape, allowed_devices: list(string) = []
//   ReadVariableOp(resource) -> value: dtype
//   AssignVariableOp(resource, value: dtype)         attrs dtype, validate_shape: bool = false
//   AssignAddVariableOp(resource, value: dtype)
//   AssignSubVariableOp(resource, value: dtype)
//   ResourceScatterAdd(resource, indices: Tindices, updates: dtype)
//   ResourceScatterSub(resource, indices: Tindices, updates: dtype)
//       attrs dtype: {float, double, int32, int64, half, bfloat16}, Tindices: {int32, int64}
//   ResourceScatterUpdate(resource, indices: Tindices, updates: dtype)
//       attrs dtype: type, Tindices: {int32, int64}
//   VarIsInitializedOp(resource) -> is_initialized: bool
//   DestroyResourceOp(resource)                      attr ignore_lookup_error: bool = true
//
// A variable's value lives on the device that runs its VarHandleOp, in that
// device's ResourceMgr (kernels/resource_mgr.h), under (container,
// shared_name; the node's name when shared_name is empty), and persists
// across Session::Run calls. The handle is only meaningful on that device, so
// every op taking it must run there: placement puts an op without a device
// request where its first input (the handle) is; the C++ Variable class
// (train/variable.h) also requests the variable's device explicitly.
//
//   Scope root = Scope::NewRootScope();
//   Output w = ops::VarHandleOp(root.WithOpName("w"), DT_FLOAT, PartialTensorShape({2}));
//   Node* init = ops::AssignVariableOp(root, w, ops::Const<float>(root, {1, 2}));
//   Output value = ops::ReadVariableOp(root, w, DT_FLOAT);   // shape [2]
//   Node* step = ops::AssignAddVariableOp(root, w, ops::Const<float>(root, {1, 1}));
//
// Semantics: reading an unassigned variable is FailedPrecondition naming it;
// assigning a value of another dtype, or a shape the declared `shape` rules
// out, is InvalidArgument (AssignAdd/Sub and validate_shape also require the
// current shape). A read returns a snapshot later assignments never change.
//
// All ops are stateful (never folded, deduplicated or merged). Ops without
// outputs return their Node* (nullptr on error, recorded in the scope).
// Thread-safety and ownership: as for Scope (graph/scope.h).
#ifndef STRATA_GRAPH_OPS_STATE_OPS_H_
#define STRATA_GRAPH_OPS_STATE_OPS_H_

#include <string>

#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace ops {

struct VarHandleAttrs {
  VarHandleAttrs Container(std::string v) const {
    VarHandleAttrs a = *this;
    a.container = std::move(v);
    return a;
  }
  VarHandleAttrs SharedName(std::string v) const {
    VarHandleAttrs a = *this;
    a.shared_name = std::move(v);
    return a;
  }
  std::string container;
  std::string shared_name;  // "": the node's name
};

Output VarHandleOp(const Scope& s, DataType dtype, const PartialTensorShape& shape,
                   const VarHandleAttrs& attrs = {});
// When `resource` comes straight from a VarHandleOp, the output's inferred
// shape is that op's `shape` attr (TensorFlow carries it as handle data;
// Strata's shape functions see only shapes, so the builder sets it).
Output ReadVariableOp(const Scope& s, Output resource, DataType dtype);
// ResourceGather: rows `indices` (int32 or int64, any shape) of the
// variable's value along axis 0, as GatherV2 of a read without copying the
// rest; shape indices.shape + the value's shape[1:] (set from the
// VarHandleOp as for ReadVariableOp). An index out of range is
// InvalidArgument naming it. No gradient: Minimize differentiates reads
// (GatherV2 of Variable::Read, as train::Embedding does).
Output ResourceGather(const Scope& s, Output resource, Output indices, DataType dtype);
Node* AssignVariableOp(const Scope& s, Output resource, Output value, bool validate_shape = false);
Node* AssignAddVariableOp(const Scope& s, Output resource, Output value);
Node* AssignSubVariableOp(const Scope& s, Output resource, Output value);
// ResourceScatterAdd / ResourceScatterSub: var[indices[i...], ...] (+|-)=
// updates[i..., ...] in place (copy-on-write, as AssignAddVariableOp), for
// `indices` (int32 or int64, any shape) naming rows of the variable's value
// (rank >= 1). `updates` has shape indices.shape + the value's shape[1:], or
// is a scalar added to (subtracted from) every named row; a row named twice
// gets both updates. Errors leave the variable unchanged: an index outside
// [0, rows) is InvalidArgument naming the op, its position and its value;
// updates of another dtype or shape, InvalidArgument; an unassigned
// variable, FailedPrecondition. CPU kernels for float, double, int32, int64.
Node* ResourceScatterAdd(const Scope& s, Output resource, Output indices, Output updates);
Node* ResourceScatterSub(const Scope& s, Output resource, Output indices, Output updates);
// ResourceScatterUpdate: var[indices[i...], ...] = updates[i..., ...] (or
// the scalar), as ResourceScatterAdd otherwise (a row named twice gets one
// of its updates). A large variable's rows are written a block at a time
// so (a checkpoint's restore of a partition).
Node* ResourceScatterUpdate(const Scope& s, Output resource, Output indices, Output updates);
Output VarIsInitializedOp(const Scope& s, Output resource);
Node* DestroyResourceOp(const Scope& s, Output resource, bool ignore_lookup_error = true);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_STATE_OPS_H_
