// Linear algebra ops: Qr (TensorFlow's name, inputs, outputs and attrs).
//
//   ops::QrOutputs qr = ops::Qr(scope, a);   // a: [..., M, N] float or double
//   // qr.q: [..., M, K] with orthonormal columns, qr.r: [..., K, N] upper
//   // triangular, K = min(M, N); a = q r (full_matrices: q [..., M, M],
//   // r [..., M, N]).
//
// No gradient is registered (PowerSGD orthogonalizes with it outside
// backpropagation). Thread-safety and ownership: as for Scope.
#ifndef STRATA_GRAPH_OPS_LINALG_H_
#define STRATA_GRAPH_OPS_LINALG_H_

#include "graph/scope.h"

namespace strata {
namespace ops {

struct QrOutputs {
  Output q;
  Output r;
};
QrOutputs Qr(const Scope& s, Output input, bool full_matrices = false);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_LINALG_H_
