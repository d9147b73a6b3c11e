// Shape inference: each op's shape function sees its node's attrs, its input
// shapes (possibly partial) and, where an input is a constant, its value, and
// sets the output shapes. It runs as nodes are added by the builder and when
// a GraphDef is imported; errors name the node.
//
//   absl::Status MatMulShape(InferenceContext& c) {
//     PartialTensorShape a, b;
//     STRATA_RETURN_IF_ERROR(c.WithRank(0, 2, &a));
//     ...
//     c.set_output(0, PartialTensorShape({m, n}));
//     return absl::OkStatus();
//   }
//
// Not thread-safe; one context per node per inference.
#ifndef STRATA_GRAPH_SHAPE_INFERENCE_H_
#define STRATA_GRAPH_SHAPE_INFERENCE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "proto/node_def.pb.h"

namespace strata {

class InferenceContext {
 public:
  // `input_values[i]` is the `value` attr (a tensor) of input i's producer
  // when that is a Const, else nullptr; it is parsed only if asked for. The
  // node, op and attr pointers must outlive the context.
  InferenceContext(const ::tensorflow::NodeDef& node, const OpDef& op,
                   std::vector<DataType> input_types, std::vector<PartialTensorShape> input_shapes,
                   std::vector<const AttrValue*> input_values, int num_outputs);

  const ::tensorflow::NodeDef& node_def() const { return node_; }
  const OpDef& op_def() const { return op_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const PartialTensorShape& input(int i) const { return inputs_[i]; }
  DataType input_type(int i) const { return input_types_[i]; }
  // The input's value when it is a constant known at graph-build time.
  // nullptr if it is not a constant (or its value does not parse).
  const Tensor* input_tensor(int i) const;
  void set_output(int i, PartialTensorShape s) { outputs_[i] = std::move(s); }
  const PartialTensorShape& output(int i) const { return outputs_[i]; }
  const std::vector<PartialTensorShape>& outputs() const { return outputs_; }

  template <typename T>
  absl::Status GetAttr(const std::string& name, T* v) const {
    absl::Status s = ::strata::GetAttr(node_.attr(), name, v);
    return s.ok() ? s : Annotate(s);
  }

  // Input `i` merged with "rank `rank`"; InvalidArgument naming the node and
  // the input if its rank is known and different.
  absl::Status WithRank(int i, int rank, PartialTensorShape* out) const;
  absl::Status WithRankAtLeast(int i, int rank, PartialTensorShape* out) const;
  // Merges two dims (-1 unknown); InvalidArgument if both known and different.
  absl::Status MergeDim(int64_t a, int64_t b, int64_t* out, const std::string& what) const;

  // InvalidArgument with the message prefixed by the node's name and op.
  absl::Status Error(const std::string& msg) const;
  absl::Status Annotate(const absl::Status& s) const;

 private:
  const ::tensorflow::NodeDef& node_;
  const OpDef& op_;
  std::vector<DataType> input_types_;
  std::vector<PartialTensorShape> inputs_;
  std::vector<const AttrValue*> input_values_;
  mutable std::vector<std::optional<Tensor>> parsed_values_;
  std::vector<PartialTensorShape> outputs_;
};

// NumPy broadcasting of two shapes; InvalidArgument naming both if they do not
// broadcast.
absl::StatusOr<PartialTensorShape> BroadcastShapes(const PartialTensorShape& a,
                                                   const PartialTensorShape& b);

// Common shape functions.
absl::Status UnchangedShape(InferenceContext& c);   // output 0 = input 0
absl::Status ScalarShape(InferenceContext& c);      // every output a scalar
absl::Status UnknownShape(InferenceContext& c);     // every output unknown
absl::Status BroadcastBinaryOpShape(InferenceContext& c);  // output 0 = bcast(in 0, in 1)

}  // namespace strata

#endif  // STRATA_GRAPH_SHAPE_INFERENCE_H_
