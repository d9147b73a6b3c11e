#include "train/phase_layers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/grad_ops.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/random_ops.h"
#include "train/initializers.h"
#include "train/phase.h"

namespace strata {
namespace train {
namespace {

// Half and bfloat16 inputs are computed in float32 (their CPU kernels are
// few), float and double in their own dtype.
DataType WorkingType(DataType dt) { return dt == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT; }

Output ToType(const Scope& s, Output x, DataType dt) { return x.type() == dt ? x : ops::Cast(s, x, dt); }

Output Int32Vector(const Scope& s, const std::vector<int32_t>& v) {
  return ops::Const<int32_t>(s, v, TensorShape{static_cast<int64_t>(v.size())});
}

}  // namespace

absl::Status Dropout::Build(const Scope& scope, const PartialTensorShape& input) {
  if (!(rate_ >= 0 && rate_ < 1)) return Error(absl::StrCat("rate must be in [0, 1), got ", rate_));
  AddState(scope, "seed_step", TensorShape{}, DT_INT64, Zeros());
  return scope.status();
}

absl::StatusOr<Output> Dropout::Call(const Scope& scope, Output input, const std::vector<Output>& weights) {
  if (!InTrainingPhase() || rate_ == 0) return ops::Identity(scope, input);
  const ReplicaInfo& replica = CurrentReplica();
  // Stream (step * replicas + replica) of the layer's seed: one per step and
  // replica.
  Output stream = ops::AddV2(scope, ops::Mul(scope, weights[0], ops::Const(scope, int64_t{replica.num_replicas})),
                             ops::Const(scope, int64_t{replica.replica_id}));
  Output seed = ops::Stack(scope, {ops::Const(scope, int64_t{this->seed().value_or(0)}), stream});
  Output u = ops::StatelessRandomUniform(scope, ops::Shape(scope, input), seed, DT_FLOAT);
  Output keep = ops::GreaterEqual(scope, u, ops::Const(scope, static_cast<float>(rate_)));
  const DataType dt = WorkingType(input.type());
  Output mask = ops::Mul(scope, ops::Cast(scope, keep, dt), ScalarConst(scope, dt, 1.0 / (1.0 - rate_)));
  Output y = ops::Mul(scope, ToType(scope, input, dt), mask);
  // The next step draws another mask; the output waits for the increment so
  // that it runs whenever the output is used.
  Node* bump = variables()[0]->AssignAdd(scope.WithControlDependencies(std::vector<Node*>{u.node()}),
                                         ops::Const(scope, int64_t{1}));
  STRATA_RETURN_IF_ERROR(scope.status());
  y = ops::Identity(scope.WithControlDependencies(std::vector<Node*>{bump}), y);
  return ToType(scope, y, input.type());
}

absl::Status BatchNormalization::Build(const Scope& scope, const PartialTensorShape& input) {
  const Options& o = options_;
  if (!(o.momentum >= 0 && o.momentum <= 1)) return Error(absl::StrCat("momentum must be in [0, 1], got ", o.momentum));
  if (!(o.epsilon > 0)) return Error(absl::StrCat("epsilon must be > 0, got ", o.epsilon));
  if (input.unknown_rank() || input.dims() < 2 || input.dim_size(input.dims() - 1) < 0) {
    return Error(absl::StrCat("expects at least 2 dims with the last (the features) known, got ",
                              input.DebugString()));
  }
  const TensorShape features{input.dim_size(input.dims() - 1)};
  AddWeight(scope, "gamma", features, Ones());
  AddWeight(scope, "beta", features, Zeros());
  AddState(scope, "moving_mean", features, DT_FLOAT, Zeros());
  AddState(scope, "moving_variance", features, DT_FLOAT, Ones());
  return scope.status();
}

absl::StatusOr<std::pair<Output, Output>> BatchNormalization::BatchMoments(const Scope& scope, Output x,
                                                                           bool global) {
  const int rank = x.shape().dims();
  std::vector<int32_t> batch_axes;
  for (int d = 0; d + 1 < rank; ++d) batch_axes.push_back(d);
  Output axes = Int32Vector(scope, batch_axes);
  if (!global) {
    Output mean = ops::Mean(scope, x, axes);
    // d var / d mean is zero, so the variance may ignore the mean's gradient.
    Output var = ops::Mean(scope, ops::SquaredDifference(scope, x, ops::StopGradient(scope, mean)), axes);
    return std::make_pair(mean, var);
  }
  // Two all-reduces over every replica, the gradient flowing back through
  // each (its own all-reduce) to every replica's inputs: [Σx, count] gives
  // the mean, then Σ(x - mean)² the variance. One pass of Σx² would save a
  // collective but lose the variance to cancellation when it is small next
  // to mean² (a mostly-zero ReLU channel), and differ from one device.
  const int32_t c = static_cast<int32_t>(x.shape().dim_size(rank - 1));
  const auto& all_reduce_sum = CurrentReplica().all_reduce_sum;
  Output count = ops::RealDiv(scope, ops::Cast(scope, ops::StopGradient(scope, ops::Size(scope, x)), DT_FLOAT),
                              ops::Const(scope, static_cast<float>(c)));
  Output packed = ops::Concat(scope, {ops::Sum(scope, x, axes), ops::Reshape(scope, count, Int32Vector(scope, {1}))},
                              ops::Const(scope, int32_t{0}));
  STRATA_RETURN_IF_ERROR(scope.status());
  STRATA_ASSIGN_OR_RETURN(std::vector<Output> sum_and_count, all_reduce_sum(scope, {packed}));
  auto part = [&](int32_t begin, int32_t size) {
    return ops::Slice(scope, sum_and_count[0], Int32Vector(scope, {begin}), Int32Vector(scope, {size}));
  };
  Output n = part(c, 1);
  Output mean = ops::RealDiv(scope, part(0, c), n);
  Output squares = ops::Sum(scope, ops::SquaredDifference(scope, x, ops::StopGradient(scope, mean)), axes);
  STRATA_RETURN_IF_ERROR(scope.status());
  STRATA_ASSIGN_OR_RETURN(std::vector<Output> total_squares, all_reduce_sum(scope, {squares}));
  Output var = ops::RealDiv(scope, total_squares[0], n);
  return std::make_pair(mean, var);
}

absl::StatusOr<std::vector<Node*>> BatchNormalization::UpdateMovingAverages(const Scope& scope, Output mean,
                                                                            Output var,
                                                                            const std::vector<Output>& weights,
                                                                            bool averaged) {
  std::vector<Output> batch = {ops::StopGradient(scope, mean), ops::StopGradient(scope, var)};
  if (averaged) {
    // Each replica's own statistics: every copy follows their mean.
    const ReplicaInfo& replica = CurrentReplica();
    STRATA_ASSIGN_OR_RETURN(batch, replica.all_reduce_sum(scope, batch));
    for (Output& b : batch) b = ops::Mul(scope, b, ops::Const(scope, 1.0f / static_cast<float>(replica.num_replicas)));
  }
  const float momentum = static_cast<float>(options_.momentum);
  std::vector<Node*> updates;
  for (int k = 0; k < 2; ++k) {
    Output moving = weights[2 + k];
    Output next = ops::AddV2(scope, ops::Mul(scope, moving, ops::Const(scope, momentum)),
                             ops::Mul(scope, batch[k], ops::Const(scope, 1.0f - momentum)));
    updates.push_back(variables()[2 + k]->Assign(scope, next));
  }
  STRATA_RETURN_IF_ERROR(scope.status());
  return updates;
}

absl::StatusOr<Output> BatchNormalization::Call(const Scope& scope, Output input, const std::vector<Output>& weights) {
  Output x = ToType(scope, input, DT_FLOAT);
  Output mean = weights[2], var = weights[3];
  std::vector<Node*> updates;
  if (InTrainingPhase()) {
    const ReplicaInfo& replica = CurrentReplica();
    const bool several = replica.num_replicas > 1 && replica.all_reduce_sum != nullptr;
    STRATA_ASSIGN_OR_RETURN(std::tie(mean, var), BatchMoments(scope, x, several && options_.synchronized));
    STRATA_ASSIGN_OR_RETURN(updates,
                            UpdateMovingAverages(scope, mean, var, weights, several && !options_.synchronized));
  }
  Output inv = ops::Mul(scope, ops::Rsqrt(scope, ops::AddV2(scope, var, ops::Const(scope, static_cast<float>(options_.epsilon)))),
                        weights[0]);
  Output y = ops::AddV2(scope, ops::Mul(scope, x, inv), ops::Sub(scope, weights[1], ops::Mul(scope, mean, inv)));
  if (!updates.empty()) y = ops::Identity(scope.WithControlDependencies(updates), y);
  STRATA_RETURN_IF_ERROR(scope.status());
  return ToType(scope, y, input.type());
}

}  // namespace train
}  // namespace strata
