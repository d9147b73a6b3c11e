// The numeric check of every registered gradient. Each case builds a tiny
// graph (double placeholders -> the op -> outputs), reduces the outputs to a
// scalar with random weights (so every output element's gradient matters and
// no symmetry hides a mistake), and compares AddSymbolicGradients with
// central finite differences (testing::MaxGradientError).
//
// Every case runs twice: with placeholders of the inputs' full shapes (the
// gradient functions' static paths: constant shapes and axes) and with
// unknown-rank placeholders (their run-time paths: Shape,
// BroadcastGradientArgs, ReducedShape, ConcatOffset, ...).
//
// EveryRegisteredGradientHasACase fails when an op has a registered gradient
// and no case here: a new gradient comes with its check.
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/gradients/grad_ops.h"
#include "graph/gradients/grad_registry.h"
#include "graph/gradients/gradient_checker.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/batch_norm.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/einsum.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/ops/strided_slice.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace {

using BuildFn = std::function<OutputList(const Scope&, const OutputList&)>;

struct GradCase {
  std::string op;    // the op whose gradient this case checks
  std::string name;  // what is special about it
  std::vector<Tensor> inputs;
  BuildFn build;
  testing::GradientCheckOptions options = {};
};

// ---- Input values -------------------------------------------------------------

std::mt19937& Rng() {
  static std::mt19937 rng(20240611);
  return rng;
}

// Uniform in [lo, hi].
Tensor Uniform(const TensorShape& shape, double lo, double hi) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> d(lo, hi);
  for (double& v : t.span<double>()) v = d(Rng());
  return t;
}

// Uniform magnitude in [lo, hi] with a random sign: away from the kinks of
// Relu/Maximum and from zeros of denominators.
Tensor AwayFromZero(const TensorShape& shape, double lo = 0.2, double hi = 1.5) {
  Tensor t = Uniform(shape, lo, hi);
  std::bernoulli_distribution sign(0.5);
  for (double& v : t.span<double>()) v = sign(Rng()) ? v : -v;
  return t;
}

Tensor U(const TensorShape& shape) { return Uniform(shape, -1.5, 1.5); }

Output I32(const Scope& s, std::initializer_list<int32_t> v) { return ops::Const<int32_t>(s, v); }

// ---- Cases ------------------------------------------------------------------------

BuildFn Binary(Output (*f)(const Scope&, Output, Output)) {
  return [f](const Scope& s, const OutputList& x) -> OutputList { return {f(s, x[0], x[1])}; };
}
BuildFn Unary(Output (*f)(const Scope&, Output)) {
  return [f](const Scope& s, const OutputList& x) -> OutputList { return {f(s, x[0])}; };
}
BuildFn Reduction(Output (*f)(const Scope&, Output, Output, const ops::ReductionAttrs&),
                  std::vector<int32_t> axes, bool keep_dims) {
  return [=](const Scope& s, const OutputList& x) -> OutputList {
    return {f(s, x[0], ops::Const<int32_t>(s, axes, TensorShape{int64_t(axes.size())}),
              ops::ReductionAttrs().KeepDims(keep_dims))};
  };
}
BuildFn MatMulCase(bool ta, bool tb) {
  return [=](const Scope& s, const OutputList& x) -> OutputList {
    return {ops::MatMul(s, x[0], x[1], ops::MatMul::Attrs().TransposeA(ta).TransposeB(tb))};
  };
}

std::vector<GradCase> MathCases() {
  std::vector<GradCase> c;
  c.push_back({"AddV2", "same shape", {U({2, 3}), U({2, 3})}, Binary(ops::AddV2)});
  c.push_back({"AddV2", "row vector broadcast", {U({2, 3}), U({3})}, Binary(ops::AddV2)});
  c.push_back({"AddV2", "both broadcast", {U({2, 1}), U({1, 3})}, Binary(ops::AddV2)});
  c.push_back({"Add", "scalar broadcast", {U({2, 3}), U({})}, Binary(ops::Add)});
  c.push_back({"Sub", "column broadcast", {U({2, 3}), U({2, 1})}, Binary(ops::Sub)});
  c.push_back({"Sub", "rank 3 vs 2", {U({2, 1}), U({3, 1, 4})}, Binary(ops::Sub)});
  // Duplicated indices: their rows' gradients add up.
  c.push_back({"GatherV2", "duplicates", {U({5, 3})}, [](const Scope& s, const OutputList& in) {
                  return OutputList{ops::GatherV2(s, in[0], ops::Const<int32_t>(s, {0, 2, 2, 4}, TensorShape{2, 2}),
                                                  ops::Const(s, 0))};
                }});
  c.push_back({"UnsortedSegmentSum", "", {U({4, 3})}, [](const Scope& s, const OutputList& in) {
                  return OutputList{ops::UnsortedSegmentSum(s, in[0], ops::Const<int32_t>(s, {0, 2, 2, 1}),
                                                            ops::Const(s, 3))};
                }});
  c.push_back({"ExpandDims", "", {U({2, 3})}, [](const Scope& s, const OutputList& in) {
                  return OutputList{ops::ExpandDims(s, in[0], ops::Const(s, 1))};
                }});
  c.push_back({"Squeeze", "", {U({2, 1, 3, 1})}, [](const Scope& s, const OutputList& in) {
                  return OutputList{ops::Squeeze(s, in[0], {1})};
                }});
  c.push_back({"SquaredDifference", "", {U({2, 3}), U({2, 3})}, Binary(ops::SquaredDifference)});
  c.push_back({"SquaredDifference", "row broadcast", {U({2, 3}), U({1, 3})}, Binary(ops::SquaredDifference)});
  c.push_back({"Mul", "row vector broadcast", {U({2, 3}), U({3})}, Binary(ops::Mul)});
  c.push_back({"Mul", "x used twice: x * x + x", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::AddV2(s, ops::Mul(s, x[0], x[0]), x[0])};
               }});
  c.push_back({"RealDiv", "broadcast", {U({2, 3}), AwayFromZero({3}, 0.5, 2)},
               Binary(ops::RealDiv)});
  c.push_back({"Pow", "positive base", {Uniform({2, 3}, 0.5, 2), Uniform({3}, 0.5, 2.5)},
               Binary(ops::Pow)});
  c.push_back({"Maximum", "broadcast", {AwayFromZero({2, 3}), AwayFromZero({3})},
               Binary(ops::Maximum)});
  c.push_back({"Minimum", "column broadcast", {AwayFromZero({2, 3}), AwayFromZero({2, 1})},
               Binary(ops::Minimum)});
  c.push_back({"Neg", "", {U({2, 3})}, Unary(ops::Neg)});
  c.push_back({"Square", "", {U({2, 3})}, Unary(ops::Square)});
  c.push_back({"Sqrt", "", {Uniform({2, 3}, 0.5, 2)}, Unary(ops::Sqrt)});
  c.push_back({"Rsqrt", "", {Uniform({2, 3}, 0.5, 2)}, Unary(ops::Rsqrt)});
  c.push_back({"Exp", "", {U({2, 3})}, Unary(ops::Exp)});
  c.push_back({"Erf", "", {U({2, 3})}, Unary(ops::Erf)});
  c.push_back({"Erfc", "", {U({2, 3})}, Unary(ops::Erfc)});
  c.push_back({"Log", "", {Uniform({2, 3}, 0.5, 2)}, Unary(ops::Log)});
  c.push_back({"AddN", "three terms", {U({2, 2}), U({2, 2}), U({2, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::AddN(s, x)};
               }});
  c.push_back({"MatMul", "a b", {U({2, 3}), U({3, 4})}, MatMulCase(false, false)});
  c.push_back({"MatMul", "a b^T", {U({2, 3}), U({4, 3})}, MatMulCase(false, true)});
  c.push_back({"MatMul", "a^T b", {U({3, 2}), U({3, 4})}, MatMulCase(true, false)});
  c.push_back({"MatMul", "a^T b^T", {U({3, 2}), U({4, 3})}, MatMulCase(true, true)});
  c.push_back({"Sum", "axis 1", {U({2, 3})}, Reduction(ops::Sum, {1}, false)});
  c.push_back({"Sum", "axis -1 keep_dims", {U({2, 3})}, Reduction(ops::Sum, {-1}, true)});
  c.push_back({"Sum", "axes 0 and 2 of rank 3", {U({2, 3, 2})}, Reduction(ops::Sum, {0, 2}, false)});
  c.push_back({"Sum", "no axes", {U({2, 3})}, Reduction(ops::Sum, {}, false)});
  c.push_back({"Sum", "scalar axis", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Sum(s, x[0], ops::Const(s, int32_t{0}))};
               }});
  c.push_back({"Mean", "axis 0", {U({3, 2})}, Reduction(ops::Mean, {0}, false)});
  c.push_back({"Mean", "axes -1 and 0 keep_dims", {U({2, 3, 2})},
               Reduction(ops::Mean, {-1, 0}, true)});
  c.push_back({"Max", "axis 1", {U({2, 4})}, Reduction(ops::Max, {1}, false)});
  c.push_back({"Max", "all axes", {U({2, 3})}, Reduction(ops::Max, {0, 1}, false)});
  c.push_back({"Min", "axis -1 keep_dims", {U({3, 2, 3})}, Reduction(ops::Min, {-1}, true)});
  c.push_back({"Select", "elementwise condition", {U({2, 3}), U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output c = ops::Const(s, Tensor::FromVector<bool>({true, false, false, true, true,
                                                                     false}, TensorShape{2, 3}));
                 return {ops::Select(s, c, x[0], x[1])};
               }});
  c.push_back({"Select", "row condition", {U({2, 3}), U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output c = ops::Const(s, Tensor::FromVector<bool>({false, true}));
                 return {ops::Select(s, c, x[0], x[1])};
               }});
  c.push_back({"SelectV2", "broadcast condition and operands", {U({2, 3}), U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output c = ops::Const(s, Tensor::FromVector<bool>({true, false},
                                                                   TensorShape{2, 1}));
                 return {ops::SelectV2(s, c, x[0], x[1])};
               }});
  c.push_back({"BatchMatMulV2", "same batch", {U({2, 3, 4}), U({2, 4, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList { return {ops::BatchMatMulV2(s, x[0], x[1])}; }});
  c.push_back({"BatchMatMulV2", "broadcast batch, adj_x and adj_y", {U({2, 1, 4, 3}), U({3, 2, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BatchMatMulV2(s, x[0], x[1], ops::BatchMatMulV2::Attrs().AdjX(true).AdjY(true))};
               }});
  c.push_back({"BatchMatMulV2", "one x for every batch, adj_y", {U({3, 4}), U({2, 2, 5, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BatchMatMulV2(s, x[0], x[1], ops::BatchMatMulV2::Attrs().AdjY(true))};
               }});
  // Through float: the float rounding of x (about 6e-8 relative) limits the
  // difference quotient to about 1e-5, hence the larger step and tolerance.
  GradCase cast{"Cast", "double -> float -> double", {U({2, 3})},
                [](const Scope& s, const OutputList& x) -> OutputList {
                  Output f = ops::Cast(s, x[0], DT_FLOAT);
                  return {ops::Cast(s, ops::Mul(s, f, f), DT_DOUBLE)};
                }};
  cast.options.step = 1e-2;
  cast.options.tolerance = 1e-3;
  c.push_back(cast);
  return c;
}

std::vector<GradCase> ArrayCases() {
  std::vector<GradCase> c;
  c.push_back({"Identity", "", {U({2, 3})}, Unary(ops::Identity)});
  c.push_back({"Reshape", "with -1", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Reshape(s, x[0], I32(s, {3, -1}))};
               }});
  c.push_back({"Transpose", "rank 3", {U({2, 3, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Transpose(s, x[0], I32(s, {2, 0, 1}))};
               }});
  c.push_back({"Transpose", "perm known only at run time", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Transpose(s, x[0], ops::Identity(s, I32(s, {1, 0})))};
               }});
  c.push_back({"ConcatV2", "axis 0", {U({2, 3}), U({1, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Concat(s, x, ops::Const(s, int32_t{0}))};
               }});
  c.push_back({"ConcatV2", "three inputs, axis -1", {U({2, 1}), U({2, 3}), U({2, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Concat(s, x, ops::Const(s, int32_t{-1}))};
               }});
  c.push_back({"Slice", "size -1", {U({3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Slice(s, x[0], I32(s, {1, 1}), I32(s, {2, -1}))};
               }});
  c.push_back({"Slice", "int64 indices, rank 3", {U({2, 3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Slice(s, x[0], ops::Const<int64_t>(s, {0, 1, 2}),
                                    ops::Const<int64_t>(s, {2, 1, 2}))};
               }});
  c.push_back({"StridedSlice", "x[1:, ::-2]", {U({3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::StridedSlice(s, x[0], I32(s, {1, 0}), I32(s, {0, 0}), I32(s, {1, -2}),
                                           {.begin_mask = 2, .end_mask = 3})};
               }});
  c.push_back({"StridedSlice", "x[tf.newaxis, ..., 1], int64 spec", {U({2, 3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::StridedSlice(s, x[0], ops::Const<int64_t>(s, {0, 0, 1}), ops::Const<int64_t>(s, {0, 0, 2}),
                                           ops::Const<int64_t>(s, {1, 1, 1}),
                                           {.ellipsis_mask = 2, .new_axis_mask = 1, .shrink_axis_mask = 4})};
               }});
  c.push_back({"StridedSliceGrad", "dy of x[::2, 1:3]", {U({2, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::StridedSliceGrad(s, I32(s, {3, 4}), I32(s, {0, 1}), I32(s, {0, 3}), I32(s, {2, 1}), x[0],
                                               {.begin_mask = 1, .end_mask = 1})};
               }});
  c.push_back({"MatrixBandPart", "causal (0, -1), batch of 2", {U({2, 3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::MatrixBandPart(s, x[0], ops::Const<int64_t>(s, 0), ops::Const<int64_t>(s, -1))};
               }});
  for (const auto& [eq, shapes] : std::vector<std::pair<std::string, std::vector<TensorShape>>>{
           {"abc,cde->abde", {{2, 3, 2}, {2, 2, 3}}},       // Keras EinsumDense
           {"aecd,abcd->acbe", {{2, 3, 2, 2}, {2, 2, 2, 2}}},  // attention scores
           {"...b,bc->...c", {{2, 2, 3}, {3, 2}}},
           {"ab,bc->a", {{2, 3}, {3, 2}}},                  // c summed in the second operand
           {"ab,c->ac", {{2, 3}, {2}}},                     // b summed in the first
           {"...ab,...b->...a", {{2, 1, 2, 3}, {2, 3}}},   // broadcast ellipsis
           {"ijk->kj", {{2, 3, 2}}},                        // one operand: sum and permute
       }) {
    std::vector<Tensor> in;
    for (const TensorShape& sh : shapes) in.push_back(U(sh));
    c.push_back({"Einsum", eq, in, [eq = eq](const Scope& s, const OutputList& x) -> OutputList {
                   return {ops::Einsum(s, x, eq)};
                 }});
  }
  c.push_back({"Prod", "axis 1 with a zero in a row", {[] {
                 Tensor t = Uniform({2, 3, 2}, 0.5, 1.5);
                 t.data<double>()[3] = 0;  // x[0, 1, 1]
                 return t;
               }()},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Prod(s, x[0], I32(s, {1}))};
               }});
  c.push_back({"Prod", "axes 0 and 2, keep_dims", {Uniform({2, 3, 2}, 0.5, 1.5)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Prod(s, x[0], I32(s, {0, -1}), ops::ReductionAttrs().KeepDims(true))};
               }});
  c.push_back({"Cumprod", "axis 1, exclusive", {Uniform({2, 4}, 0.5, 1.5)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Cumprod(s, x[0], ops::Const(s, 1), /*exclusive=*/true)};
               }});
  c.push_back({"Cumprod", "axis 0, reverse", {Uniform({3, 2}, 0.5, 1.5)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Cumprod(s, x[0], ops::Const(s, 0), /*exclusive=*/false, /*reverse=*/true)};
               }});
  return c;
}

// Stacking, filling, broadcasting, tiling and splitting.
std::vector<GradCase> StackAndSplitCases() {
  std::vector<GradCase> c;
  c.push_back({"Pack", "axis 0", {U({2, 3}), U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Stack(s, x, 0)};
               }});
  c.push_back({"Pack", "axis -1", {U({2, 3}), U({2, 3}), U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Stack(s, x, -1)};
               }});
  c.push_back({"Fill", "scalar value", {U({})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Fill(s, I32(s, {2, 3}), x[0])};
               }});
  c.push_back({"BroadcastTo", "vector to matrix", {U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BroadcastTo(s, x[0], I32(s, {2, 3}))};
               }});
  c.push_back({"BroadcastTo", "column to rank 3", {U({2, 1})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BroadcastTo(s, x[0], I32(s, {2, 2, 3}))};
               }});
  c.push_back({"Pad", "both sides", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Pad(s, x[0], ops::Const<int32_t>(s, {1, 0, 0, 2}, TensorShape{2, 2}))};
               }});
  // t away from the bounds +-0.7 (no kink within the finite differences).
  auto clip_t = [] {
    Tensor t(DT_DOUBLE, TensorShape{2, 3});
    const double v[] = {-1.2, -0.3, 0.1, 0.5, 0.9, 1.4};
    for (int i = 0; i < 6; ++i) t.data<double>()[i] = v[i];
    return t;
  };
  c.push_back({"ClipByValue", "scalar bounds", {clip_t(), Tensor::Scalar<double>(-0.7), Tensor::Scalar<double>(0.7)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::ClipByValue(s, x[0], x[1], x[2])};
               }});
  c.push_back({"ClipByValue", "bounds of t's shape", {clip_t(), Uniform({2, 3}, -1.0, -0.8), Uniform({2, 3}, 0.6, 0.8)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::ClipByValue(s, x[0], x[1], x[2])};
               }});
  c.push_back({"Cumsum", "axis 1", {U({2, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Cumsum(s, x[0], ops::Const(s, 1))};
               }});
  c.push_back({"Cumsum", "axis 0, exclusive, reverse", {U({3, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Cumsum(s, x[0], ops::Const(s, 0), /*exclusive=*/true, /*reverse=*/true)};
               }});
  c.push_back({"Tile", "rank 2", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Tile(s, x[0], ops::Const<int32_t>(s, {2, 3}))};
               }});
  c.push_back({"Tile", "int64 multiples, rank 3, a 1", {U({2, 1, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Tile(s, x[0], ops::Const<int64_t>(s, {1, 3, 2}))};
               }});
  c.push_back({"Split", "axis 1, a part unused", {U({2, 6})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 OutputList parts = ops::Split(s, ops::Const(s, 1), x[0], 3);
                 return {parts[0], parts[2]};
               }});
  c.push_back({"SplitV", "axis 0, sizes 1 and -1", {U({4, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return ops::SplitV(s, x[0], ops::Const<int64_t>(s, {1, -1}), ops::Const(s, 0), 2);
               }});
  c.push_back({"DynamicPartition",
               "rows of a matrix",
               {U({5, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return ops::DynamicPartition(s, x[0], I32(s, {0, 2, 0, 1, 2}), 3);
               }});
  // Partition 1 unused (no gradient: zeros), partition 2 empty.
  c.push_back({"DynamicPartition",
               "rank-2 partitions, an unused and an empty partition",
               {U({2, 3, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output p = ops::Const<int32_t>(s, {1, 0, 1, 3, 1, 0}, TensorShape{2, 3});
                 OutputList parts = ops::DynamicPartition(s, x[0], p, 4);
                 return {parts[0], parts[2], parts[3]};
               }});
  // No index twice (an overwritten slice's true gradient is zero, which the
  // TensorFlow-style gradient does not give); row 2 is no index's.
  c.push_back({"DynamicStitch",
               "scalar, vector and matrix indices",
               {U({3}), U({2, 3}), U({2, 2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 OutputList indices = {ops::Const(s, int32_t{6}), I32(s, {0, 4}),
                                       ops::Const<int32_t>(s, {5, 1, 3, 7}, TensorShape{2, 2})};
                 return {ops::DynamicStitch(s, indices, x)};
               }});
  c.push_back({"Unpack", "axis 0", {U({3, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return ops::Unstack(s, x[0], 3, 0);
               }});
  c.push_back({"Unpack", "axis -1, one output unused", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 OutputList parts = ops::Unstack(s, x[0], 3, -1);
                 return {parts[0], parts[2]};
               }});
  return c;
}

std::vector<GradCase> NnCases() {
  std::vector<GradCase> c;
  c.push_back({"Relu", "", {AwayFromZero({2, 3})}, Unary(ops::Relu)});
  c.push_back({"Sigmoid", "", {U({2, 3})}, Unary(ops::Sigmoid)});
  c.push_back({"Tanh", "", {U({2, 3})}, Unary(ops::Tanh)});
  c.push_back({"BiasAdd", "NHWC", {U({2, 3}), U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BiasAdd(s, x[0], x[1])};
               }});
  c.push_back({"BiasAdd", "NCHW", {U({2, 3, 2, 2}), U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::BiasAdd(s, x[0], x[1], "NCHW")};
               }});
  c.push_back({"Softmax", "", {U({2, 4})}, Unary(ops::Softmax)});
  c.push_back({"LogSoftmax", "", {U({2, 4})}, Unary(ops::LogSoftmax)});
  c.push_back({"SparseSoftmaxCrossEntropyWithLogits", "loss and backprop", {U({3, 4})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 auto r = ops::SparseSoftmaxCrossEntropyWithLogits(s, x[0], I32(s, {1, 0, 3}));
                 return {r.loss, r.backprop};
               }});
  c.push_back({"SparseSoftmaxCrossEntropyWithLogits", "loss only", {U({2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 auto r = ops::SparseSoftmaxCrossEntropyWithLogits(
                     s, x[0], ops::Const<int64_t>(s, {2, 0}));
                 return {r.loss};
               }});
  // Labels as an input too: their gradient is -log_softmax (and -dbackprop).
  // Each row a distribution, as the op requires (TensorFlow's backprop,
  // softmax - labels, is dloss/dx only then).
  auto distributions = [](int64_t rows, int64_t classes) {
    Tensor t = Uniform({rows, classes}, 0.1, 1.0);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += t.data<double>()[r * classes + c];
      for (int64_t c = 0; c < classes; ++c) t.data<double>()[r * classes + c] /= sum;
    }
    return t;
  };
  c.push_back({"SoftmaxCrossEntropyWithLogits", "loss and backprop", {U({3, 4}), distributions(3, 4)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 auto r = ops::SoftmaxCrossEntropyWithLogits(s, x[0], x[1]);
                 return {r.loss, r.backprop};
               }});
  c.push_back({"SoftmaxCrossEntropyWithLogits", "loss only", {U({2, 5}), distributions(2, 5)},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::SoftmaxCrossEntropyWithLogits(s, x[0], x[1]).loss};
               }});
  c.push_back({"Conv2D", "SAME, stride 1", {U({1, 4, 4, 2}), U({2, 2, 2, 3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Conv2D(s, x[0], x[1], {1, 1, 1, 1}, "SAME")};
               }});
  c.push_back({"Conv2D", "VALID, stride 2", {U({2, 5, 5, 1}), U({3, 3, 1, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::Conv2D(s, x[0], x[1], {1, 2, 2, 1}, "VALID")};
               }});
  c.push_back({"MaxPool", "2x2 VALID", {U({1, 4, 4, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::MaxPool(s, x[0], {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID")};
               }});
  c.push_back({"MaxPool", "3x3 SAME stride 2", {U({1, 5, 5, 1})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::MaxPool(s, x[0], {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")};
               }});
  c.push_back({"FusedBatchNormV3", "training, NHWC", {U({2, 2, 3, 3}), Uniform({3}, 0.5, 1.5), U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output empty = ops::Const<double>(s, std::vector<double>{}, TensorShape{0});
                 return {ops::FusedBatchNormV3(s, x[0], x[1], x[2], empty, empty, {.epsilon = 1e-3f}).y};
               }});
  c.push_back({"FusedBatchNormV3", "inference, NCHW", {U({2, 3, 2, 2}), Uniform({3}, 0.5, 1.5), U({3})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 Output mean = ops::Const<double>(s, {0.1, -0.2, 0.3});
                 Output var = ops::Const<double>(s, {0.5, 1.5, 0.8});
                 return {ops::FusedBatchNormV3(s, x[0], x[1], x[2], mean, var,
                                               {.data_format = "NCHW", .is_training = false})
                             .y};
               }});
  c.push_back({"AvgPool", "2x2 VALID", {U({2, 4, 4, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::AvgPool(s, x[0], {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID")};
               }});
  c.push_back({"AvgPool", "3x3 SAME stride 2 (partial edge windows)", {U({1, 5, 6, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::AvgPool(s, x[0], {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")};
               }});
  c.push_back({"AvgPoolGrad", "of a 3x3 SAME stride 2 pool", {U({1, 3, 3, 2})},
               [](const Scope& s, const OutputList& x) -> OutputList {
                 return {ops::AvgPoolGrad(s, I32(s, {1, 5, 6, 2}), x[0], {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")};
               }});
  return c;
}

std::vector<GradCase> AllCases() {
  std::vector<GradCase> all;
  for (auto* family : {MathCases, ArrayCases, StackAndSplitCases, NnCases}) {
    for (GradCase& c : family()) all.push_back(std::move(c));
  }
  return all;
}

// ---- The check --------------------------------------------------------------

bool GraphHasOp(const Graph& g, const std::string& op) {
  for (Node* n : g.nodes()) {
    if (n->type_string() == op) return true;
  }
  return false;
}

// The forward outputs' shapes, from one run with full-shape placeholders.
absl::StatusOr<std::vector<TensorShape>> OutputShapes(const GradCase& c) {
  Scope root = Scope::NewRootScope();
  OutputList xs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    xs.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("x", i)), DT_DOUBLE));
    feeds.emplace_back(xs.back().name(), c.inputs[i]);
  }
  OutputList ys = c.build(root, xs);
  STRATA_RETURN_IF_ERROR(root.status());
  std::vector<std::string> fetches;
  for (const Output& y : ys) fetches.push_back(y.name());
  STRATA_ASSIGN_OR_RETURN(auto session, Session::Create(root));
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &out));
  std::vector<TensorShape> shapes;
  for (const Tensor& t : out) shapes.push_back(t.shape());
  return shapes;
}

// Builds the case with full-shape or unknown-rank placeholders, reduces the
// outputs to sum_k sum(y_k * w_k), and checks the gradient of every input.
void CheckCase(const GradCase& c, const std::vector<Tensor>& weights, bool full_shapes) {
  SCOPED_TRACE(absl::StrCat(c.op, " (", c.name, "), ",
                            full_shapes ? "full-shape" : "unknown-shape", " placeholders"));
  Scope root = Scope::NewRootScope();
  OutputList xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    PartialTensorShape shape = full_shapes ? PartialTensorShape(c.inputs[i].shape())
                                           : PartialTensorShape::UnknownRank();
    xs.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("x", i)), DT_DOUBLE, shape));
  }
  OutputList ys = c.build(root, xs);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(GraphHasOp(*root.graph(), c.op)) << "the case builds no " << c.op << " node";
  OutputList terms;
  Output flat = ops::Const<int32_t>(root, {-1});
  for (size_t k = 0; k < ys.size(); ++k) {
    Output weighted = ops::Mul(root, ys[k], ops::Const(root, weights[k]));
    terms.push_back(ops::Sum(root, ops::Reshape(root, weighted, flat), ops::Const(root, 0)));
  }
  Output loss = terms.size() == 1 ? terms[0] : ops::AddN(root, terms);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<double> err = testing::MaxGradientError(root, xs, c.inputs, loss, c.options);
  EXPECT_TRUE(err.ok()) << err.status();
}

TEST(GradientCheckTest, EveryCaseMatchesFiniteDifferences) {
  for (const GradCase& c : AllCases()) {
    absl::StatusOr<std::vector<TensorShape>> shapes = OutputShapes(c);
    ASSERT_TRUE(shapes.ok()) << c.op << " (" << c.name << "): " << shapes.status();
    std::vector<Tensor> weights;
    for (const TensorShape& s : *shapes) weights.push_back(Uniform(s, 0.5, 1.5));
    CheckCase(c, weights, /*full_shapes=*/true);
    CheckCase(c, weights, /*full_shapes=*/false);
  }
}

TEST(GradientCheckTest, EveryRegisteredGradientHasACase) {
  std::set<std::string> covered;
  for (const GradCase& c : AllCases()) covered.insert(c.op);
  // A collective's gradient needs its other participants: checked where
  // they exist, by training across replicas to the weights one device
  // reaches (fit/fit_test.cc, synchronized BatchNormalization).
  covered.insert("CollectiveReduceV2");
  std::vector<std::string> missing;
  for (const std::string& op : GradientRegistry::Global()->DifferentiableOps()) {
    if (covered.count(op) == 0) missing.push_back(op);
  }
  EXPECT_TRUE(missing.empty()) << "ops with a registered gradient but no numeric check case in "
                                  "gradient_check_test.cc: "
                               << absl::StrJoin(missing, ", ");
}

}  // namespace
}  // namespace strata
