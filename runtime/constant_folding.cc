#include "runtime/constant_folding.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/tensor.h"
#include "kernels/kernel_runner.h"

namespace strata {

namespace {

// The value of a Const node, parsed once per pass.
class ConstCache {
 public:
  const Tensor* Get(Node* n) {
    auto it = values_.find(n->id());
    if (it != values_.end()) return &it->second;
    Tensor t;
    if (!GetAttr(n->attrs(), "value", &t).ok()) return nullptr;
    return &values_.emplace(n->id(), std::move(t)).first->second;
  }
  void Put(Node* n, Tensor t) { values_[n->id()] = std::move(t); }

 private:
  absl::flat_hash_map<int, Tensor> values_;
};

bool IsCandidate(const Node& n, int64_t max_elements) {
  if (n.op_def().is_stateful || n.IsOp("Const") || n.IsOp("Placeholder") ||
      absl::StartsWith(n.type_string(), "_")) {
    return false;
  }
  if (n.num_inputs() == 0 || n.num_outputs() != 1) return false;
  for (const Edge* e : n.in_edges()) {
    if (!e->IsControlEdge() && !e->src->IsOp("Const")) return false;
  }
  // The output size is known before running the kernel, so a huge result
  // is never even computed.
  const PartialTensorShape& shape = n.output_shape(0);
  if (!shape.IsFullyDefined()) return false;
  auto full = shape.AsTensorShape();
  return full.ok() && full->num_elements() <= max_elements;
}

// The inputs of `n` grouped per input argument, as the kernel runner takes
// them (list arguments such as AddN's hold several tensors).
absl::StatusOr<std::vector<std::vector<Tensor>>> GroupInputs(const Node& n,
                                                            const std::vector<Tensor>& flat) {
  std::vector<std::vector<Tensor>> out;
  size_t next = 0;
  for (const ArgDef& arg : n.op_def().inputs) {
    int64_t count = 1;
    if (!arg.number_attr.empty()) {
      STRATA_RETURN_IF_ERROR(GetAttr(n.attrs(), arg.number_attr, &count));
    } else if (!arg.type_list_attr.empty()) {
      std::vector<DataType> types;
      STRATA_RETURN_IF_ERROR(GetAttr(n.attrs(), arg.type_list_attr, &types));
      count = static_cast<int64_t>(types.size());
    }
    if (count < 0 || next + count > flat.size()) {
      return absl::InternalError(absl::StrCat("node ", n.DebugString(), " input lists do not add up"));
    }
    out.emplace_back(flat.begin() + next, flat.begin() + next + count);
    next += count;
  }
  return out;
}

// Replaces `n` by a Const holding `value`; see the header for what it keeps.
absl::StatusOr<Node*> ReplaceWithConst(Graph* g, Node* n, const Tensor& value) {
  struct Out {
    Node* dst;
    int dst_input;  // kControlSlot for a control edge
  };
  std::vector<Out> outs;
  for (const Edge* e : n->out_edges()) outs.push_back({e->dst, e->dst_input});
  std::vector<Node*> control_srcs;
  for (const Edge* e : n->in_edges()) {
    if (e->IsControlEdge()) {
      control_srcs.push_back(e->src);
    } else {
      for (const Edge* c : e->src->in_edges()) {
        if (c->IsControlEdge()) control_srcs.push_back(c->src);
      }
    }
  }
  ::tensorflow::NodeDef def;
  def.set_name(n->name());
  def.set_op("Const");
  def.set_device(n->requested_device());
  (*def.mutable_attr())["dtype"] = MakeAttr(value.dtype());
  (*def.mutable_attr())["value"] = MakeAttr(value);
  const std::string assigned = n->assigned_device_name();
  g->RemoveNode(n);
  auto c = g->AddNode(std::move(def));
  if (!c.ok()) return AnnotateStatus(c.status(), "constant folding: ");
  (*c)->set_assigned_device_name(assigned);
  (*c)->set_output_shapes({PartialTensorShape(value.shape())});
  for (Node* src : control_srcs) g->AddControlEdge(src, *c);
  for (const Out& o : outs) {
    if (o.dst_input == kControlSlot) {
      g->AddControlEdge(*c, o.dst);
    } else {
      auto e = g->AddEdge(*c, 0, o.dst, o.dst_input);
      if (!e.ok()) return AnnotateStatus(e.status(), "constant folding: ");
    }
  }
  return *c;
}

}  // namespace

absl::StatusOr<bool> FoldConstants(Graph* g, const ConstantFoldingOptions& options) {
  std::unique_ptr<StandaloneCpuDevice> own_device;
  DeviceBase* device = options.device;
  if (device == nullptr) {
    own_device = std::make_unique<StandaloneCpuDevice>(1);
    device = own_device.get();
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Node*> order, g->TopologicalSort());
  ConstCache consts;
  bool changed = false;
  for (Node* n : order) {
    if (!IsCandidate(*n, options.max_constant_elements)) continue;
    std::vector<Tensor> flat(n->num_inputs());
    bool have_all = true;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) continue;
      const Tensor* t = consts.Get(e->src);
      if (t == nullptr) {
        have_all = false;
        break;
      }
      flat[e->dst_input] = *t;
    }
    if (!have_all) continue;
    STRATA_ASSIGN_OR_RETURN(auto lists, GroupInputs(*n, flat));
    std::map<std::string, AttrValue> attrs;
    for (const auto& kv : n->attrs()) {
      if (!absl::StartsWith(kv.first, "_")) attrs.emplace(kv.first, kv.second);
    }
    auto out = RunKernelWithListInputs(device, n->type_string(), lists, attrs);
    // A failing kernel is the step's error to report, if the step ever runs it.
    if (!out.ok() || out->size() != 1) continue;
    const Tensor& value = (*out)[0];
    if (value.dtype() != n->output_type(0) ||
        value.NumElements() > options.max_constant_elements) {
      continue;
    }
    // Results may share buffers with the inputs (Identity, Reshape); the
    // Const owns a copy through its proto, and the cache keeps this one.
    STRATA_ASSIGN_OR_RETURN(Node * c, ReplaceWithConst(g, n, value));
    consts.Put(c, value);
    changed = true;
  }
  return changed;
}

}  // namespace strata
