#include "train/initializers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
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

// A random op of `shape` with `attrs` (the seeds).
using Draw = std::function<Output(const Scope&, Output shape, DataType, const ops::RandomAttrs&)>;

// The seeds of rows from `row_offset` on: a seeded initializer gives each
// partition a seed of its own (the same rows of another partitioning draw
// other values); the first partition's are the whole's.
ops::RandomAttrs RowSeeds(std::optional<int64_t> seed, int64_t row_offset) {
  if (!seed.has_value() || row_offset == 0) return Seeds(seed);
  const uint64_t mixed =
      static_cast<uint64_t>(*seed) ^ (static_cast<uint64_t>(row_offset) * 0x9E3779B97F4A7C15ull);
  return Seeds(static_cast<int64_t>(mixed >> 1));
}

// scale * draw + offset, `draw` being the random op; scale and offset from
// the whole variable's shape (`params`), so that a partition's rows come
// from the whole's distribution.
Initializer Affine(const char* what,
                   std::function<std::pair<double, double>(const TensorShape&)> params,
                   std::optional<int64_t> seed, Draw draw) {
  auto rows = [=](const Scope& scope, const TensorShape& full, int64_t row_offset,
                  const TensorShape& shape, DataType dtype) -> Output {
    if (!IsFloating(dtype)) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          what, " initializer: dtype ", DataTypeString(dtype), " is not float or double")));
      return Output();
    }
    const auto [scale, offset] = params(full);
    Output x = draw(scope, ShapeConst(scope, shape), dtype, RowSeeds(seed, row_offset));
    Output scaled = ops::Mul(scope, x, ScalarConst(scope, dtype, scale));
    return ops::AddV2(scope, scaled, ScalarConst(scope, dtype, offset));
  };
  auto whole = [rows](const Scope& scope, const TensorShape& shape, DataType dtype) {
    return rows(scope, shape, 0, shape, dtype);
  };
  return Initializer(whole, rows);
}

Initializer Affine(const char* what, double scale, double offset, std::optional<int64_t> seed,
                   Draw draw) {
  return Affine(
      what, [scale, offset](const TensorShape&) { return std::make_pair(scale, offset); }, seed,
      std::move(draw));
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
  auto whole = [value](const Scope& scope, const TensorShape&, DataType) {
    return ops::Const(scope, value);
  };
  auto rows = [value](const Scope& scope, const TensorShape& full, int64_t row_offset,
                      const TensorShape& shape, DataType) {
    std::vector<int64_t> begin(shape.dims(), 0),
        size(shape.dim_sizes().begin(), shape.dim_sizes().end());
    if (!begin.empty()) begin[0] = row_offset;
    return ops::Slice(scope, ops::Const(scope, value), ops::Const<int64_t>(scope, begin),
                      ops::Const<int64_t>(scope, size));
  };
  return Initializer(whole, rows);
}

Initializer RandomUniform(double minval, double maxval, std::optional<int64_t> seed) {
  return Affine("RandomUniform", maxval - minval, minval, seed,
                [](const Scope& s, Output shape, DataType dt, const ops::RandomAttrs& a) {
                  return ops::RandomUniform(s, shape, dt, a);
                });
}

Initializer RandomNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("RandomNormal", stddev, mean, seed,
                [](const Scope& s, Output shape, DataType dt, const ops::RandomAttrs& a) {
                  return ops::RandomNormal(s, shape, dt, a);
                });
}

Initializer TruncatedNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("TruncatedNormal", stddev, mean, seed,
                [](const Scope& s, Output shape, DataType dt, const ops::RandomAttrs& a) {
                  return ops::TruncatedNormal(s, shape, dt, a);
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
  auto params = [](const TensorShape& full) {
    const Fans f = ComputeFans(full);
    // Keras: scale = 1 / max(1, (fan_in + fan_out) / 2), limit = sqrt(3 * scale).
    const double limit = std::sqrt(3.0 / std::max(1.0, (f.fan_in + f.fan_out) / 2.0));
    return std::make_pair(2 * limit, -limit);
  };
  return Affine("RandomUniform", params, seed,
                [](const Scope& s, Output shape, DataType dt, const ops::RandomAttrs& a) {
                  return ops::RandomUniform(s, shape, dt, a);
                });
}

}  // namespace train
}  // namespace strata
