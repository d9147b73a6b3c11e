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

// The random op `op` (RandomUniform, RandomStandardNormal, TruncatedNormal)
// of `shape`.
Output Draw(const std::string& op, const Scope& s, Output shape, DataType dt,
            const ops::RandomAttrs& a) {
  if (op == "RandomUniform") return ops::RandomUniform(s, shape, dt, a);
  if (op == "RandomStandardNormal") return ops::RandomNormal(s, shape, dt, a);
  return ops::TruncatedNormal(s, shape, dt, a);
}

// scale * draw + offset, the draw being the random op `op`; scale and
// offset from the whole variable's shape (`params`). A seeded initializer
// makes a partition's rows as exactly the whole's rows (ops::RandomRange);
// an unseeded one draws afresh anyway.
Initializer Affine(const char* what,
                   std::function<std::pair<double, double>(const TensorShape&)> params,
                   std::optional<int64_t> seed, std::string op) {
  auto rows = [=](const Scope& scope, const TensorShape& full, int64_t row_offset,
                  const TensorShape& shape, DataType dtype) -> Output {
    if (!IsFloating(dtype)) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          what, " initializer: dtype ", DataTypeString(dtype), " is not float or double")));
      return Output();
    }
    const auto [scale, offset] = params(full);
    const int64_t row_elements =
        full.dims() == 0 || full.dim_size(0) == 0 ? 0 : full.num_elements() / full.dim_size(0);
    Output x = seed.has_value() && row_offset > 0
                   ? ops::RandomRange(scope, op, ShapeConst(scope, shape), dtype, Seeds(seed),
                                      row_offset * row_elements)
                   : Draw(op, scope, ShapeConst(scope, shape), dtype, Seeds(seed));
    Output scaled = ops::Mul(scope, x, ScalarConst(scope, dtype, scale));
    return ops::AddV2(scope, scaled, ScalarConst(scope, dtype, offset));
  };
  auto whole = [rows](const Scope& scope, const TensorShape& shape, DataType dtype) {
    return rows(scope, shape, 0, shape, dtype);
  };
  return Initializer(whole, rows);
}

Initializer Affine(const char* what, double scale, double offset, std::optional<int64_t> seed,
                   std::string op) {
  return Affine(
      what, [scale, offset](const TensorShape&) { return std::make_pair(scale, offset); }, seed,
      std::move(op));
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
  return Affine("RandomUniform", maxval - minval, minval, seed, "RandomUniform");
}

Initializer RandomNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("RandomNormal", stddev, mean, seed, "RandomStandardNormal");
}

Initializer TruncatedNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return Affine("TruncatedNormal", stddev, mean, seed, "TruncatedNormal");
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
  return Affine("RandomUniform", params, seed, "RandomUniform");
}

}  // namespace train
}  // namespace strata
