#include "graph/ops/random_ops.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"

#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

absl::Status RandomShapeFn(InferenceContext& c) {
  return SetOutputFromShapeInput(c, 0, "random op shape");
}

absl::Status StatelessRandomShapeFn(InferenceContext& c) {
  PartialTensorShape seed;
  STRATA_RETURN_IF_ERROR(c.WithRank(1, 1, &seed));
  if (seed.dim_size(0) >= 0 && seed.dim_size(0) != 2) {
    return c.Error(absl::StrCat("seed must have shape [2], got ", seed.DebugString()));
  }
  return SetOutputFromShapeInput(c, 0, "random op shape");
}

}  // namespace

// The three ops share one signature; SetIsStateful keeps constant folding and
// CSE from treating two draws as one value.
#define STRATA_REGISTER_RANDOM_OP(name)                   \
  STRATA_REGISTER_OP(name)                                \
      .Input("shape: T")                                  \
      .Output("output: dtype")                            \
      .Attr("seed: int = 0")                              \
      .Attr("seed2: int = 0")                             \
      .Attr("dtype: {half, bfloat16, float, double}")     \
      .Attr("T: {int32, int64}")                          \
      .SetIsStateful()                                    \
      .SetShapeFn(RandomShapeFn)

STRATA_REGISTER_RANDOM_OP("RandomUniform");
STRATA_REGISTER_RANDOM_OP("RandomStandardNormal");
STRATA_REGISTER_RANDOM_OP("TruncatedNormal");

#undef STRATA_REGISTER_RANDOM_OP

// Internal: a range of a seeded random op's first draw (random_ops.h).
STRATA_REGISTER_OP("_RandomRange")
    .Input("shape: T")
    .Output("output: dtype")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Attr("dist: string")
    .Attr("offset: int = 0")
    .Attr("dtype: {half, bfloat16, float, double}")
    .Attr("T: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(RandomShapeFn);

// Not stateful: one seed, one value, so graph passes may fold and merge it.
STRATA_REGISTER_OP("StatelessRandomUniform")
    .Input("shape: T")
    .Input("seed: Tseed")
    .Output("output: dtype")
    .Attr("dtype: {half, bfloat16, float, double} = float")
    .Attr("T: {int32, int64}")
    .Attr("Tseed: {int32, int64} = int64")
    .SetShapeFn(StatelessRandomShapeFn);

namespace ops {

namespace {
Output AddRandomNode(const Scope& scope, const std::string& op, const std::string& name,
                     Output shape, DataType dtype, const RandomAttrs& attrs) {
  Node* n = NodeBuilder(scope, op, name)
                .Input(shape)
                .Attr("dtype", dtype)
                .Attr("seed", attrs.seed)
                .Attr("seed2", attrs.seed2)
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}
}  // namespace

Output RandomUniform(const Scope& scope, Output shape, DataType dtype, const RandomAttrs& attrs) {
  return AddRandomNode(scope, "RandomUniform", "RandomUniform", shape, dtype, attrs);
}

Output RandomNormal(const Scope& scope, Output shape, DataType dtype, const RandomAttrs& attrs) {
  return AddRandomNode(scope, "RandomStandardNormal", "RandomNormal", shape, dtype, attrs);
}

Output TruncatedNormal(const Scope& scope, Output shape, DataType dtype,
                       const RandomAttrs& attrs) {
  return AddRandomNode(scope, "TruncatedNormal", "TruncatedNormal", shape, dtype, attrs);
}

Output StatelessRandomUniform(const Scope& scope, Output shape, Output seed, DataType dtype) {
  Node* n = NodeBuilder(scope, "StatelessRandomUniform", "StatelessRandomUniform")
                .Input(shape)
                .Input(seed)
                .Attr("dtype", dtype)
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

Output RandomRange(const Scope& scope, const std::string& op, Output shape, DataType dtype,
                   const RandomAttrs& attrs, int64_t offset) {
  const char* dist = op == "RandomUniform"          ? "uniform"
                     : op == "RandomStandardNormal" ? "normal"
                     : op == "TruncatedNormal"      ? "truncated_normal"
                                                    : nullptr;
  if (dist == nullptr || offset < 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "RandomRange: '", op, "' is not a random op of this family, or offset ", offset, " < 0")));
    return Output();
  }
  Node* n = NodeBuilder(scope, "_RandomRange", "RandomRange")
                .Input(shape)
                .Attr("dtype", dtype)
                .Attr("seed", attrs.seed)
                .Attr("seed2", attrs.seed2)
                .Attr("dist", std::string(dist))
                .Attr("offset", offset)
                .Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

}  // namespace ops
}  // namespace strata
