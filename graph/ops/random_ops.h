// The random op family: RandomUniform ([0, 1)), RandomStandardNormal (mean 0,
// stddev 1) and TruncatedNormal (standard normal, values beyond two stddevs
// redrawn). Names, inputs and attrs are TensorFlow's:
//
//   RandomUniform(shape: T) -> output: dtype
//       attrs seed: int = 0, seed2: int = 0, dtype: {half, bfloat16, float, double},
//             T: {int32, int64}
//
// The ops are stateful: each run of a node draws new numbers, so graph passes
// never fold, deduplicate or merge them. With seed == seed2 == 0 each kernel
// instance picks a random seed; otherwise the numbers depend only on (seed,
// seed2, the element's index, and how many times the node has run), not on
// the thread count. The shape function uses `shape` when it is a constant.
//
// StatelessRandomUniform is the stateless form: the numbers are a pure
// function of the `seed` input (two int32 or int64 values) and the
// element's index, bit for bit TensorFlow's (Philox-4x32-10 with
// TensorFlow's seed scrambling and float conversion), so the same seed gives
// the same tensor on every run, every thread count and in TensorFlow:
//
//   StatelessRandomUniform(shape: T, seed: Tseed) -> output: dtype
//       attrs dtype: {half, bfloat16, float, double} = float,
//             T: {int32, int64} = int32, Tseed: {int32, int64} = int64
//
// A seed that is not a vector of two is InvalidArgument naming the node.
//
//   Scope s = Scope::NewRootScope();
//   Output shape = ops::Const<int32_t>(s, {256, 784});
//   Output w = ops::TruncatedNormal(s, shape, DT_FLOAT, ops::RandomAttrs().Seed(42).Seed2(7));
//
// Thread-safety: builder functions follow Scope's contract.
#ifndef STRATA_GRAPH_OPS_RANDOM_OPS_H_
#define STRATA_GRAPH_OPS_RANDOM_OPS_H_

#include <cstdint>
#include <string>

#include "graph/scope.h"

namespace strata {
namespace ops {

// The optional attrs shared by the three ops.
struct RandomAttrs {
  RandomAttrs& Seed(int64_t v) {
    seed = v;
    return *this;
  }
  RandomAttrs& Seed2(int64_t v) {
    seed2 = v;
    return *this;
  }
  int64_t seed = 0;
  int64_t seed2 = 0;
};

Output RandomUniform(const Scope& scope, Output shape, DataType dtype,
                     const RandomAttrs& attrs = {});
// RandomStandardNormal.
Output RandomNormal(const Scope& scope, Output shape, DataType dtype,
                    const RandomAttrs& attrs = {});
Output TruncatedNormal(const Scope& scope, Output shape, DataType dtype,
                       const RandomAttrs& attrs = {});

// Elements [offset, offset + n) (n: `shape`'s elements) of what the random
// op `op` ("RandomUniform", "RandomStandardNormal", "TruncatedNormal") with
// these seeds draws on its first run, flattened, in `shape`: a row range of
// a seeded random value made alone, bit for bit that part of the whole (a
// partition of a partitioned variable, train/partitioned_variable.h). The
// internal op _RandomRange (attrs seed, seed2, dist "uniform", "normal" or
// "truncated_normal", offset >= 0). Unseeded (0, 0), it draws afresh as the
// ops do. InvalidArgument (in the scope) for another op or offset < 0.
Output RandomRange(const Scope& scope, const std::string& op, Output shape, DataType dtype,
                   const RandomAttrs& attrs, int64_t offset);

// StatelessRandomUniform: [0, 1) values of `dtype`, a function of `seed`
// ([2] int32 or int64) only.
Output StatelessRandomUniform(const Scope& scope, Output shape, Output seed, DataType dtype);

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_RANDOM_OPS_H_
