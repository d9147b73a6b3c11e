#include "train/layers.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/ops/state_ops.h"
#include "train/initializers.h"

namespace strata {
namespace train {
namespace {

Output Activate(const Scope& scope, Output x, Activation activation) {
  auto c = [&](double v) {
    Output k = ops::Const(scope, static_cast<float>(v));
    return x.type() == DT_FLOAT ? k : ops::Cast(scope, k, x.type());
  };
  switch (activation) {
    case Activation::kRelu: return ops::Relu(scope, x);
    case Activation::kGelu:
      return ops::Mul(scope, ops::Mul(scope, c(0.5), x),
                      ops::AddV2(scope, c(1.0), ops::Erf(scope, ops::Mul(scope, x, c(1.0 / std::sqrt(2.0))))));
    case Activation::kGeluTanh: {
      Output inner = ops::Mul(scope, c(std::sqrt(2.0 / 3.14159265358979323846)),
                              ops::AddV2(scope, x, ops::Mul(scope, c(0.044715), ops::Mul(scope, x, ops::Square(scope, x)))));
      return ops::Mul(scope, ops::Mul(scope, c(0.5), x), ops::AddV2(scope, c(1.0), ops::Tanh(scope, inner)));
    }
    case Activation::kNone: break;
  }
  return x;
}

const char* PaddingName(PaddingMode p) { return p == PaddingMode::kSame ? "SAME" : "VALID"; }

// The product of dims 1.. of `shape`, or -1 if one of them is unknown.
int64_t ElementsPerExample(const PartialTensorShape& shape) {
  if (shape.unknown_rank()) return -1;
  int64_t n = 1;
  for (int d = 1; d < shape.dims(); ++d) {
    if (shape.dim_size(d) < 0) return -1;
    n *= shape.dim_size(d);
  }
  return n;
}

}  // namespace

void Layer::SetNameIfEmpty(const std::string& name) {
  if (!built_ && name_.empty()) name_ = name;
}

void Layer::SetSeedIfUnset(int64_t seed) {
  if (!built_ && !seed_.has_value()) seed_ = seed;
}

absl::Status Layer::Error(const std::string& message) const {
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", name_.empty() ? kind() : name_, "' (", kind(), "): ", message));
}

Variable* Layer::AddWeight(const Scope& scope, const std::string& weight, const TensorShape& shape,
                           bool glorot) {
  return AddWeight(scope, weight, shape, glorot ? GlorotUniform(seed_) : Zeros());
}

Variable* Layer::AddWeight(const Scope& scope, const std::string& weight, const TensorShape& shape,
                           Initializer init) {
  // Named "<layer>/<weight>" under the caller's scope rather than under the
  // layer's op sub-scope, whose name the scope uniquifies per application:
  // the weights' names must not depend on how often layers were applied.
  Variable* v = CreateVariable(scope, absl::StrCat(name_, "/", weight), shape, DT_FLOAT, std::move(init));
  if (v != nullptr) variables_.push_back(v);
  return v;
}

Variable* Layer::AddState(const Scope& scope, const std::string& weight, const TensorShape& shape, DataType dtype,
                          Initializer init) {
  Variable* v = CreateVariable(scope, absl::StrCat(name_, "/", weight), shape, dtype, std::move(init),
                               /*trainable=*/false);
  if (v != nullptr) variables_.push_back(v);
  return v;
}

absl::StatusOr<Output> Layer::Apply(const Scope& scope, Output input) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (name_.empty()) name_ = kind();
  if (!input.ok()) return Error("the input is a null Output");
  const bool floating = input.type() == DT_FLOAT || input.type() == DT_BFLOAT16 || input.type() == DT_HALF;
  if (TakesIndices() ? input.type() != DT_INT32 && input.type() != DT_INT64 : !floating) {
    return Error(absl::StrCat("expects ", TakesIndices() ? "int32 or int64 ids" : "a float input", ", got ",
                              DataTypeString(input.type())));
  }
  if (policy_.mixed() && !ComputesInLowPrecision()) {
    return Error(absl::StrCat("has no ", DataTypeString(policy_.compute_dtype), " kernels for the '", policy_.name,
                              "' dtype policy yet; give this layer the float32 policy (set_dtype_policy)"));
  }
  const PartialTensorShape shape = input.shape();
  if (!built_) {
    STRATA_RETURN_IF_ERROR(Build(scope, shape));
    STRATA_RETURN_IF_ERROR(scope.status());
    built_ = true;
    built_shape_ = shape;
    built_graph_ = scope.graph();
  } else if (scope.graph() != built_graph_) {
    // Its weights are another graph's nodes.
    return Error("was built in another graph: make a new layer (or model) for each graph");
  } else if (!shape.IsCompatibleWith(built_shape_)) {
    return Error(absl::StrCat("was built for inputs of shape ", built_shape_.DebugString(),
                              " and cannot take ", shape.DebugString()));
  }
  const Scope s = scope.NewSubScope(name_);
  std::vector<Output> weights;
  reads_.clear();
  bool partitioned = false;
  for (const Variable* v : variables_) partitioned |= v->num_partitions() > 1;
  if (partitioned) {
    std::vector<VariableRead> reads;
    STRATA_ASSIGN_OR_RETURN(std::optional<Output> out, CallPartitioned(s, input, &reads));
    if (out.has_value()) {
      STRATA_RETURN_IF_ERROR(scope.status());
      reads_ = std::move(reads);
      return *out;
    }
  }
  const DataType compute = policy_.compute_dtype;
  for (Variable* v : variables_) {
    Output value = v->Read(s);
    const bool cast = CastsWeights() && value.type() == DT_FLOAT && compute != DT_FLOAT;
    weights.push_back(cast ? ops::Cast(s, value, compute) : value);
    reads_.push_back({v, value});
  }
  if (!TakesIndices() && CastsInput() && input.type() != compute) input = ops::Cast(s, input, compute);
  absl::StatusOr<Output> out = Call(s, input, weights);
  STRATA_RETURN_IF_ERROR(scope.status());
  return out;
}

absl::Status Dense::Build(const Scope& scope, const PartialTensorShape& input) {
  if (units_ < 1) return Error(absl::StrCat("units must be >= 1, got ", units_));
  bool known = !input.unknown_rank() && input.dims() >= 2;
  for (int d = 1; known && d < input.dims(); ++d) known = input.dim_size(d) >= 0;
  if (!known) {
    return Error(absl::StrCat("expects [batch, features] (or [batch, d1, ..., features]) with known features "
                              "(every dim but the batch known), got ",
                              input.DebugString()));
  }
  AddWeight(scope, "kernel", TensorShape{input.dim_size(input.dims() - 1), units_}, /*glorot=*/true);
  AddWeight(scope, "bias", TensorShape{units_}, /*glorot=*/false);
  return scope.status();
}

absl::StatusOr<Output> Dense::Call(const Scope& scope, Output input,
                                   const std::vector<Output>& weights) {
  const PartialTensorShape in = input.shape();
  if (in.dims() == 2) return Activate(scope, ops::BiasAdd(scope, ops::MatMul(scope, input, weights[0]), weights[1]), activation_);
  // [batch, d1, ..., features]: as rows of features, then back.
  std::vector<int32_t> out_shape = {-1};
  for (int d = 1; d + 1 < in.dims(); ++d) out_shape.push_back(static_cast<int32_t>(in.dim_size(d)));
  out_shape.push_back(static_cast<int32_t>(units_));
  Output rows = ops::Reshape(scope, input, ops::Const<int32_t>(scope, {-1, static_cast<int32_t>(in.dim_size(in.dims() - 1))}));
  Output y = Activate(scope, ops::BiasAdd(scope, ops::MatMul(scope, rows, weights[0]), weights[1]), activation_);
  return ops::Reshape(scope, y,
                      ops::Const<int32_t>(scope, out_shape, TensorShape{static_cast<int64_t>(out_shape.size())}));
}

absl::Status Embedding::Build(const Scope& scope, const PartialTensorShape& input) {
  if (vocabulary_ < 1 || dim_ < 1) {
    return Error(absl::StrCat("vocabulary and dim must be >= 1, got ", vocabulary_, " and ", dim_));
  }
  AddWeight(scope, "embeddings", TensorShape{vocabulary_, dim_},
            initializer_ ? initializer_ : GlorotUniform(seed()));
  return scope.status();
}

absl::StatusOr<Output> Embedding::Call(const Scope& scope, Output input, const std::vector<Output>& weights) {
  Output rows = ops::GatherV2(scope, weights[0], input, ops::Const(scope, 0));
  const DataType compute = dtype_policy().compute_dtype;
  return rows.type() == compute ? rows : ops::Cast(scope, rows, compute);
}

absl::StatusOr<std::optional<Output>> Embedding::CallPartitioned(const Scope& scope, Output input,
                                                                 std::vector<VariableRead>* reads) {
  Output rows = EmbeddingLookup(scope, variables()[0], input, reads);
  STRATA_RETURN_IF_ERROR(scope.status());
  const DataType compute = dtype_policy().compute_dtype;
  return rows.type() == compute ? rows : ops::Cast(scope, rows, compute);
}

absl::Status EmbeddingBag::Build(const Scope& scope, const PartialTensorShape& input) {
  if (input.unknown_rank() || input.dims() != 2) {
    return Error(absl::StrCat("expects ids [batch, bag], got ", input.DebugString()));
  }
  return Embedding::Build(scope, input);
}

absl::StatusOr<Output> EmbeddingBag::Call(const Scope& scope, Output input,
                                          const std::vector<Output>& weights) {
  STRATA_ASSIGN_OR_RETURN(Output rows, Embedding::Call(scope, input, weights));
  return ops::Mean(scope, rows, ops::Const(scope, 1));
}

absl::StatusOr<std::optional<Output>> EmbeddingBag::CallPartitioned(
    const Scope& scope, Output input, std::vector<VariableRead>* reads) {
  STRATA_ASSIGN_OR_RETURN(std::optional<Output> rows,
                          Embedding::CallPartitioned(scope, input, reads));
  if (!rows.has_value()) return rows;
  return ops::Mean(scope, *rows, ops::Const(scope, 1));
}

Output EmbeddingLookup(const Scope& scope, Variable* table, Output ids,
                       std::vector<VariableRead>* reads) {
  if (!scope.ok()) return Output();
  if (table->num_partitions() == 1) {
    Output value = table->Read(scope);
    reads->push_back({table, value});
    return ops::GatherV2(scope, value, ids, ops::Const(scope, 0));
  }
  const Scope s = scope.NewSubScope("lookup");
  const int n = table->num_partitions();
  const DataType index = ids.type();
  auto constant = [&](int64_t v) {
    return index == DT_INT64 ? ops::Const(s, v) : ops::Const(s, static_cast<int32_t>(v));
  };
  Output flat = ops::Reshape(s, ids, ops::Const(s, {-1}));
  // Each id's partition: how many partitions after the first start at or
  // below it.
  OutputList above;
  for (int p = 1; p < n; ++p) {
    above.push_back(
        ops::Cast(s, ops::GreaterEqual(s, flat, constant(table->partition_offset(p))), DT_INT32));
  }
  Output which = above.size() == 1 ? above[0] : ops::AddN(s, above);
  OutputList ids_of = ops::DynamicPartition(s, flat, which, n);
  Output count = ops::Squeeze(s, ops::Shape(s, flat));
  Output positions = ops::Range(s, ops::Const(s, 0), count, ops::Const(s, 1));
  OutputList positions_of = ops::DynamicPartition(s, positions, which, n);
  OutputList rows_of;
  for (int p = 0; p < n; ++p) {
    Variable* part = table->partition(p);
    if (!s.ok() || static_cast<int>(ids_of.size()) != n) return Output();
    Output local = ops::Sub(s, ids_of[p], constant(table->partition_offset(p)));
    const Scope at = s.WithDevice(part->device()).WithOpName(absl::StrCat("gather_part_", p));
    Output rows = ops::ResourceGather(at, part->handle(), local, part->dtype());
    reads->push_back({part, rows, local});
    rows_of.push_back(rows);
  }
  Output merged = ops::DynamicStitch(s, positions_of, rows_of);
  // ids.shape + the row shape: a constant when at most one of the ids'
  // dims is unknown (so that the result's shape is known to the layers
  // after), else made from the ids' shape when run.
  std::vector<int32_t> row_dims;
  for (int d = 1; d < table->shape().dims(); ++d)
    row_dims.push_back(static_cast<int32_t>(table->shape().dim_size(d)));
  const PartialTensorShape id_shape = ids.shape();
  int unknown = id_shape.unknown_rank() ? 2 : 0;
  std::vector<int32_t> dims;
  for (int d = 0; unknown < 2 && d < id_shape.dims(); ++d) {
    unknown += id_shape.dim_size(d) < 0;
    dims.push_back(static_cast<int32_t>(id_shape.dim_size(d)));
  }
  if (unknown < 2) {
    dims.insert(dims.end(), row_dims.begin(), row_dims.end());
    return ops::Reshape(
        s, merged, ops::Const<int32_t>(s, dims, TensorShape{static_cast<int64_t>(dims.size())}));
  }
  Output row_shape =
      ops::Const<int32_t>(s, row_dims, TensorShape{static_cast<int64_t>(row_dims.size())});
  return ops::Reshape(s, merged, ops::Concat(s, {ops::Shape(s, ids), row_shape}, ops::Const(s, 0)));
}

absl::Status Conv2D::Build(const Scope& scope, const PartialTensorShape& input) {
  const Options& o = options_;
  if (o.filters < 1 || o.kernel_size < 1 || o.stride < 1) {
    return Error(absl::StrCat("filters, kernel_size and stride must be >= 1, got ", o.filters,
                              ", ", o.kernel_size, ", ", o.stride));
  }
  if (input.dims() != 4 || input.dim_size(3) < 0) {
    return Error(absl::StrCat("expects NHWC [batch, rows, cols, channels] with known channels, got ",
                              input.DebugString()));
  }
  AddWeight(scope, "kernel", TensorShape{o.kernel_size, o.kernel_size, input.dim_size(3), o.filters},
            /*glorot=*/true);
  AddWeight(scope, "bias", TensorShape{o.filters}, /*glorot=*/false);
  return scope.status();
}

absl::StatusOr<Output> Conv2D::Call(const Scope& scope, Output input,
                                    const std::vector<Output>& weights) {
  const int s = static_cast<int>(options_.stride);
  Output y = ops::Conv2D(scope, input, weights[0], {1, s, s, 1}, PaddingName(options_.padding));
  y = ops::BiasAdd(scope, y, weights[1]);
  return Activate(scope, y, options_.activation);
}

absl::StatusOr<Output> MaxPool2D::Call(const Scope& scope, Output input,
                                       const std::vector<Output>&) {
  if (pool_size_ < 1 || stride_ < 1) {
    return Error(absl::StrCat("pool_size and stride must be >= 1, got ", pool_size_, ", ", stride_));
  }
  if (input.shape().dims() != 4) {
    return Error(absl::StrCat("expects NHWC [batch, rows, cols, channels], got ",
                              input.shape().DebugString()));
  }
  const int k = static_cast<int>(pool_size_), s = static_cast<int>(stride_);
  return ops::MaxPool(scope, input, {1, k, k, 1}, {1, s, s, 1}, PaddingName(padding_));
}

absl::StatusOr<Output> Flatten::Call(const Scope& scope, Output input, const std::vector<Output>&) {
  const PartialTensorShape shape = input.shape();
  const int64_t n = ElementsPerExample(shape);
  if (shape.dims() < 2 || n < 0) {
    return Error(absl::StrCat("expects [batch, ...] with known dims after the batch, got ",
                              shape.DebugString()));
  }
  return ops::Reshape(scope, input,
                      ops::Const<int32_t>(scope, {-1, static_cast<int32_t>(n)}, TensorShape{2}));
}

absl::StatusOr<Output> Reshape::Call(const Scope& scope, Output input, const std::vector<Output>&) {
  const PartialTensorShape shape = input.shape();
  const int64_t have = ElementsPerExample(shape);
  int64_t want = 1;
  std::vector<int32_t> dims = {-1};
  for (int64_t d : target_) {
    if (d < 1) return Error(absl::StrCat("target dims must be >= 1, got [", absl::StrJoin(target_, ","), "]"));
    want *= d;
    dims.push_back(static_cast<int32_t>(d));
  }
  if (shape.dims() < 1 || have != want) {
    return Error(absl::StrCat("cannot reshape ", shape.DebugString(), " to [?,",
                              absl::StrJoin(target_, ","), "]"));
  }
  return ops::Reshape(scope, input,
                      ops::Const<int32_t>(scope, dims, TensorShape{static_cast<int64_t>(dims.size())}));
}

}  // namespace train
}  // namespace strata
