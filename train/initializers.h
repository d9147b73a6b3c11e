// Initializers: how a variable's first value is made (train/variable.h's
// Initializer), as graph ops run once by the variable's initializer.
//
//   Variable* w = CreateVariable(root, "w", TensorShape{784, 256}, DT_FLOAT,
//                                GlorotUniform(/*seed=*/7));
//   Variable* b = CreateVariable(root, "b", TensorShape{256}, DT_FLOAT, Zeros());
//
// Seeds follow TensorFlow's rule for an op seed without a graph seed: the
// random op gets seed = 87654321 (TF's DEFAULT_GRAPH_SEED) and seed2 = the
// given seed, so the values are deterministic given the seed (and differ
// between seeds); with no seed each run of the initializer draws afresh.
// Each also makes a partition's rows alone (Initializer::Rows, for a
// partitioned variable), so no device makes the whole of a partitioned
// table: constants their rows; seeded random ones exactly the rows the
// whole would get on its first draw (ops::RandomRange), so partitioning
// does not change a model's initial values; unseeded ones afresh.
// Random initializers support float and double; Zeros/Ones/Constant support
// float, double, int32 and int64. Another dtype records InvalidArgument in
// the scope.
//
// Thread-safety: the Initializer objects are immutable and may be shared.
#ifndef STRATA_TRAIN_INITIALIZERS_H_
#define STRATA_TRAIN_INITIALIZERS_H_

#include <cstdint>
#include <optional>

#include "graph/scope.h"
#include "graph/tensor.h"
#include "train/variable.h"

namespace strata {
namespace train {

// TensorFlow's DEFAULT_GRAPH_SEED.
inline constexpr int64_t kDefaultGraphSeed = 87654321;

Initializer Zeros();
Initializer Ones();
Initializer Constant(double value);
// Exactly `value` (its dtype and shape must be the variable's).
Initializer ConstantTensor(const Tensor& value);

// U(minval, maxval).
Initializer RandomUniform(double minval = -0.05, double maxval = 0.05,
                          std::optional<int64_t> seed = std::nullopt);
// N(mean, stddev^2).
Initializer RandomNormal(double mean = 0.0, double stddev = 0.05,
                         std::optional<int64_t> seed = std::nullopt);
// N(mean, stddev^2) with values beyond two stddevs redrawn.
Initializer TruncatedNormal(double mean = 0.0, double stddev = 0.05,
                            std::optional<int64_t> seed = std::nullopt);
// Keras's GlorotUniform: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)),
// fans as Keras computes them (rank 2 [in, out]; convolution kernels
// [..., in, out] scale both by the receptive field).
Initializer GlorotUniform(std::optional<int64_t> seed = std::nullopt);

// The fans Keras uses for a kernel of `shape`.
struct Fans {
  double fan_in;
  double fan_out;
};
Fans ComputeFans(const TensorShape& shape);

// A scalar constant of `dtype` (float, double, int32, int64) holding
// `value`; records InvalidArgument in the scope for another dtype.
Output ScalarConst(const Scope& scope, DataType dtype, double value);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_INITIALIZERS_H_
