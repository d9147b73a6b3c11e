#include "strategy/powersgd.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/linalg.h"
#include "graph/ops/math_ops.h"
#include "strategy/gradient_bucketing.h"
#include "train/initializers.h"

namespace strata {
namespace distribute {
namespace {

// Scratch that checkpoints leave out (train::ShardedContents::saved).
void MarkScratch(train::Variable* v) {
  train::ShardedContents scratch;
  scratch.saved = false;
  v->set_sharded_contents(std::move(scratch));
}

}  // namespace

absl::Status PowerSgd::CheckOptions(const StrategyOptions& options) {
  if (options.powersgd_rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat("StrategyOptions::powersgd_rank is ",
                                                   options.powersgd_rank, "; it must be >= 1"));
  }
  if (options.powersgd_start_step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("StrategyOptions::powersgd_start_step is ",
                                                   options.powersgd_start_step,
                                                   "; it must be >= 0"));
  }
  if (!(options.powersgd_min_compression_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StrategyOptions::powersgd_min_compression_rate is ",
                     options.powersgd_min_compression_rate, "; it must be > 0"));
  }
  return absl::OkStatus();
}

std::vector<const train::Variable*> PowerSgd::compressed() const {
  std::vector<const train::Variable*> out;
  for (const train::Variable* v : order_) {
    if (matrices_.at(v) != nullptr) out.push_back(v);
  }
  return out;
}

absl::Status PowerSgd::MakeStep(const Scope& scope, ReplicaContext& ctx) {
  if (step_ != nullptr) return absl::OkStatus();
  if (ctx.replica_id() != 0) {
    return absl::InternalError(
        "replica 0 made no PowerSGD step counter: every replica must run "
        "the same step");
  }
  step_ = train::CreateVariable(scope.WithNoControlDependencies(), "powersgd/step", TensorShape{},
                                DT_INT64, train::Zeros(), /*trainable=*/false);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (step_ == nullptr) return absl::InternalError("the PowerSGD step counter was not made");
  MarkScratch(step_);
  return absl::OkStatus();
}

absl::StatusOr<const PowerSgd::Matrix*> PowerSgd::MatrixOf(const Scope& scope, ReplicaContext& ctx,
                                                           const train::Variable* var) {
  auto found = matrices_.find(var);
  if (found != matrices_.end()) return found->second.get();
  if (ctx.replica_id() != 0) {
    return absl::InternalError(absl::StrCat("replica ", ctx.replica_id(),
                                            " reduces the gradient of '", var->name(),
                                            "' that replica 0 did not: every "
                                            "replica must run the same step"));
  }
  const StrategyOptions& o = ctx.strategy()->options();
  const TensorShape& shape = var->shape();
  const bool listed = std::find(o.powersgd_variables.begin(), o.powersgd_variables.end(),
                                var->name()) != o.powersgd_variables.end();
  if (listed && shape.dims() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("StrategyOptions::powersgd_variables names '", var->name(), "' of shape ",
                     shape.DebugString(), ": PowerSGD compresses matrices (rank >= 2 tensors)"));
  }
  if (listed && var->dtype() != DT_FLOAT && var->dtype() != DT_DOUBLE) {
    return absl::InvalidArgumentError(
        absl::StrCat("StrategyOptions::powersgd_variables names '", var->name(), "' of dtype ",
                     DataTypeString(var->dtype()), ": PowerSGD compresses float or double"));
  }
  std::unique_ptr<Matrix> m;
  if (shape.dims() >= 2 && (var->dtype() == DT_FLOAT || var->dtype() == DT_DOUBLE) &&
      (o.powersgd_variables.empty() || listed)) {
    const int64_t cols = shape.dim_size(shape.dims() - 1);
    const int64_t rows = cols == 0 ? 0 : shape.num_elements() / cols;
    const double rate = static_cast<double>(rows) * static_cast<double>(cols) /
                        (static_cast<double>(rows + cols) * o.powersgd_rank);
    if (rows > 0 && rate >= o.powersgd_min_compression_rate) {
      m = std::make_unique<Matrix>();
      m->rows = rows;
      m->cols = cols;
      // A rank past either dim adds nothing (and the thin QR of P would
      // have fewer columns).
      m->rank = std::min<int64_t>({o.powersgd_rank, rows, cols});
      const Scope s = scope.WithNoControlDependencies();
      // Seeded by the variable's place, so every worker starts from one Q.
      const int64_t seed = 0x5067 + (var->creation_index() < 0 ? 0 : var->creation_index());
      m->q = train::CreateVariable(s, absl::StrCat(var->name(), "/powersgd_q"),
                                   TensorShape{m->rank, cols}, var->dtype(),
                                   train::RandomNormal(0.0, 1.0, seed), /*trainable=*/false);
      m->error = train::CreateVariable(s, absl::StrCat(var->name(), "/powersgd_error"),
                                       TensorShape{rows, cols}, var->dtype(), train::Zeros(),
                                       /*trainable=*/false);
      STRATA_RETURN_IF_ERROR(scope.status());
      if (m->q == nullptr || m->error == nullptr ||
          m->q->num_replicas() != ctx.strategy()->num_local_replicas()) {
        return absl::InternalError(absl::StrCat("PowerSGD's state for '", var->name(),
                                                "' was not mirrored over the replicas"));
      }
      MarkScratch(m->q);
      MarkScratch(m->error);
    }
  }
  if (listed && m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StrategyOptions::powersgd_variables names '", var->name(), "' of shape ",
        shape.DebugString(), ", which rank ", o.powersgd_rank,
        " would not compress by powersgd_min_compression_rate ", o.powersgd_min_compression_rate));
  }
  order_.push_back(var);
  return (matrices_[var] = std::move(m)).get();
}

absl::StatusOr<OutputList> PowerSgd::AllReduce(
    const Scope& scope, ReplicaContext& ctx, const std::vector<train::GradAndVar>& grads_and_vars) {
  const StrategyOptions& o = ctx.strategy()->options();
  const int r = ctx.replica_id();
  if (r == 0) {
    absl::flat_hash_set<std::string> names;
    for (const auto& [grad, var] : grads_and_vars) names.insert(var->name());
    for (const std::string& name : o.powersgd_variables) {
      if (!names.contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("StrategyOptions::powersgd_variables names '", name,
                         "', which is not a variable this step updates"));
      }
    }
  }
  STRATA_RETURN_IF_ERROR(MakeStep(scope, ctx));
  const Scope s = scope.NewSubScope("powersgd").WithDevice(ctx.device());
  const size_t n = grads_and_vars.size();
  std::vector<const Matrix*> matrix(n);
  std::vector<GradientSpec> specs;
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < n; ++i) {
    const train::Variable* var = grads_and_vars[i].second;
    STRATA_ASSIGN_OR_RETURN(matrix[i], MatrixOf(scope, ctx, var));
    const int64_t order =
        var->creation_index() < 0 ? static_cast<int64_t>(i) : var->creation_index();
    specs.push_back({var->dtype(), var->shape().num_elements(), order});
    shapes.push_back(var->shape());
  }

  // The step counter decides: plain all-reduce before start_step.
  train::Variable* step = step_;
  Output pred = ops::GreaterEqual(s, step->Read(s), ops::Const(s, int64_t{o.powersgd_start_step}));
  Node* count =
      step->AssignAdd(s.WithControlDependencies({pred.node()}), ops::Const(s, int64_t{1}));
  OutputList plain_in, compress_in;
  for (size_t i = 0; i < n; ++i) {
    ops::SwitchOutputs sw = ops::Switch(s, grads_and_vars[i].first, pred);
    plain_in.push_back(sw.output_false);
    compress_in.push_back(sw.output_true);
  }
  STRATA_RETURN_IF_ERROR(s.status());
  STRATA_ASSIGN_OR_RETURN(
      OutputList plain,
      AllReduceInBuckets(s.NewSubScope("warmup"), ctx, ReduceOp::kMean, plain_in, shapes,
                         PlanGradientBuckets(specs, o.gradient_bucket_bytes)));

  STRATA_ASSIGN_OR_RETURN(OutputList compressed, Compressed(s.NewSubScope("compress"), ctx, matrix,
                                                            specs, shapes, compress_in));
  OutputList out;
  for (size_t i = 0; i < n; ++i) {
    Output merged = ops::Merge(s, {plain[i], compressed[i]}).output;
    out.push_back(ops::Identity(s.WithControlDependencies({count}), merged));
  }
  STRATA_RETURN_IF_ERROR(s.status());
  return out;
}

absl::StatusOr<OutputList> PowerSgd::Compressed(const Scope& c, ReplicaContext& ctx,
                                                const std::vector<const Matrix*>& matrix,
                                                const std::vector<GradientSpec>& specs,
                                                const std::vector<TensorShape>& shapes,
                                                const OutputList& grads) {
  const StrategyOptions& o = ctx.strategy()->options();
  const size_t n = grads.size();
  // The compressed branch. First all-reduce: the uncompressed gradients and
  // every matrix's P.
  OutputList first;
  std::vector<TensorShape> first_shapes;
  std::vector<GradientSpec> first_specs;
  std::vector<Output> m_of(n);
  std::vector<int> first_index(n, -1);
  for (size_t i = 0; i < n; ++i) {
    first_index[i] = static_cast<int>(first.size());
    GradientSpec spec = specs[i];
    if (matrix[i] == nullptr) {
      first.push_back(grads[i]);
      first_shapes.push_back(shapes[i]);
    } else {
      const Matrix& mx = *matrix[i];
      Output grad = ops::Reshape(c, grads[i], ops::Const<int64_t>(c, {mx.rows, mx.cols}));
      m_of[i] = ops::AddV2(c, grad, mx.error->Read(c));
      first.push_back(
          ops::MatMul(c, m_of[i], mx.q->Read(c), ops::MatMul::Attrs().TransposeB(true)));
      first_shapes.push_back(TensorShape{mx.rows, mx.rank});
      spec.num_elements = mx.rows * mx.rank;
    }
    first_specs.push_back(spec);
  }
  STRATA_RETURN_IF_ERROR(c.status());
  STRATA_ASSIGN_OR_RETURN(
      OutputList first_reduced,
      AllReduceInBuckets(c.NewSubScope("p"), ctx, ReduceOp::kMean, first, first_shapes,
                         PlanGradientBuckets(first_specs, o.gradient_bucket_bytes)));
  // Second: every matrix's Q = M^T orthogonalized(P).
  OutputList second, p_hat;
  std::vector<TensorShape> second_shapes;
  std::vector<GradientSpec> second_specs;
  std::vector<int> second_index(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (matrix[i] == nullptr) continue;
    const Matrix& mx = *matrix[i];
    second_index[i] = static_cast<int>(second.size());
    Output p = ops::Qr(c, first_reduced[first_index[i]]).q;
    p_hat.push_back(p);
    // Q^T = P^T M: the transposed operand is the thin one, M streams by rows.
    second.push_back(ops::MatMul(c, p, m_of[i], ops::MatMul::Attrs().TransposeA(true)));
    second_shapes.push_back(TensorShape{mx.rank, mx.cols});
    GradientSpec spec = specs[i];
    spec.num_elements = mx.cols * mx.rank;
    second_specs.push_back(spec);
  }
  OutputList second_reduced;
  if (!second.empty()) {
    STRATA_ASSIGN_OR_RETURN(
        second_reduced,
        AllReduceInBuckets(c.NewSubScope("q"), ctx, ReduceOp::kMean, second, second_shapes,
                           PlanGradientBuckets(second_specs, o.gradient_bucket_bytes)));
  }
  OutputList out;
  for (size_t i = 0; i < n; ++i) {
    Output compressed;
    if (matrix[i] == nullptr) {
      compressed = first_reduced[first_index[i]];
    } else {
      const Matrix& mx = *matrix[i];
      const int k = second_index[i];
      Output q = second_reduced[k];
      Output approx = ops::MatMul(c, p_hat[k], q);
      Node* keep_error = mx.error->Assign(c, ops::Sub(c, m_of[i], approx));
      Node* keep_q = mx.q->Assign(c, q);
      std::vector<int64_t> dims(shapes[i].dim_sizes().begin(), shapes[i].dim_sizes().end());
      compressed = ops::Reshape(c.WithControlDependencies(std::vector<Node*>{keep_error, keep_q}),
                                approx, ops::Const(c, dims));
    }
    out.push_back(compressed);
  }
  STRATA_RETURN_IF_ERROR(c.status());
  return out;
}

}  // namespace distribute
}  // namespace strata
