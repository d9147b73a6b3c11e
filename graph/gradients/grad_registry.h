// The gradient registry: for each differentiable op, a function that adds the
// ops computing dL/d(inputs) from dL/d(outputs) to the graph. Ops that are
// deliberately not differentiable (Shape, ArgMax, random ops, ...) are
// registered as such, so the backward pass stops at them instead of failing.
// The functions live beside each other per op family
// (graph/gradients/<family>_grad.cc); AddSymbolicGradients
// (graph/gradients/gradients.h) calls them.
//
//   absl::Status MatMulGrad(const Scope& scope, const Node& op,
//                           const OutputList& grad_outputs, OutputList* grad_inputs) {
//     Output a = OpInput(op, 0), b = OpInput(op, 1);
//     grad_inputs->push_back(ops::MatMul(scope, grad_outputs[0], b,
//                                        ops::MatMul::Attrs().TransposeB(true)));
//     grad_inputs->push_back(ops::MatMul(scope, a, grad_outputs[0],
//                                        ops::MatMul::Attrs().TransposeA(true)));
//     return scope.status();
//   }
//   STRATA_REGISTER_GRADIENT("MatMul", MatMulGrad);
//   STRATA_NO_GRADIENT("Shape");
//
// The contract of a gradient function:
//   - grad_outputs has one entry per output of `op`: the summed gradient
//     flowing into that output, or Output() if none does (only a
//     multi-output op can see Output(); the function is not called when no
//     output has a gradient).
//   - On entry *grad_inputs is empty; the function appends exactly
//     op.num_inputs() entries: the gradient for each input (same dtype and
//     shape as the input), or Output() for an input with no gradient (an
//     index, a label, a shape).
//   - Nodes are added through `scope`, which names them
//     "gradients/<node>_grad/..." and places them with the forward node. A
//     builder error is kept in the scope; return scope.status().
//
// Thread-safety: registration happens during static initialization; lookups
// afterwards are read-only and may run concurrently. Ownership: the registry
// is a process-wide singleton that owns copies of the functions.
#ifndef STRATA_GRAPH_GRADIENTS_GRAD_REGISTRY_H_
#define STRATA_GRAPH_GRADIENTS_GRAD_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"
#include "graph/scope.h"

namespace strata {

using GradFunc = std::function<absl::Status(const Scope& scope, const Node& op,
                                            const OutputList& grad_outputs,
                                            OutputList* grad_inputs)>;

class GradientRegistry {
 public:
  static GradientRegistry* Global();

  // A gradient function for `op`. AlreadyExists if `op` is registered
  // already (either way).
  absl::Status Register(const std::string& op, GradFunc fn);
  // Marks `op` as having no gradient: backpropagation stops at it.
  absl::Status RegisterNoGradient(const std::string& op);

  enum class Kind { kUnknown, kNoGradient, kDifferentiable };
  // kDifferentiable sets *fn; kUnknown means nothing was registered.
  Kind Lookup(const std::string& op, GradFunc* fn) const;

  // Sorted op names with a gradient function / marked non-differentiable.
  std::vector<std::string> DifferentiableOps() const;
  std::vector<std::string> NonDifferentiableOps() const;

 private:
  std::map<std::string, GradFunc> ops_;  // a null function: no gradient
};

// Input `i` of `op` as an Output (its producer and slot). The graph must be
// connected there (AddSymbolicGradients checks this before calling a
// gradient function); Output() otherwise.
Output OpInput(const Node& op, int i);
// Output `i` of `op`. The builder API takes non-const nodes; the gradient
// functions only read through it or use it as an input of new nodes.
Output OpOutput(const Node& op, int i);

namespace grad_registration {
struct Registrar {
  Registrar(const char* op, GradFunc fn);  // NOLINT: used by the macros below
  explicit Registrar(const char* op);      // no gradient
};
}  // namespace grad_registration

#define STRATA_REGISTER_GRADIENT(op, fn) STRATA_GRAD_UNIQ_(__COUNTER__, op, fn)
#define STRATA_NO_GRADIENT(op) STRATA_NO_GRAD_UNIQ_(__COUNTER__, op)
#define STRATA_GRAD_UNIQ_(ctr, op, fn) STRATA_GRAD_UNIQ2_(ctr, op, fn)
#define STRATA_GRAD_UNIQ2_(ctr, op, fn)                                        \
  static ::strata::grad_registration::Registrar strata_grad_registrar_##ctr \
      __attribute__((unused))(op, fn)
#define STRATA_NO_GRAD_UNIQ_(ctr, op) STRATA_NO_GRAD_UNIQ2_(ctr, op)
#define STRATA_NO_GRAD_UNIQ2_(ctr, op)                                         \
  static ::strata::grad_registration::Registrar strata_grad_registrar_##ctr \
      __attribute__((unused))(op)

}  // namespace strata

#endif  // STRATA_GRAPH_GRADIENTS_GRAD_REGISTRY_H_
