// Reverse-mode automatic differentiation on the graph: AddSymbolicGradients
// adds the ops computing d(sum of outputs * seeds)/d(inputs) to the graph,
// using the gradient function registered for each op on the way
// (graph/gradients/grad_registry.h).
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 784}));
//   Output logits = ops::BiasAdd(root, ops::MatMul(root, x, w), b);
//   Output loss = ops::Mean(root, xent.loss, ops::Const(root, 0));
//   OutputList grads;
//   absl::Status s = AddSymbolicGradients(root, {loss}, {w, b}, &grads);
//   // grads[0] = dloss/dw, grads[1] = dloss/db; fetch them with Session::Run.
//
// What it does:
//   - Only the part of the graph between inputs and outputs is differentiated:
//     nodes reachable from an input (along data edges) that also reach an
//     output. Each such node's gradient function runs once, in reverse
//     topological order, after every gradient flowing into its outputs is
//     known; gradients reaching one tensor from several consumers are summed
//     (AddN, or the single term as is).
//   - Gradients flow through float and double tensors only; integer and bool
//     tensors (indices, shapes, labels) carry none. Ops registered with
//     STRATA_NO_GRADIENT stop the flow.
//   - An input that no gradient reaches (not connected to the outputs, or cut
//     off by non-differentiable ops) gets ZerosLike(input) when it is float
//     or double, and Output() when it has another dtype (no gradient exists).
//   - New nodes are named "gradients/<forward node>_grad/..." ("gradients_1"
//     for a second call) under the scope's prefix, with the scope's control
//     dependencies, and are placed on the forward node's requested device
//     when it has one (else the scope's device).
//
// Errors: InvalidArgument for a null or foreign Output, mismatched list
// sizes, a seed whose dtype differs from its output, or an output that is not
// float/double; NotFound naming the node and its op when an op on the path
// has no gradient registered; a gradient function's own error, prefixed with
// the node. The scope's error, if it already holds one. On error the graph
// may hold some of the new nodes. The argument checks leave the scope's
// status alone; a builder call that fails inside a gradient function records
// its error in the scope, as builder calls always do.
//
// Thread-safety: like any builder call, one thread per graph at a time.
// Ownership: the returned Outputs point at nodes owned by the scope's graph.
#ifndef STRATA_GRAPH_GRADIENTS_GRADIENTS_H_
#define STRATA_GRAPH_GRADIENTS_GRADIENTS_H_

#include "absl/status/status.h"
#include "graph/scope.h"

namespace strata {

// d(sum_i outputs[i] * grad_outputs[i])/d(inputs[j]) for each j: grad_inputs
// gets one entry per input. grad_outputs are the seeds (e.g. ones for a
// scalar loss), one per output, each of its output's dtype and shape.
absl::Status AddSymbolicGradients(const Scope& scope, const OutputList& outputs,
                                  const OutputList& inputs, const OutputList& grad_outputs,
                                  OutputList* grad_inputs);

// The same with OnesLike(output) as every seed: the gradient of the sum of
// all elements of all outputs.
absl::Status AddSymbolicGradients(const Scope& scope, const OutputList& outputs,
                                  const OutputList& inputs, OutputList* grad_inputs);

// Float, double, bfloat16 and half: the dtypes gradients flow through.
bool IsDifferentiableType(DataType dt);

}  // namespace strata

#endif  // STRATA_GRAPH_GRADIENTS_GRADIENTS_H_
