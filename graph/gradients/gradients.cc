// AddSymbolicGradients: the backward pass over the part of the graph between
// the inputs and the outputs.
#include "graph/gradients/gradients.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/grad_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/math_ops.h"

namespace strata {

bool IsDifferentiableType(DataType dt) {
  return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_BFLOAT16 || dt == DT_HALF;
}

namespace {

using TensorKey = std::pair<int, int>;  // (node id, output index)

TensorKey KeyOf(const Output& o) { return {o.node()->id(), o.index()}; }

absl::Status CheckOutputs(const Graph& g, const OutputList& list, const char* what) {
  for (size_t i = 0; i < list.size(); ++i) {
    const Output& o = list[i];
    if (!o.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "] is a null Output"));
    }
    if (g.FindNodeId(o.node()->id()) != o.node()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] (", o.name(), ") is not a node of the scope's graph"));
    }
    if (o.index() < 0 || o.index() >= o.node()->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "] (", o.name(), ") names output ",
                                                     o.index(), " of a node with ",
                                                     o.node()->num_outputs(), " outputs"));
    }
  }
  return absl::OkStatus();
}

class BackwardPass {
 public:
  BackwardPass(const Scope& grad_root, const OutputList& outputs, const OutputList& inputs)
      : root_(grad_root), graph_(*grad_root.graph()), outputs_(outputs), inputs_(inputs) {}

  absl::Status Run(const OutputList& seeds, OutputList* grad_inputs) {
    MarkReachable();
    for (size_t i = 0; i < outputs_.size(); ++i) pending_[KeyOf(outputs_[i])].push_back(seeds[i]);
    STRATA_ASSIGN_OR_RETURN(std::vector<Node*> order, graph_.TopologicalSort());
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      STRATA_RETURN_IF_ERROR(Backprop(**it));
    }
    grad_inputs->clear();
    for (const Output& in : inputs_) {
      Output g = SumGradients(KeyOf(in), root_);
      if (!g.ok() && IsDifferentiableType(in.type())) g = ops::ZerosLike(root_, in);
      grad_inputs->push_back(g);
    }
    return root_.status();
  }

 private:
  // forward_[n]: some data input of n depends on an input tensor.
  // backward_[n]: n feeds an output along data edges (or is an output's node).
  void MarkReachable() {
    forward_.assign(graph_.num_node_ids(), false);
    backward_.assign(graph_.num_node_ids(), false);
    std::vector<Node*> stack;
    for (const Output& in : inputs_) {
      input_tensors_.insert(KeyOf(in));
      for (const Edge* e : in.node()->out_edges()) {
        if (e->src_output == in.index() && !forward_[e->dst->id()]) {
          forward_[e->dst->id()] = true;
          stack.push_back(e->dst);
        }
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge* e : n->out_edges()) {
        if (!e->IsControlEdge() && !forward_[e->dst->id()]) {
          forward_[e->dst->id()] = true;
          stack.push_back(e->dst);
        }
      }
    }
    for (const Output& out : outputs_) {
      if (!backward_[out.node()->id()]) {
        backward_[out.node()->id()] = true;
        stack.push_back(out.node());
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge* e : n->in_edges()) {
        if (!e->IsControlEdge() && !backward_[e->src->id()]) {
          backward_[e->src->id()] = true;
          stack.push_back(e->src);
        }
      }
    }
  }

  // True if a gradient can flow from this tensor back to an input.
  bool DependsOnInputs(const Node* n, int output) const {
    return IsDifferentiableType(n->output_type(output)) &&
           (forward_[n->id()] || input_tensors_.contains({n->id(), output}));
  }

  // The summed gradient of a tensor (cached: an input of the pass may also
  // be consumed on the path, and must get one sum, not two).
  Output SumGradients(const TensorKey& key, const Scope& scope) {
    auto done = summed_.find(key);
    if (done != summed_.end()) return done->second;
    Output sum;
    auto it = pending_.find(key);
    if (it != pending_.end() && !it->second.empty()) {
      sum = it->second.size() == 1 ? it->second[0] : ops::AddN(scope, it->second);
    }
    summed_[key] = sum;
    return sum;
  }

  absl::Status Backprop(const Node& n) {
    if (!forward_[n.id()] || !backward_[n.id()]) return absl::OkStatus();
    bool wants_gradient = false;
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Edge* e = n.input_edge(i);
      if (e == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node ", n.DebugString(), " has no producer for input ", i,
            ", so its gradient cannot be built"));
      }
      wants_gradient = wants_gradient || DependsOnInputs(e->src, e->src_output);
    }
    if (!wants_gradient) return absl::OkStatus();

    Scope scope = root_.NewSubScope(n.name() + "_grad");
    if (!n.requested_device().empty()) scope = scope.WithDevice(n.requested_device());
    OutputList grad_outputs(n.num_outputs());
    bool any = false;
    for (int o = 0; o < n.num_outputs(); ++o) {
      grad_outputs[o] = SumGradients({n.id(), o}, scope);
      any = any || grad_outputs[o].ok();
    }
    if (!any) return absl::OkStatus();

    GradFunc fn;
    switch (GradientRegistry::Global()->Lookup(n.type_string(), &fn)) {
      case GradientRegistry::Kind::kUnknown:
        return absl::NotFoundError(absl::StrCat(
            "no gradient registered for op ", n.type_string(), " of node ", n.DebugString(),
            ", which lies between the inputs and the outputs (register one with "
            "STRATA_REGISTER_GRADIENT, or mark the op STRATA_NO_GRADIENT)"));
      case GradientRegistry::Kind::kNoGradient:
        return absl::OkStatus();
      case GradientRegistry::Kind::kDifferentiable:
        break;
    }
    OutputList grad_inputs;
    absl::Status s = fn(scope, n, grad_outputs, &grad_inputs);
    if (s.ok()) s = scope.status();
    if (!s.ok()) {
      return AnnotateStatus(s, absl::StrCat("building the gradient of node ", n.DebugString(), ": "));
    }
    if (static_cast<int>(grad_inputs.size()) != n.num_inputs()) {
      return absl::InternalError(absl::StrCat("the gradient function of op ", n.type_string(),
                                              " gave ", grad_inputs.size(),
                                              " input gradients for node ", n.DebugString(),
                                              ", which has ", n.num_inputs(), " inputs"));
    }
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Output& g = grad_inputs[i];
      const Edge* e = n.input_edge(i);
      if (!g.ok() || !DependsOnInputs(e->src, e->src_output)) continue;
      if (g.type() != n.input_type(i)) {
        return absl::InternalError(absl::StrCat(
            "the gradient function of op ", n.type_string(), " gave a ",
            DataTypeString(g.type()), " gradient for ", DataTypeString(n.input_type(i)),
            " input ", i, " of node ", n.DebugString()));
      }
      pending_[{e->src->id(), e->src_output}].push_back(g);
    }
    return absl::OkStatus();
  }

  const Scope root_;
  const Graph& graph_;
  const OutputList& outputs_;
  const OutputList& inputs_;
  std::vector<bool> forward_, backward_;
  absl::flat_hash_set<TensorKey> input_tensors_;
  absl::flat_hash_map<TensorKey, OutputList> pending_;
  absl::flat_hash_map<TensorKey, Output> summed_;
};

absl::Status CheckArgs(const Scope& scope, const OutputList& outputs, const OutputList& inputs,
                       OutputList* grad_inputs) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (grad_inputs == nullptr) return absl::InvalidArgumentError("grad_inputs is null");
  STRATA_RETURN_IF_ERROR(CheckOutputs(*scope.graph(), outputs, "outputs"));
  STRATA_RETURN_IF_ERROR(CheckOutputs(*scope.graph(), inputs, "inputs"));
  for (const Output& o : outputs) {
    if (!IsDifferentiableType(o.type())) {
      return absl::InvalidArgumentError(absl::StrCat("output ", o.name(), " has dtype ",
                                                     DataTypeString(o.type()),
                                                     "; only float and double outputs have "
                                                     "gradients"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddSymbolicGradients(const Scope& scope, const OutputList& outputs,
                                  const OutputList& inputs, const OutputList& grad_outputs,
                                  OutputList* grad_inputs) {
  STRATA_RETURN_IF_ERROR(CheckArgs(scope, outputs, inputs, grad_inputs));
  if (grad_outputs.size() != outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", outputs.size(), " outputs but ",
                                                   grad_outputs.size(), " grad_outputs"));
  }
  STRATA_RETURN_IF_ERROR(CheckOutputs(*scope.graph(), grad_outputs, "grad_outputs"));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (grad_outputs[i].type() != outputs[i].type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grad_outputs[", i, "] (", grad_outputs[i].name(), ") has dtype ",
          DataTypeString(grad_outputs[i].type()), " but output ", outputs[i].name(), " has ",
          DataTypeString(outputs[i].type())));
    }
  }
  return BackwardPass(scope.NewSubScope("gradients"), outputs, inputs)
      .Run(grad_outputs, grad_inputs);
}

absl::Status AddSymbolicGradients(const Scope& scope, const OutputList& outputs,
                                  const OutputList& inputs, OutputList* grad_inputs) {
  STRATA_RETURN_IF_ERROR(CheckArgs(scope, outputs, inputs, grad_inputs));
  const Scope root = scope.NewSubScope("gradients");
  OutputList seeds;
  for (const Output& o : outputs) seeds.push_back(ops::OnesLike(root, o));
  STRATA_RETURN_IF_ERROR(root.status());
  return BackwardPass(root, outputs, inputs).Run(seeds, grad_inputs);
}

}  // namespace strata
