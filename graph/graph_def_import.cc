#include "graph/graph_def_import.h"

#include <cstdint>
#include <map>
#include <string>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

namespace {

// A serialized protobuf message cannot exceed 2 GiB, so no honest tensor is
// larger; the cap also keeps a tiny proto that claims a huge shape filled by
// repeating one value from allocating that shape later.
constexpr int64_t kMaxTensorBytes = std::numeric_limits<int32_t>::max();

std::string NodeWhere(const ::tensorflow::NodeDef& n) {
  return absl::StrCat("node '", n.name(), "' (op ", n.op(), ")");
}

// TensorFlow's node name grammar, with a leading '_' allowed as TensorFlow
// allows it for internal ops (Strata's step and partition graphs name nodes
// "_arg_x_0", "_retval_y_0"): [A-Za-z0-9._][A-Za-z0-9_./>-]*. Names with ':'
// or '^' would make input strings ambiguous.
bool IsValidNodeName(absl::string_view s) {
  if (s.empty()) return false;
  const char c0 = s[0];
  if (!absl::ascii_isalnum(c0) && c0 != '.' && c0 != '_') return false;
  for (char c : s.substr(1)) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-' && c != '/' && c != '>') {
      return false;
    }
  }
  return true;
}

// Known-dims product must fit in int64, like a TensorShape's element count.
absl::Status ValidateShapeProto(const ::tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank() && p.dim_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape has unknown_rank set and ", p.dim_size(), " dims"));
  }
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape shape, PartialTensorShape::FromProto(p));
  int64_t product = 1;
  for (int i = 0; i < shape.dims(); ++i) {
    const int64_t d = shape.dim_size(i);
    if (d <= 0) continue;
    if (product > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", shape.DebugString(), " has more than 2^63-1 elements"));
    }
    product *= d;
  }
  return absl::OkStatus();
}

// Recursively validates the shapes and tensors inside an attr value.
absl::Status ValidateAttrValue(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kShape:
      return ValidateShapeProto(v.shape());
    case AttrValue::kTensor:
      return ValidateTensorProto(v.tensor());
    case AttrValue::kType:
      if (!::tensorflow::DataType_IsValid(v.type())) {
        return absl::InvalidArgumentError(absl::StrCat("invalid dtype enum ", v.type()));
      }
      return absl::OkStatus();
    case AttrValue::kList: {
      for (int i = 0; i < v.list().shape_size(); ++i) {
        absl::Status s = ValidateShapeProto(v.list().shape(i));
        if (!s.ok()) return AnnotateStatus(s, absl::StrCat("list element ", i, ": "));
      }
      for (int i = 0; i < v.list().tensor_size(); ++i) {
        absl::Status s = ValidateTensorProto(v.list().tensor(i));
        if (!s.ok()) return AnnotateStatus(s, absl::StrCat("list element ", i, ": "));
      }
      for (int i = 0; i < v.list().type_size(); ++i) {
        if (!::tensorflow::DataType_IsValid(v.list().type(i))) {
          return absl::InvalidArgumentError(
              absl::StrCat("list element ", i, ": invalid dtype enum ", v.list().type(i)));
        }
      }
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();
  }
}

// Everything about one NodeDef that can be checked without the rest of the
// graph: its name, its attr values, its input strings.
absl::Status ValidateNodeDef(const ::tensorflow::NodeDef& n, std::vector<InputName>* inputs) {
  if (!IsValidNodeName(n.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid node name '", absl::CHexEscape(n.name()), "' (op ", n.op(),
                     "): names match [A-Za-z0-9._][A-Za-z0-9_./>-]*"));
  }
  for (const auto& kv : n.attr()) {
    absl::Status s = ValidateAttrValue(kv.second);
    if (!s.ok()) {
      return AnnotateStatus(s, absl::StrCat(NodeWhere(n), ": attr '", kv.first, "': "));
    }
  }
  if (n.op() == "Const") {
    auto value = n.attr().find("value");
    auto dtype = n.attr().find("dtype");
    if (value != n.attr().end() && dtype != n.attr().end() && value->second.has_tensor() &&
        dtype->second.value_case() == AttrValue::kType &&
        value->second.tensor().dtype() != dtype->second.type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeWhere(n), ": attr 'value' holds a ", DataTypeString(value->second.tensor().dtype()),
          " tensor but attr 'dtype' is ", DataTypeString(dtype->second.type())));
    }
  }
  inputs->clear();
  absl::flat_hash_set<std::string> control;
  bool seen_control = false;
  for (const std::string& in : n.input()) {
    auto parsed = ParseInputName(in);
    if (!parsed.ok()) return AnnotateStatus(parsed.status(), absl::StrCat(NodeWhere(n), ": "));
    if (parsed->IsControl()) {
      seen_control = true;
      if (!control.insert(parsed->node).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(NodeWhere(n), ": duplicate control input '", in, "'"));
      }
    } else if (seen_control) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeWhere(n), ": data input '", in, "' comes after a control input; control inputs "
          "('^name') must follow all data inputs"));
    }
    inputs->push_back(*std::move(parsed));
  }
  return absl::OkStatus();
}

// Adds the edges of node `dst` from its parsed inputs.
absl::Status AddInputEdges(Graph* g, Node* dst, const std::vector<InputName>& inputs) {
  int data = 0;
  for (const InputName& in : inputs) data += in.IsControl() ? 0 : 1;
  if (data != dst->num_inputs()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", dst->DebugString(), " has ", data,
                                                   " data inputs; the op takes ",
                                                   dst->num_inputs()));
  }
  int slot = 0;
  for (const InputName& in : inputs) {
    const std::string text = in.IsControl() ? absl::StrCat("^", in.node)
                             : in.index == 0 ? in.node
                                             : absl::StrCat(in.node, ":", in.index);
    Node* src = g->FindNode(in.node);
    if (src == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("node ", dst->DebugString(), " input '",
                                                     text, "' names node '", in.node,
                                                     "', which is not in the graph"));
    }
    if (in.IsControl()) {
      g->AddControlEdge(src, dst);
      continue;
    }
    if (in.index >= src->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", dst->DebugString(), " input ", slot, " '", text, "' asks for output ",
          in.index, " of ", src->DebugString(), ", which has ", src->num_outputs(), " outputs"));
    }
    if (src->output_type(in.index) != dst->input_type(slot)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", dst->DebugString(), " input ", slot, " '", text, "': dtype mismatch: ",
          src->DebugString(), " output ", in.index, " is ",
          DataTypeString(src->output_type(in.index)), " but the input expects ",
          DataTypeString(dst->input_type(slot))));
    }
    auto e = g->AddEdge(src, in.index, dst, slot);
    if (!e.ok()) return e.status();
    ++slot;
  }
  return absl::OkStatus();
}

// The nodes of one cycle, "a -> b -> a", once Graph::TopologicalSort has
// found that there is one. A node that Kahn's algorithm never releases has a
// predecessor that is never released either, so walking predecessors among
// those nodes must revisit one: the walk from it is a cycle.
std::string DescribeCycle(const Graph& g) {
  std::vector<int> pending(g.num_node_ids(), 0);
  std::vector<Node*> ready;
  for (Node* n : g.nodes()) {
    pending[n->id()] = static_cast<int>(n->in_edges().size());
    if (pending[n->id()] == 0) ready.push_back(n);
  }
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    for (const Edge* e : n->out_edges()) {
      if (--pending[e->dst->id()] == 0) ready.push_back(e->dst);
    }
  }
  Node* start = nullptr;
  for (Node* n : g.nodes()) {
    if (pending[n->id()] > 0) {
      start = n;
      break;
    }
  }
  if (start == nullptr) return "";
  std::vector<int> seen_at(g.num_node_ids(), -1);
  std::vector<Node*> path;
  Node* n = start;
  while (seen_at[n->id()] < 0) {
    seen_at[n->id()] = static_cast<int>(path.size());
    path.push_back(n);
    for (const Edge* e : n->in_edges()) {
      if (pending[e->src->id()] > 0) {
        n = e->src;
        break;
      }
    }
  }
  // path[seen_at[n]..] is the cycle walked backwards; print it forwards.
  std::string out;
  for (int i = static_cast<int>(path.size()) - 1; i >= seen_at[n->id()]; --i) {
    absl::StrAppend(&out, "'", path[i]->name(), "' -> ");
  }
  absl::StrAppend(&out, "'", path.back()->name(), "'");
  return out;
}

// Every op of the graph that Strata does not register, named at once with
// the nodes that use it (a user porting a model sees the whole list, not
// one op per attempt). NotFound.
absl::Status CheckOpsRegistered(const ::tensorflow::GraphDef& def, const OpRegistry& ops) {
  std::map<std::string, std::vector<std::string>> missing;  // op -> its nodes
  for (const ::tensorflow::NodeDef& n : def.node()) {
    if (!ops.LookUp(n.op()).ok()) missing[n.op()].push_back(n.name());
  }
  if (missing.empty()) return absl::OkStatus();
  constexpr size_t kNamed = 3;
  std::vector<std::string> parts;
  for (const auto& [op, nodes] : missing) {
    std::vector<std::string> quoted;
    for (size_t i = 0; i < nodes.size() && i < kNamed; ++i) quoted.push_back(absl::StrCat("'", nodes[i], "'"));
    if (nodes.size() > kNamed) quoted.push_back("...");
    parts.push_back(absl::StrCat("op '", op, "' (", nodes.size() == 1 ? "node " : absl::StrCat(nodes.size(), " nodes: "),
                                 absl::StrJoin(quoted, ", "), ")"));
  }
  return absl::NotFoundError(absl::StrCat(missing.size(), missing.size() == 1 ? " op of the graph is" : " ops of the graph are",
                                          " not registered in Strata: ", absl::StrJoin(parts, "; ")));
}

absl::Status ImportInto(const ::tensorflow::GraphDef& def, Graph* g) {
  STRATA_RETURN_IF_ERROR(CheckOpsRegistered(def, *g->op_registry()));
  // Pass 1: validate each NodeDef alone and add it (attrs checked and
  // completed by AddNode); nodes keep the GraphDef's order, which export uses.
  std::vector<std::vector<InputName>> inputs(def.node_size());
  std::vector<Node*> nodes(def.node_size(), nullptr);
  for (int i = 0; i < def.node_size(); ++i) {
    const ::tensorflow::NodeDef& n = def.node(i);
    STRATA_RETURN_IF_ERROR(ValidateNodeDef(n, &inputs[i]));
    if (g->FindNode(n.name()) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate node name '", n.name(), "' (nodes ", g->FindNode(n.name())->id(),
                       " and ", i, ")"));
    }
    auto node = g->AddNode(n);
    if (!node.ok()) return node.status();
    nodes[i] = *node;
  }
  // Pass 2: edges, now that every node exists (inputs may name later nodes).
  for (int i = 0; i < def.node_size(); ++i) {
    STRATA_RETURN_IF_ERROR(AddInputEdges(g, nodes[i], inputs[i]));
  }
  // Pass 3: cycles, then shapes in dependency order.
  auto sorted = g->TopologicalSort();
  if (!sorted.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the graph has a cycle: ", DescribeCycle(*g)));
  }
  const std::vector<Node*>& order = *sorted;
  for (Node* n : order) {
    absl::Status s = g->InferShapes(n);
    if (!s.ok()) {
      // Shared shape helpers may not know the node; make sure it is named.
      const std::string quoted = absl::StrCat("'", n->name(), "'");
      if (!absl::StrContains(s.message(), quoted)) {
        s = AnnotateStatus(s, absl::StrCat("node ", n->DebugString(), ": "));
      }
      return s;
    }
  }
  *g->mutable_versions() = def.versions();
  g->SetGraphDefPassthrough(def);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InputName> ParseInputName(absl::string_view s) {
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed input '", absl::CHexEscape(s), "': ", why));
  };
  if (s.empty()) return bad("empty");
  InputName out;
  if (absl::ConsumePrefix(&s, "^")) {
    if (s.empty()) return bad("no node name after '^'");
    if (s.find(':') != absl::string_view::npos) return bad("a control input has no output index");
    out.node = std::string(s);
    out.index = kControlSlot;
    return out;
  }
  const size_t colon = s.rfind(':');
  if (colon == absl::string_view::npos) {
    out.node = std::string(s);
    return out;
  }
  absl::string_view digits = s.substr(colon + 1);
  if (colon == 0) return bad("empty node name");
  if (digits.empty()) return bad("empty output index");
  for (char c : digits) {
    if (!absl::ascii_isdigit(c)) return bad("output index is not a non-negative integer");
  }
  int32_t index;
  if (!absl::SimpleAtoi(digits, &index)) return bad("output index out of range");
  out.node = std::string(s.substr(0, colon));
  out.index = index;
  return out;
}

absl::Status ValidateTensorProto(const ::tensorflow::TensorProto& p) {
  const DataType dtype = p.dtype();
  if (!DataTypeCanUseMemcpy(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor has unsupported dtype ", DataTypeString(dtype)));
  }
  auto shape = TensorShape::FromProto(p.tensor_shape());
  if (!shape.ok()) return AnnotateStatus(shape.status(), "tensor shape: ");
  const int64_t n = shape->num_elements();
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  if (n > kMaxTensorBytes / elem) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", DataTypeString(dtype), " ",
                                                   shape->DebugString(),
                                                   " is larger than 2 GiB"));
  }
  if (!p.tensor_content().empty()) {
    if (static_cast<int64_t>(p.tensor_content().size()) != n * elem) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor_content has ", p.tensor_content().size(), " bytes; ", DataTypeString(dtype),
          " ", shape->DebugString(), " needs ", n * elem));
    }
    return absl::OkStatus();
  }
  int64_t values = 0;
  const char* field = "";
  switch (dtype) {
    case DT_FLOAT: values = p.float_val_size(); field = "float_val"; break;
    case DT_DOUBLE: values = p.double_val_size(); field = "double_val"; break;
    case DT_INT64: values = p.int64_val_size(); field = "int64_val"; break;
    case DT_UINT32: values = p.uint32_val_size(); field = "uint32_val"; break;
    case DT_UINT64: values = p.uint64_val_size(); field = "uint64_val"; break;
    case DT_BOOL: values = p.bool_val_size(); field = "bool_val"; break;
    case DT_HALF:
    case DT_BFLOAT16: values = p.half_val_size(); field = "half_val"; break;
    default: values = p.int_val_size(); field = "int_val"; break;
  }
  if (values > n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", DataTypeString(dtype), " ",
                                                   shape->DebugString(), " has ", values,
                                                   " values in ", field, " for ", n,
                                                   " elements"));
  }
  return absl::OkStatus();
}

absl::Status ImportGraphDef(const ::tensorflow::GraphDef& def, Graph* g) {
  if (g->num_nodes() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ImportGraphDef needs an empty graph; this one has ", g->num_nodes(), " nodes"));
  }
  absl::Status s = ImportInto(def, g);
  if (!s.ok()) {
    for (Node* n : g->nodes()) g->RemoveNode(n);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<Graph>> ImportGraphDef(const ::tensorflow::GraphDef& def,
                                                      const OpRegistry* ops) {
  auto g = std::make_unique<Graph>(ops);
  STRATA_RETURN_IF_ERROR(ImportGraphDef(def, g.get()));
  return g;
}

void CompleteDefaultAttrs(::tensorflow::GraphDef* def, const OpRegistry* ops) {
  for (::tensorflow::NodeDef& n : *def->mutable_node()) {
    auto op = ops->LookUp(n.op());
    if (!op.ok()) continue;
    for (const AttrDef& a : (*op)->attrs) {
      if (a.default_value && !n.attr().contains(a.name)) {
        (*n.mutable_attr())[a.name] = *a.default_value;
      }
    }
  }
}

}  // namespace strata
