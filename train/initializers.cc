#include "train/initializers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/random_ops.h"

namespace strata {
namespace train {

namespace {

Output ShapeConst(const Scope& scope, const TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return ops::Const<int64_t>(scope, dims,
                             TensorShape{static_cast<int64_t>(dims.size())});
}

Initializer Filled(double value) {
  return [value](const Scope& scope, const TensorShape& shape, DataType dtype) {
    // Fill keeps the graph small whatever the variable's size.
    return ops::Fill(scope, ShapeConst(scope, shape), ScalarConst(scope, dtype, value));
  };
}

ops::RandomAttrs Seeds(std::optional<int64_t> seed) {
  ops::RandomAttrs a;
  if (seed.has_value()) a.Seed(kDefaultGraphSeed).Seed2(*seed);
  return a;
}

bool IsFloating(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }

// scale * draw + offset, from the random op `draw` makes.
template <typename Draw>
Initializer Affine(const char* what, double scale, double offset, Draw draw) {
  return [=](const Scope& scope, const TensorShape& shape, DataType dtype) -> Output {
    if (!IsFloating(dtype)) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          what, " initializer: dtype ", DataTypeString(dtype), " is not float or double")));
      return Output();
    }
    Output x = draw(scope, ShapeConst(scope, shape), dtype);
    Output scaled = ops::Mul(scope, x, ScalarConst(scope, dtype, scale));
    return ops::AddV2(scope, scaled, ScalarConst(scope, dtype, offset));
  };
}

}  // namespace

Output ScalarConst(const Scope& scope, DataType dtype, double value) {
  Output out;
  absl::Status s = DispatchRealNumber(dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    out = ops::Const(scope, Tensor::Scalar<T>(static_cast<T>(value)));
    return absl::OkStatus();
  });
  if (!s.ok()) scope.UpdateStatus(s);
  return out;
}

Initializer Zeros() { return Filled(0.0); }
Initializer Ones() { return Filled(1.0); }
Initializer Constant(double value) { return Filled(value); }

Initializer ConstantTensor(const Tensor& value) {
  return [value](const Scope& scope, const TensorShape&, DataType) {
    return ops::Const(scope, value);
  };
}

Initializer RandomUniform(double minval, double maxval, std::optional<int64_t> seed) {
  return Affine("RandomUniform", maxval - minval, minval,
                [seed](const Scope& s, Output shape, DataType dt) {
                  return ops::RandomUniform(s, shape, dt, Seeds(seed));
                });
}

Initializer RandomNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("RandomNormal", stddev, mean, [seed](const Scope& s, Output shape, DataType dt) {
    return ops::RandomNormal(s, shape, dt, Seeds(seed));
  });
}

Initializer TruncatedNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("TruncatedNormal", stddev, mean,
                [seed](const Scope& s, Output shape, DataType dt) {
                  return ops::TruncatedNormal(s, shape, dt, Seeds(seed));
                });
}

Fans ComputeFans(const TensorShape& shape) {
  const int r = shape.dims();
  if (r == 0) return {1, 1};
  if (r == 1) return {double(shape.dim_size(0)), double(shape.dim_size(0))};
  if (r == 2) return {double(shape.dim_size(0)), double(shape.dim_size(1))};
  double receptive = 1;
  for (int i = 0; i < r - 2; ++i) receptive *= double(shape.dim_size(i));
  return {double(shape.dim_size(r - 2)) * receptive, double(shape.dim_size(r - 1)) * receptive};
}

Initializer GlorotUniform(std::optional<int64_t> seed) {
  return [seed](const Scope& scope, const TensorShape& shape, DataType dtype) {
    const Fans f = ComputeFans(shape);
    // Keras: scale = 1 / max(1, (fan_in + fan_out) / 2), limit = sqrt(3 * scale).
    const double limit = std::sqrt(3.0 / std::max(1.0, (f.fan_in + f.fan_out) / 2.0));
    return RandomUniform(-limit, limit, seed)(scope, shape, dtype);
  };
}

}  // namespace train
}  // namespace strata
