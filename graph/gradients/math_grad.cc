// Gradients of the math op family (graph/ops/math_ops.h).
//
// Binary elementwise ops broadcast, so each operand's gradient is summed
// back to the operand's shape (grad::ReduceBinaryGrads); the comparisons
// Maximum/Minimum and Pow's x > 0 test are built from Equal, Maximum and
// Minimum: x == max(x, y) is x >= y.
#include <cmath>

#include "base/status.h"
#include "graph/gradients/grad_ops.h"
#include "graph/gradients/grad_registry.h"
#include "graph/gradients/grad_util.h"
#include "graph/gradients/gradients.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/einsum.h"
#include "graph/ops/math_ops.h"

namespace strata {
namespace {

using grad::ReduceBinaryGrads;
using grad::ScalarConst;

// ---- Binary elementwise -----------------------------------------------------

absl::Status AddGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  ReduceBinaryGrads(s, OpInput(op, 0), OpInput(op, 1), g[0], g[0], out);
  return s.status();
}

absl::Status SubGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  ReduceBinaryGrads(s, OpInput(op, 0), OpInput(op, 1), g[0], ops::Neg(s, g[0]), out);
  return s.status();
}

// z = (x - y)^2: dz/dx = 2 (x - y), dz/dy = -2 (x - y).
absl::Status SquaredDifferenceGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpInput(op, 1);
  Output gx = ops::Mul(s, g[0], ops::Mul(s, ScalarConst(s, x.type(), 2), ops::Sub(s, x, y)));
  ReduceBinaryGrads(s, x, y, gx, ops::Neg(s, gx), out);
  return s.status();
}

absl::Status MulGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpInput(op, 1);
  ReduceBinaryGrads(s, x, y, ops::Mul(s, g[0], y), ops::Mul(s, x, g[0]), out);
  return s.status();
}

// z = x / y: dz/dx = 1 / y, dz/dy = -x / y^2 = -z / y.
absl::Status RealDivGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpInput(op, 1), z = OpOutput(op, 0);
  Output gx = ops::RealDiv(s, g[0], y);
  Output gy = ops::Neg(s, ops::RealDiv(s, ops::Mul(s, g[0], z), y));
  ReduceBinaryGrads(s, x, y, gx, gy, out);
  return s.status();
}

// z = x^y: dz/dx = y x^(y-1); dz/dy = z log(x), taken as 0 where x <= 0
// (TensorFlow's choice: the real power is not differentiable in y there).
absl::Status PowGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpInput(op, 1), z = OpOutput(op, 0);
  const DataType dt = x.type();
  Output gx = ops::Mul(s, g[0],
                       ops::Mul(s, y, ops::Pow(s, x, ops::Sub(s, y, ScalarConst(s, dt, 1)))));
  Output zero = ScalarConst(s, dt, 0);
  Output x_le_0 = ops::Equal(s, ops::Minimum(s, x, zero), x);
  Output log_x = ops::SelectV2(s, x_le_0, ops::ZerosLike(s, x), ops::Log(s, x));
  Output gy = ops::Mul(s, g[0], ops::Mul(s, z, log_x));
  ReduceBinaryGrads(s, x, y, gx, gy, out);
  return s.status();
}

// The gradient goes to x where x is the result (x >= y for Maximum, x <= y
// for Minimum; ties to x, as in TensorFlow) and to y elsewhere.
absl::Status MaxMinGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpInput(op, 1), z = OpOutput(op, 0);
  Output x_wins = ops::Equal(s, x, z);
  Output zeros = ops::ZerosLike(s, g[0]);
  ReduceBinaryGrads(s, x, y, ops::SelectV2(s, x_wins, g[0], zeros),
                    ops::SelectV2(s, x_wins, zeros, g[0]), out);
  return s.status();
}

// ---- Unary elementwise ------------------------------------------------------

absl::Status NegGrad(const Scope& s, const Node&, const OutputList& g, OutputList* out) {
  out->push_back(ops::Neg(s, g[0]));
  return s.status();
}

absl::Status SquareGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0);
  out->push_back(ops::Mul(s, g[0], ops::Mul(s, x, ScalarConst(s, x.type(), 2))));
  return s.status();
}

// y = sqrt(x): dy/dx = 0.5 / y.
absl::Status SqrtGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output y = OpOutput(op, 0);
  out->push_back(ops::RealDiv(s, ops::Mul(s, g[0], ScalarConst(s, y.type(), 0.5)), y));
  return s.status();
}

// y = x^-1/2: dy/dx = -0.5 x^-3/2 = -0.5 y^3.
absl::Status RsqrtGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output y = OpOutput(op, 0);
  Output y3 = ops::Mul(s, y, ops::Square(s, y));
  out->push_back(ops::Mul(s, g[0], ops::Mul(s, y3, ScalarConst(s, y.type(), -0.5))));
  return s.status();
}

absl::Status ExpGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::Mul(s, g[0], OpOutput(op, 0)));
  return s.status();
}

// d erf(x) / dx = 2 / sqrt(pi) exp(-x^2); erfc's is its negative.
template <bool kComplement>
absl::Status ErfGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0);
  const double scale = (kComplement ? -2.0 : 2.0) / std::sqrt(3.14159265358979323846);
  Output d = ops::Mul(s, ScalarConst(s, x.type(), scale), ops::Exp(s, ops::Neg(s, ops::Square(s, x))));
  out->push_back(ops::Mul(s, g[0], d));
  return s.status();
}

// ClipByValue: dt where lo <= t <= hi, zero elsewhere; each bound gets dy
// where t is beyond it (summed when the bound is a scalar), as TensorFlow.
absl::Status ClipByValueGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output t = OpInput(op, 0), lo = OpInput(op, 1), hi = OpInput(op, 2);
  Output zeros = ops::ZerosLike(s, g[0]);
  Output below = ops::Less(s, t, lo), above = ops::Greater(s, t, hi);
  out->push_back(ops::SelectV2(s, ops::LogicalOr(s, below, above), zeros, g[0]));
  out->push_back(grad::SumToShapeOf(s, ops::SelectV2(s, below, g[0], zeros), lo, {t.shape()}));
  out->push_back(grad::SumToShapeOf(s, ops::SelectV2(s, above, g[0], zeros), hi, {t.shape()}));
  return s.status();
}

// out[i] = sum of x[j] for j <= i: dx[j] = sum of dy[i] for i >= j, the
// cumulative sum of dy the other way (exclusive stays exclusive).
absl::Status CumsumGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  bool exclusive = false, reverse = false;
  STRATA_RETURN_IF_ERROR(GetAttr(op.attrs(), "exclusive", &exclusive));
  STRATA_RETURN_IF_ERROR(GetAttr(op.attrs(), "reverse", &reverse));
  out->push_back(ops::Cumsum(s, g[0], OpInput(op, 1), exclusive, !reverse));
  out->push_back(Output());
  return s.status();
}

absl::Status LogGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(ops::RealDiv(s, g[0], OpInput(op, 0)));
  return s.status();
}

// ---- Lists, products, selection, casts ----------------------------------------

absl::Status AddNGrad(const Scope&, const Node& op, const OutputList& g, OutputList* out) {
  for (int i = 0; i < op.num_inputs(); ++i) out->push_back(g[0]);
  return absl::OkStatus();
}

// For C = op(A) op(B), with op a transpose or not:
//   C = A B     : dA = dC B^T,     dB = A^T dC
//   C = A B^T   : dA = dC B,       dB = dC^T A
//   C = A^T B   : dA = B dC^T,     dB = A dC
//   C = A^T B^T : dA = B^T dC^T,   dB = dC^T A^T
absl::Status MatMulGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  bool ta = false, tb = false;
  auto st = GetAttr(op.attrs(), "transpose_a", &ta);
  if (st.ok()) st = GetAttr(op.attrs(), "transpose_b", &tb);
  if (!st.ok()) return st;
  Output a = OpInput(op, 0), b = OpInput(op, 1), dc = g[0];
  auto mm = [&](Output x, Output y, bool tx, bool ty) {
    return ops::MatMul(s, x, y, ops::MatMul::Attrs().TransposeA(tx).TransposeB(ty));
  };
  if (!ta && !tb) {
    out->push_back(mm(dc, b, false, true));
    out->push_back(mm(a, dc, true, false));
  } else if (!ta && tb) {
    out->push_back(mm(dc, b, false, false));
    out->push_back(mm(dc, a, true, false));
  } else if (ta && !tb) {
    out->push_back(mm(b, dc, false, true));
    out->push_back(mm(a, dc, false, false));
  } else {
    out->push_back(mm(b, dc, true, true));
    out->push_back(mm(dc, a, true, true));
  }
  return s.status();
}

// BatchMatMulV2: MatMul's gradients per batch, then summed over the batch
// dims an operand was broadcast along.
absl::Status BatchMatMulGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  bool ax = false, ay = false;
  auto st = GetAttr(op.attrs(), "adj_x", &ax);
  if (st.ok()) st = GetAttr(op.attrs(), "adj_y", &ay);
  if (!st.ok()) return st;
  Output x = OpInput(op, 0), y = OpInput(op, 1), dz = g[0];
  auto bmm = [&](Output a, Output b, bool ta, bool tb) {
    return ops::BatchMatMulV2(s, a, b, ops::BatchMatMulV2::Attrs().AdjX(ta).AdjY(tb));
  };
  Output gx, gy;
  if (!ax && !ay) {
    gx = bmm(dz, y, false, true);
    gy = bmm(x, dz, true, false);
  } else if (!ax && ay) {
    gx = bmm(dz, y, false, false);
    gy = bmm(dz, x, true, false);
  } else if (ax && !ay) {
    gx = bmm(y, dz, false, true);
    gy = bmm(x, dz, false, false);
  } else {
    gx = bmm(y, dz, true, true);
    gy = bmm(dz, x, true, true);
  }
  // The other operand's batch dims with this one's matrix dims: what the
  // gradient (shaped like the broadcast result's batch) reduces against.
  auto others = [](const PartialTensorShape& other, const PartialTensorShape& self) {
    if (other.unknown_rank() || self.unknown_rank() || other.dims() < 2 || self.dims() < 2) {
      return PartialTensorShape::UnknownRank();
    }
    std::vector<int64_t> d(other.dim_sizes().begin(), other.dim_sizes().end() - 2);
    d.push_back(self.dim_size(self.dims() - 2));
    d.push_back(self.dim_size(self.dims() - 1));
    return PartialTensorShape(d);
  };
  out->push_back(grad::SumToShapeOf(s, gx, x, {others(y.shape(), x.shape())}));
  out->push_back(grad::SumToShapeOf(s, gy, y, {others(x.shape(), y.shape())}));
  return s.status();
}

// Select (and SelectV2, which also broadcasts): the gradient goes to t where
// the condition holds and to e elsewhere.
absl::Status SelectGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output c = OpInput(op, 0);
  Output zeros = ops::ZerosLike(s, g[0]);
  out->push_back(Output());
  out->push_back(ops::Select(s, c, g[0], zeros));
  out->push_back(ops::Select(s, c, zeros, g[0]));
  return s.status();
}

absl::Status SelectV2Grad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output c = OpInput(op, 0), t = OpInput(op, 1), e = OpInput(op, 2);
  Output zeros = ops::ZerosLike(s, g[0]);
  out->push_back(Output());
  out->push_back(grad::SumToShapeOf(s, ops::SelectV2(s, c, g[0], zeros), t,
                                    {c.shape(), e.shape()}));
  out->push_back(grad::SumToShapeOf(s, ops::SelectV2(s, c, zeros, g[0]), e,
                                    {c.shape(), t.shape()}));
  return s.status();
}

// Only between differentiable dtypes (float <-> double); a cast to or from
// an integer or bool carries no gradient.
absl::Status CastGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  const DataType src = op.input_type(0), dst = op.output_type(0);
  if (IsDifferentiableType(src) && IsDifferentiableType(dst)) {
    out->push_back(src == dst ? g[0] : ops::Cast(s, g[0], src));
  } else {
    out->push_back(Output());
  }
  return s.status();
}

// ---- Reductions -------------------------------------------------------------

// Sum: every input element contributes once, so the gradient is dL/dy
// broadcast back over the reduced dims.
Output SumGradOf(const Scope& s, const Node& op, const Output& g) {
  Output x = OpInput(op, 0), axes = OpInput(op, 1);
  Output kept = grad::ReshapeToKeepDims(s, g, x, axes);
  const PartialTensorShape ks = kept.shape(), xs = x.shape();
  if (ks.IsFullyDefined() && xs.IsFullyDefined() && ks == xs) return kept;
  return ops::BroadcastTo(s, kept, grad::ShapeOf(s, x));
}

absl::Status SumGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  out->push_back(SumGradOf(s, op, g[0]));
  out->push_back(Output());
  return s.status();
}

// Mean = Sum / n with n = |x| / |y| elements per output; dividing dL/dy
// before broadcasting touches |y| elements instead of |x|.
absl::Status MeanGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), y = OpOutput(op, 0);
  const DataType dt = x.type();
  const PartialTensorShape xs = x.shape(), ys = y.shape();
  Output scaled;
  if (xs.IsFullyDefined() && ys.IsFullyDefined()) {
    int64_t nx = 1, ny = 1;
    for (int64_t d : xs.dim_sizes()) nx *= d;
    for (int64_t d : ys.dim_sizes()) ny *= d;
    const double inv = nx == 0 ? 0.0 : static_cast<double>(ny) / static_cast<double>(nx);
    scaled = ops::Mul(s, g[0], ScalarConst(s, dt, inv));
  } else if (ys.IsFullyDefined()) {
    // The common case of a mean over an unknown batch: |y| is known.
    int64_t ny = 1;
    for (int64_t d : ys.dim_sizes()) ny *= d;
    Output nx = ops::Cast(s, ops::Size(s, x), dt);
    scaled = ops::Mul(s, ops::RealDiv(s, g[0], nx), ScalarConst(s, dt, static_cast<double>(ny)));
  } else {
    Output nx = ops::Cast(s, ops::Size(s, x), dt);
    Output ny = ops::Maximum(s, ops::Cast(s, ops::Size(s, y), dt), ScalarConst(s, dt, 1));
    scaled = ops::RealDiv(s, g[0], ops::RealDiv(s, nx, ny));
  }
  out->push_back(SumGradOf(s, op, scaled));
  out->push_back(Output());
  return s.status();
}

// Max/Min: the gradient is shared equally among the elements equal to the
// result (TensorFlow's rule for ties).
absl::Status MaxMinReductionGrad(const Scope& s, const Node& op, const OutputList& g,
                                 OutputList* out) {
  Output x = OpInput(op, 0), axes = OpInput(op, 1);
  Output y = grad::ReshapeToKeepDims(s, OpOutput(op, 0), x, axes);
  Output dy = grad::ReshapeToKeepDims(s, g[0], x, axes);
  Output hit = ops::Cast(s, ops::Equal(s, y, x), x.type());
  Output count = ops::Sum(s, hit, axes, ops::ReductionAttrs().KeepDims(true));
  out->push_back(ops::Mul(s, ops::RealDiv(s, hit, count), dy));
  out->push_back(Output());
  return s.status();
}

// dx[i] = dy * the product of the other reduced elements, computed without
// dividing by x (zeros are fine): the reduced dims are moved to the front
// and flattened to [r, rest]; exclusive running products from both ends
// multiply to each element's "all but me" product (TensorFlow's method).
absl::Status ProdGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  Output x = OpInput(op, 0), axes = OpInput(op, 1);
  const std::optional<std::vector<int64_t>> a = grad::ConstIntValues(axes);
  const PartialTensorShape xs = x.shape();
  Output perm, inverse, num_reduced;  // num_reduced: a [1] vector
  if (a && !xs.unknown_rank()) {
    const int rank = xs.dims();
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t v : *a) {
      if (v < -rank || v >= rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("Prod node '", op.name(), "' axis ", v, " is out of range for rank ", rank));
      }
      reduced[static_cast<size_t>(v < 0 ? v + rank : v)] = true;
    }
    std::vector<int64_t> p, inv(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      if (reduced[d]) p.push_back(d);
    }
    const int64_t n = static_cast<int64_t>(p.size());
    for (int d = 0; d < rank; ++d) {
      if (!reduced[d]) p.push_back(d);
    }
    for (int i = 0; i < rank; ++i) inv[static_cast<size_t>(p[i])] = i;
    perm = grad::IntVector(s, p);
    inverse = grad::IntVector(s, inv);
    num_reduced = grad::IntVector(s, {n});
  } else {
    // At run time: dim d goes to position (reduced dims before it) if
    // reduced, else (all reduced) + (kept dims before it).
    Output zero = ops::Const(s, 0);
    Output rank = ops::Size(s, ops::Shape(s, x));
    Output ax = ops::Reshape(s, axes.type() == DT_INT32 ? axes : ops::Cast(s, axes, DT_INT32), grad::IntVector(s, {1, -1}));
    ax = ops::SelectV2(s, ops::Less(s, ax, zero), ops::Add(s, ax, rank), ax);
    Output dims = ops::Reshape(s, ops::Range(s, zero, rank, ops::Const(s, 1)), grad::IntVector(s, {-1, 1}));
    Output hits = ops::Sum(s, ops::Cast(s, ops::Equal(s, dims, ax), DT_INT32), ops::Const(s, 1));
    Output reduced = ops::Minimum(s, hits, ops::Const(s, 1));
    Output kept = ops::Sub(s, ops::Const(s, 1), reduced);
    Output n = ops::Sum(s, reduced, zero);
    inverse = ops::SelectV2(s, ops::Cast(s, reduced, DT_BOOL), ops::Cumsum(s, reduced, zero, /*exclusive=*/true),
                            ops::Add(s, n, ops::Cumsum(s, kept, zero, /*exclusive=*/true)));
    perm = ops::InvertPermutation(s, inverse);
    num_reduced = ops::Reshape(s, n, grad::IntVector(s, {1}));
  }
  Output permuted = ops::Transpose(s, x, perm);
  Output pshape = ops::Shape(s, permuted);
  Output r = ops::Prod(s, ops::Slice(s, pshape, grad::IntVector(s, {0}), num_reduced), ops::Const(s, 0),
                       ops::ReductionAttrs().KeepDims(true));
  Output flat = ops::Reshape(s, permuted, ops::Concat(s, {r, grad::IntVector(s, {-1})}, ops::Const(s, 0)));
  Output others = ops::Mul(s, ops::Cumprod(s, flat, ops::Const(s, 0), /*exclusive=*/true),
                           ops::Cumprod(s, flat, ops::Const(s, 0), /*exclusive=*/true, /*reverse=*/true));
  Output back = ops::Transpose(s, ops::Reshape(s, others, pshape), inverse);
  out->push_back(ops::Mul(s, back, grad::ReshapeToKeepDims(s, g[0], x, axes)));
  out->push_back(Output());
  return s.status();
}

// out = cumprod(x): dx = cumsum(out * dy) the other way, divided by x
// (TensorFlow's formula; like TensorFlow's, undefined where x is 0).
absl::Status CumprodGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  bool exclusive = false, reverse = false;
  STRATA_RETURN_IF_ERROR(GetAttr(op.attrs(), "exclusive", &exclusive));
  STRATA_RETURN_IF_ERROR(GetAttr(op.attrs(), "reverse", &reverse));
  Output y = OpOutput(op, 0);
  Output summed = ops::Cumsum(s, ops::Mul(s, y, g[0]), OpInput(op, 1), exclusive, !reverse);
  out->push_back(ops::RealDiv(s, summed, OpInput(op, 0)));
  out->push_back(Output());
  return s.status();
}

// Einsum's gradient for operand i is an Einsum of dy with the other
// operand, output operand i's term without the labels only it had (those it
// summed), which come back as size-1 dims broadcast to x_i's shape. When both
// operands have an ellipsis it may have broadcast: dx_i is summed back to
// x_i's shape (built for an ellipsis that leads the term).
absl::Status EinsumGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  std::string equation;
  STRATA_RETURN_IF_ERROR(GetAttr(op.attrs(), "equation", &equation));
  STRATA_ASSIGN_OR_RETURN(EinsumTerms t, SplitEinsum(equation, op.num_inputs()));
  const int n = op.num_inputs();
  const bool both_ellipsis = n == 2 && t.inputs[0].find("...") != std::string::npos &&
                             t.inputs[1].find("...") != std::string::npos;
  for (int i = 0; i < n; ++i) {
    const std::string& term = t.inputs[i];
    const std::string other = n == 2 ? t.inputs[1 - i] : "";
    std::string kept;
    std::vector<size_t> dropped;  // positions in `term` of the summed labels
    for (size_t k = 0; k < term.size(); ++k) {
      const char c = term[k];
      if (c == '.' || t.output.find(c) != std::string::npos || other.find(c) != std::string::npos) {
        kept.push_back(c);
      } else {
        dropped.push_back(k);
      }
    }
    Output x = OpInput(op, i), dx;
    if (n == 1) {
      dx = ops::Einsum(s, {g[0]}, t.output + "->" + kept);
    } else if (i == 0) {
      dx = ops::Einsum(s, {g[0], OpInput(op, 1)}, t.output + "," + other + "->" + kept);
    } else {
      dx = ops::Einsum(s, {OpInput(op, 0), g[0]}, other + "," + t.output + "->" + kept);
    }
    if (!dropped.empty()) {
      // Before the ellipsis, positions count from the start; after it, from
      // the end (the ellipsis' length may be unknown here).
      const size_t dots = term.find("...");
      for (size_t k : dropped) {
        if (dots == std::string::npos || k < dots) dx = ops::ExpandDims(s, dx, ops::Const(s, static_cast<int32_t>(k)));
      }
      for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) {
        if (dots != std::string::npos && *it > dots) {
          dx = ops::ExpandDims(s, dx, ops::Const(s, static_cast<int32_t>(*it) - static_cast<int32_t>(term.size())));
        }
      }
      dx = ops::BroadcastTo(s, dx, ops::Shape(s, x));
    }
    if (both_ellipsis) {
      if (term.rfind("...", 0) != 0) {
        return absl::UnimplementedError(absl::StrCat("the gradient of Einsum node '", op.name(), "' ('", equation,
                                                     "') is only built when an ellipsis in both operands leads"));
      }
      // dx has the broadcast ellipsis dims; sum those x had as 1 or lacked.
      Output x_shape = ops::Shape(s, x);
      ops::BroadcastGradientArgsOutputs args = ops::BroadcastGradientArgs(s, x_shape, ops::Shape(s, dx));
      dx = ops::Reshape(s, ops::Sum(s, dx, args.r0), x_shape);
    }
    out->push_back(dx);
  }
  return s.status();
}

STRATA_REGISTER_GRADIENT("Add", AddGrad);
STRATA_REGISTER_GRADIENT("AddV2", AddGrad);
STRATA_REGISTER_GRADIENT("Sub", SubGrad);
STRATA_REGISTER_GRADIENT("SquaredDifference", SquaredDifferenceGrad);
STRATA_REGISTER_GRADIENT("Mul", MulGrad);
STRATA_REGISTER_GRADIENT("RealDiv", RealDivGrad);
STRATA_REGISTER_GRADIENT("Pow", PowGrad);
STRATA_REGISTER_GRADIENT("Maximum", MaxMinGrad);
STRATA_REGISTER_GRADIENT("Minimum", MaxMinGrad);
STRATA_REGISTER_GRADIENT("Neg", NegGrad);
STRATA_REGISTER_GRADIENT("Square", SquareGrad);
STRATA_REGISTER_GRADIENT("Sqrt", SqrtGrad);
STRATA_REGISTER_GRADIENT("Rsqrt", RsqrtGrad);
STRATA_REGISTER_GRADIENT("Exp", ExpGrad);
STRATA_REGISTER_GRADIENT("Erf", ErfGrad<false>);
STRATA_REGISTER_GRADIENT("Erfc", ErfGrad<true>);
STRATA_REGISTER_GRADIENT("Log", LogGrad);
STRATA_REGISTER_GRADIENT("ClipByValue", ClipByValueGrad);
STRATA_REGISTER_GRADIENT("Cumsum", CumsumGrad);
STRATA_REGISTER_GRADIENT("AddN", AddNGrad);
STRATA_REGISTER_GRADIENT("MatMul", MatMulGrad);
STRATA_REGISTER_GRADIENT("BatchMatMulV2", BatchMatMulGrad);
STRATA_REGISTER_GRADIENT("Select", SelectGrad);
STRATA_REGISTER_GRADIENT("SelectV2", SelectV2Grad);
STRATA_REGISTER_GRADIENT("Cast", CastGrad);
STRATA_REGISTER_GRADIENT("Sum", SumGrad);
STRATA_REGISTER_GRADIENT("Mean", MeanGrad);
STRATA_REGISTER_GRADIENT("Max", MaxMinReductionGrad);
STRATA_REGISTER_GRADIENT("Min", MaxMinReductionGrad);
STRATA_REGISTER_GRADIENT("Prod", ProdGrad);
STRATA_REGISTER_GRADIENT("Einsum", EinsumGrad);
STRATA_REGISTER_GRADIENT("Cumprod", CumprodGrad);

STRATA_NO_GRADIENT("ArgMax");
STRATA_NO_GRADIENT("Floor");
STRATA_NO_GRADIENT("Equal");
STRATA_NO_GRADIENT("NotEqual");
STRATA_NO_GRADIENT("Less");
STRATA_NO_GRADIENT("LessEqual");
STRATA_NO_GRADIENT("Greater");
STRATA_NO_GRADIENT("GreaterEqual");
STRATA_NO_GRADIENT("LogicalAnd");
STRATA_NO_GRADIENT("LogicalOr");
STRATA_NO_GRADIENT("LogicalNot");

}  // namespace
}  // namespace strata
