// Op definitions and the registry. An op declares its inputs, outputs and
// typed attrs (with defaults and allowed types) in TensorFlow's spec syntax,
// and a shape function; registration is static, in one place per op family
// (graph/ops/<family>.cc).
//
//   STRATA_REGISTER_OP("MatMul")
//       .Input("a: T")
//       .Input("b: T")
//       .Output("product: T")
//       .Attr("transpose_a: bool = false")
//       .Attr("transpose_b: bool = false")
//       .Attr("T: {float, double, int32, int64}")
//       .SetShapeFn(MatMulShape);
//
// Input/output specs: "name: float" (fixed type), "name: T" (type attr),
// "name: N * T" (a list of N tensors of type T), "name: Tlist" (list(type)).
// Attr specs: "name: type|int|float|bool|string|shape|tensor|list(int)|
// list(float)|list(type)|list(string)|list(shape)|func", optionally
// "= default", "{float, int32}" (allowed types), ">= min" for ints.
//
// Thread-safety: registration happens during static initialization; lookups
// afterwards are read-only and may run concurrently.
#ifndef STRATA_GRAPH_OP_REGISTRY_H_
#define STRATA_GRAPH_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/attr_value.h"
#include "graph/types.h"
#include "proto/node_def.pb.h"

namespace strata {

class InferenceContext;
using ShapeFn = std::function<absl::Status(InferenceContext& c)>;

struct ArgDef {
  std::string name;
  DataType type = DT_INVALID;  // fixed type, or
  std::string type_attr;       // the attr holding the type ("T"), and
  std::string number_attr;     // for "N * T", the attr holding the count, or
  std::string type_list_attr;  // a list(type) attr: one tensor per listed type.
};

struct AttrDef {
  std::string name;
  std::string type;  // "int", "list(type)", ...
  std::optional<AttrValue> default_value;
  std::vector<DataType> allowed_types;  // empty: any
  std::optional<int64_t> minimum;       // for int attrs
};

struct OpDef {
  std::string name;
  std::vector<ArgDef> inputs;
  std::vector<ArgDef> outputs;
  std::vector<AttrDef> attrs;
  bool is_stateful = false;     // never folded, deduplicated or pruned as a duplicate
  bool is_commutative = false;  // CSE may reorder its two inputs
  ShapeFn shape_fn;

  const AttrDef* FindAttr(const std::string& attr_name) const;
};

class OpRegistry {
 public:
  static OpRegistry* Global();
  // Fails on a duplicate name or a malformed spec; static registration aborts
  // on such a failure, since it is our bug.
  absl::Status Register(OpDef def);
  // NotFound naming the op.
  absl::StatusOr<const OpDef*> LookUp(const std::string& op) const;
  std::vector<std::string> ListOps() const;

 private:
  std::map<std::string, std::unique_ptr<const OpDef>> ops_;
};

// Builds an OpDef from spec strings; Register() adds it to the global registry.
class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string name);
  OpDefBuilder& Input(const std::string& spec);
  OpDefBuilder& Output(const std::string& spec);
  OpDefBuilder& Attr(const std::string& spec);
  OpDefBuilder& SetIsStateful();
  OpDefBuilder& SetIsCommutative();
  OpDefBuilder& SetShapeFn(ShapeFn fn);
  // Parses the specs; InvalidArgument naming the op and the bad spec.
  absl::StatusOr<OpDef> Build() const;

 private:
  OpDef def_;
  std::vector<std::string> input_specs_, output_specs_, attr_specs_;
};

namespace op_registration {
struct Registrar {
  Registrar(const OpDefBuilder& b);  // NOLINT: used by the macro below
};
}  // namespace op_registration

#define STRATA_REGISTER_OP(name) \
  STRATA_REGISTER_OP_UNIQ_(__COUNTER__, name)
#define STRATA_REGISTER_OP_UNIQ_(ctr, name) STRATA_REGISTER_OP_UNIQ2_(ctr, name)
#define STRATA_REGISTER_OP_UNIQ2_(ctr, name)                                  \
  static ::strata::op_registration::Registrar strata_op_registrar_##ctr       \
      __attribute__((unused)) = ::strata::OpDefBuilder(name)

// Fills in defaults for attrs the NodeDef lacks and checks every attr the op
// declares: present, of the declared type, an allowed dtype, >= its minimum.
// Errors name the node and the attr. Attrs the op does not declare are kept
// if their name starts with '_' (TensorFlow's internal attrs), else rejected.
absl::Status ValidateAndCompleteAttrs(const OpDef& op, ::tensorflow::NodeDef* node);

// The dtypes of a node's inputs and outputs, expanding lists. Errors name the
// node and the attr.
absl::Status InOutTypesForNode(const ::tensorflow::NodeDef& node, const OpDef& op,
                               std::vector<DataType>* inputs, std::vector<DataType>* outputs);

}  // namespace strata

#endif  // STRATA_GRAPH_OP_REGISTRY_H_
