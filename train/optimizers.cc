#include "train/optimizers.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/state_ops.h"
#include "graph/ops/training_ops.h"
#include "train/initializers.h"
#include "train/partitioned_variable.h"

namespace strata {
namespace train {

namespace {

Output CastTo(const Scope& s, Output x, DataType dtype) {
  return x.type() == dtype ? x : ops::Cast(s, x, dtype);
}

}  // namespace

Output Optimizer::StepContext::Cached(const std::string& key, DataType dtype,
                                      const std::function<Output()>& make) {
  auto it = cache_.find({key, dtype});
  if (it != cache_.end()) return it->second;
  Output v = make();
  cache_[{key, dtype}] = v;
  return v;
}

Output Optimizer::StepContext::LearningRate(DataType dtype) {
  return Cached("lr", dtype, [&] { return CastTo(scope_, learning_rate_, dtype); });
}

Output Optimizer::StepContext::Constant(const std::string& key, double value, DataType dtype) {
  return Cached(key, dtype, [&] { return ScalarConst(scope_, dtype, value); });
}

Optimizer::Optimizer(std::string name, LearningRateSchedule learning_rate)
    : name_(std::move(name)), learning_rate_(std::move(learning_rate)) {}

std::vector<GradAndVar> Optimizer::AggregateGradients(
    const Scope&, const std::vector<GradAndVar>& grads_and_vars) {
  return grads_and_vars;
}

Variable* Optimizer::GetSlot(const Variable* var, const std::string& slot) const {
  auto it = slots_.find({var, slot});
  return it == slots_.end() ? nullptr : it->second;
}

Variable* Optimizer::AddSlot(const Scope& scope, Variable* var, const std::string& slot,
                             const std::string& suffix) {
  Variable* s = CreateVariable(scope.WithDevice(var->device()).WithNoControlDependencies(),
                               absl::StrCat(var->name(), "/", suffix), var->shape(), var->dtype(),
                               Zeros(), /*trainable=*/false);
  if (s != nullptr) slots_[{var, slot}] = s;
  return s;
}

Node* Optimizer::ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars) {
  return ApplyGradients(scope, grads_and_vars, {});
}

bool Optimizer::CheckGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                               const std::vector<SparseGradient>& sparse,
                               std::vector<GradAndVar>* dense_out,
                               std::vector<SparseGradient>* sparse_out) {
  auto fail = [&](const std::string& msg) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(name_, ".ApplyGradients: ", msg)));
    return false;
  };
  for (const auto& [grad, var] : grads_and_vars) {
    if (var == nullptr) return fail("a gradient is paired with a null variable");
    if (!grad.ok()) continue;  // the loss does not depend on this variable
    if (grad.type() != var->dtype()) {
      return fail(absl::StrCat("the gradient of '", var->name(), "' is ",
                               DataTypeString(grad.type()), ", the variable ",
                               DataTypeString(var->dtype())));
    }
    if (!grad.shape().IsCompatibleWith(var->shape())) {
      return fail(absl::StrCat("the gradient of '", var->name(), "' has shape ",
                               grad.shape().DebugString(), ", the variable ",
                               var->shape().DebugString()));
    }
    dense_out->push_back({grad, var});
  }
  for (const SparseGradient& g : sparse) {
    if (g.variable == nullptr) return fail("a sparse gradient is paired with a null variable");
    if (!g.values.ok() || !g.indices.ok()) continue;
    const Variable& var = *g.variable;
    if (g.values.type() != var.dtype() ||
        (g.indices.type() != DT_INT32 && g.indices.type() != DT_INT64)) {
      return fail(absl::StrCat("the sparse gradient of '", var.name(), "' has ",
                               DataTypeString(g.values.type()), " values and ",
                               DataTypeString(g.indices.type()), " indices; the variable is ",
                               DataTypeString(var.dtype()), " and indices are int32 or int64"));
    }
    if (var.num_partitions() > 1 || var.shape().dims() < 1) {
      return fail(
          absl::StrCat("a sparse gradient of '", var.name(),
                       "' must name a variable with rows that is not partitioned (pair it with "
                       "the partition whose rows it holds)"));
    }
    sparse_out->push_back(g);
  }
  if (dense_out->empty() && sparse_out->empty()) return fail("no gradients to apply");
  if (graph_ != nullptr && scope.graph() != graph_) {
    // Its step counter and slots are another graph's nodes.
    return fail("was used in another graph: make a new optimizer for each graph");
  }
  return true;
}

bool Optimizer::AddUpdates(const Scope& scope, const Scope& ns,
                           const std::vector<GradAndVar>& dense,
                           const std::vector<SparseGradient>& sparse, StepContext& ctx,
                           std::vector<Node*>* updates) {
  // A partitioned variable's gradient is cut into its partitions' rows.
  std::vector<GradAndVar> parts;
  for (const auto& [grad, var] : dense) {
    if (var->num_partitions() == 1) {
      parts.push_back({grad, var});
      continue;
    }
    const Scope cut = ns.NewSubScope(absl::StrCat("partition_", var->name()));
    for (int p = 0; p < var->num_partitions(); ++p) {
      parts.push_back({PartitionRows(cut, grad, *var, p), var->partition(p)});
    }
  }
  auto add = [&](Variable* var, const std::function<Node*(const Scope&)>& update) {
    if (!slotted_.contains(var)) {
      CreateSlots(scope, var);
      slotted_.insert(var);
    }
    const Scope us = ns.NewSubScope(absl::StrCat("update_", var->name())).WithDevice(var->device());
    Node* u = update(us);
    if (u == nullptr) {
      if (scope.ok()) {
        scope.UpdateStatus(absl::InvalidArgumentError(
            absl::StrCat(name_, ".ApplyGradients: no update for '", var->name(), "'")));
      }
      return false;
    }
    updates->push_back(u);
    return true;
  };
  for (const GradAndVar& part : parts) {
    const Output& grad = part.first;
    Variable* var = part.second;
    if (!add(var, [&](const Scope& us) { return ApplyDense(us, grad, var, ctx); })) return false;
  }
  for (const SparseGradient& g : sparse) {
    auto apply = [&](const Scope& us) {
      return ApplySparse(us, g.values, g.indices, g.variable, ctx);
    };
    if (!add(g.variable, apply)) return false;
  }
  return true;
}

Node* Optimizer::ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                                const std::vector<SparseGradient>& sparse_grads) {
  if (!scope.ok()) return nullptr;
  std::vector<GradAndVar> checked;
  std::vector<SparseGradient> sparse;
  if (!CheckGradients(scope, grads_and_vars, sparse_grads, &checked, &sparse)) return nullptr;

  std::vector<GradAndVar> aggregated =
      checked.empty() ? checked : AggregateGradients(scope, checked);
  if (!sparse.empty()) sparse = AggregateSparseGradients(scope, sparse);
  // Loss scaling and clipping scale the sparse gradients' values as the
  // dense gradients (one list, split again after).
  const size_t num_dense = aggregated.size();
  for (const SparseGradient& g : sparse) aggregated.push_back({g.values, g.variable});
  Output finite;  // loss scaling: whether this step's gradients are finite
  if (loss_scaling_) aggregated = Unscale(scope, aggregated, &finite);
  if (clip_global_norm_ > 0) aggregated = ClipByGlobalNorm(scope, aggregated);
  if (!scope.ok()) return nullptr;
  for (size_t i = 0; i < sparse.size(); ++i) sparse[i].values = aggregated[num_dense + i].first;
  aggregated.resize(num_dense);
  if (iterations_ == nullptr) {
    // Made before NewSubScope(name_) below, so that scope is "<name>" itself.
    iterations_ = CreateVariable(scope.WithNoControlDependencies(), absl::StrCat(name_, "/iter"),
                                 TensorShape(), DT_INT64, Zeros(), /*trainable=*/false);
    if (iterations_ == nullptr) return nullptr;
    graph_ = scope.graph();
  }
  const Scope ns = scope.NewSubScope(name_);
  Output step = iterations_->Read(ns);
  Output lr = learning_rate_(ns.NewSubScope("learning_rate"), step);
  if (!scope.ok()) return nullptr;
  if (!lr.ok()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat(name_, ".ApplyGradients: the learning-rate schedule made no value")));
    return nullptr;
  }
  applied_learning_rate_ = lr;
  StepContext ctx(ns, step, lr);

  std::vector<Node*> updates;
  if (!AddUpdates(scope, ns, aggregated, sparse, ctx, &updates)) return nullptr;
  updates = FinishUpdates(ns, updates);
  if (!scope.ok()) return nullptr;
  Output one = ops::Const(ns, int64_t{1});
  Node* increment = iterations_->AssignAdd(ns.WithControlDependencies(updates), one);
  if (increment == nullptr) return nullptr;
  Node* train = NodeBuilder(ns, "NoOp", "train").ControlInput(increment).Finalize();
  if (!loss_scaling_ || train == nullptr) return train;
  return FinishLossScaledStep(scope, train, finite);
}

Node* Optimizer::ApplySparse(const Scope& scope, Output values, Output indices, Variable* var,
                             StepContext& ctx) {
  Output rows = ops::Const(scope, var->shape().dim_size(0));
  return ApplyDense(scope, ops::UnsortedSegmentSum(scope, values, indices, rows), var, ctx);
}

void Optimizer::set_loss_scale(const LossScaleOptions& options) {
  loss_scaling_ = true;
  loss_scale_options_ = options;
}

absl::Status Optimizer::MakeLossScale(const Scope& scope) {
  if (loss_scale_ != nullptr) return absl::OkStatus();
  const LossScaleOptions& o = loss_scale_options_;
  if (!(o.initial_scale >= 1) || !(o.multiplier > 1) || o.growth_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": loss scaling needs initial_scale >= 1, multiplier > 1 and growth_steps >= 1; got ",
        o.initial_scale, ", ", o.multiplier, ", ", o.growth_steps));
  }
  const Scope s = scope.WithNoControlDependencies();
  loss_scale_ = CreateVariable(s, absl::StrCat(name_, "/loss_scale"), TensorShape(), DT_FLOAT,
                               Constant(o.initial_scale), /*trainable=*/false);
  good_steps_ = CreateVariable(s, absl::StrCat(name_, "/good_steps"), TensorShape(), DT_INT64,
                               Zeros(), /*trainable=*/false);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (loss_scale_ == nullptr || good_steps_ == nullptr) {
    return absl::InternalError(absl::StrCat(name_, ": the loss scale's variables were not made"));
  }
  return absl::OkStatus();
}

Output Optimizer::ScaleLoss(const Scope& scope, Output loss) {
  if (!loss_scaling_ || !loss.ok()) return loss;
  absl::Status made = MakeLossScale(scope);
  if (!made.ok()) {
    scope.UpdateStatus(made);
    return Output();
  }
  const Scope s = scope.NewSubScope(absl::StrCat(name_, "/scale_loss"));
  Output scale = loss_scale_->Read(s);
  if (loss.type() != DT_FLOAT) scale = ops::Cast(s, scale, loss.type());
  return ops::Mul(s, loss, scale);
}

std::vector<GradAndVar> Optimizer::Unscale(const Scope& scope, const std::vector<GradAndVar>& grads,
                                           Output* finite) {
  absl::Status made = MakeLossScale(scope);
  if (!made.ok()) {
    scope.UpdateStatus(made);
    return grads;
  }
  const Scope s = scope.NewSubScope(absl::StrCat(name_, "/loss_scale"));
  Output inverse = ops::RealDiv(s, ops::Const(s, 1.0f), loss_scale_->Read(s));
  // x * 0 is 0 for every finite x and NaN for Inf and NaN: the sum of
  // those over every gradient is 0 exactly when all are finite.
  OutputList checks;
  std::vector<GradAndVar> out;
  for (const auto& [grad, var] : grads) {
    Output factor = grad.type() == DT_FLOAT ? inverse : ops::Cast(s, inverse, grad.type());
    Output g = ops::Mul(s, grad, factor);
    Output zeros = ops::Mul(s, g, ops::ZerosLike(s, factor));
    Output flat = ops::Reshape(s, zeros, ops::Const(s, {-1}));
    checks.push_back(ops::Cast(s, ops::Sum(s, flat, ops::Const(s, 0)), DT_DOUBLE));
    out.push_back({g, var});
  }
  Output total = checks.size() == 1 ? checks[0] : ops::AddN(s, checks);
  total = CombineSquaredNorm(s, total);  // a strategy sharding the gradients sums the shards'
  *finite = ops::Equal(s, total, ops::Const(s, 0.0));
  // A step with a non-finite gradient applies nothing: the gradients of the
  // branch not taken are dead, so are the updates and the counter's increment.
  for (GradAndVar& p : out) p.first = ops::Switch(s, p.first, *finite).output_true;
  return out;
}

Node* Optimizer::FinishLossScaledStep(const Scope& scope, Node* train, Output finite) {
  const Scope s = scope.NewSubScope(absl::StrCat(name_, "/loss_scale"));
  const LossScaleOptions& o = loss_scale_options_;
  // Live on both branches: the applied step's token or the skipped one's.
  ops::SwitchOutputs token = ops::Switch(s, ops::Const(s, 0.0f), finite);
  Output applied = ops::Identity(s.WithControlDependencies(std::vector<Node*>{train}), token.output_true);
  Output skipped = ops::Identity(s, token.output_false);
  Output done = ops::Merge(s, {skipped, applied}).output;
  // The scale: doubled after growth_steps finite steps in a row, halved
  // (not below 1) on a non-finite one.
  Output scale = loss_scale_->Read(s);
  Output good = ops::AddV2(s, good_steps_->Read(s), ops::Const(s, int64_t{1}));
  Output grow = ops::GreaterEqual(s, good, ops::Const(s, o.growth_steps));
  Output multiplier = ops::Const(s, static_cast<float>(o.multiplier));
  Output grown = ops::SelectV2(s, grow, ops::Mul(s, scale, multiplier), scale);
  Output shrunk = ops::Maximum(s, ops::RealDiv(s, scale, multiplier), ops::Const(s, 1.0f));
  Node* set_scale = loss_scale_->Assign(s, ops::SelectV2(s, finite, grown, shrunk));
  Output zero = ops::Const(s, int64_t{0});
  Node* set_good = good_steps_->Assign(
      s, ops::SelectV2(s, finite, ops::SelectV2(s, grow, zero, good), zero));
  if (!s.ok() || set_scale == nullptr || set_good == nullptr) return nullptr;
  return NodeBuilder(s, "NoOp", "step").ControlInput(done.node()).ControlInput(set_scale)
      .ControlInput(set_good).Finalize();
}

std::vector<GradAndVar> Optimizer::ClipByGlobalNorm(const Scope& scope, const std::vector<GradAndVar>& grads) {
  const Scope s = scope.NewSubScope(absl::StrCat(name_, "/clip_by_global_norm"));
  // The norm in float64 whatever the gradients' dtypes.
  OutputList squares;
  for (const auto& [grad, var] : grads) {
    Output g = ops::Cast(s, grad, DT_DOUBLE);
    Output flat = ops::Reshape(s, g, ops::Const(s, {-1}));
    squares.push_back(ops::Sum(s, ops::Square(s, flat), ops::Const(s, 0)));
  }
  Output norm =
      ops::Sqrt(s, CombineSquaredNorm(s, squares.size() == 1 ? squares[0] : ops::AddN(s, squares)));
  Output clip = ops::Const(s, clip_global_norm_);
  Output scale = ops::RealDiv(s, clip, ops::Maximum(s, norm, clip));
  std::vector<GradAndVar> out;
  for (const auto& [grad, var] : grads) {
    out.push_back({ops::Mul(s, grad, CastTo(s, scale, var->dtype())), var});
  }
  return out;
}

Node* SGD::ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) {
  return ops::ResourceApplyGradientDescent(scope, var->handle(), ctx.LearningRate(var->dtype()),
                                           grad);
}

Node* SGD::ApplySparse(const Scope& scope, Output values, Output indices, Variable* var,
                       StepContext& ctx) {
  return ops::ResourceScatterSub(scope, var->handle(), indices,
                                 ops::Mul(scope, values, ctx.LearningRate(var->dtype())));
}

void Momentum::CreateSlots(const Scope& scope, Variable* var) {
  AddSlot(scope, var, "Momentum", name());
}

Node* Momentum::ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) {
  Variable* accum = GetSlot(var, "Momentum");
  if (accum == nullptr) return nullptr;
  const DataType dt = var->dtype();
  return ops::ResourceApplyMomentum(scope, var->handle(), accum->handle(), ctx.LearningRate(dt),
                                    grad, ctx.Constant("momentum", momentum_, dt),
                                    ops::ApplyAttrs().UseNesterov(use_nesterov_));
}

void Adam::CreateSlots(const Scope& scope, Variable* var) {
  AddSlot(scope, var, "m", name());
  AddSlot(scope, var, "v", absl::StrCat(name(), "_1"));
}

Node* Adam::ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) {
  Variable* m = GetSlot(var, "m");
  Variable* v = GetSlot(var, "v");
  if (m == nullptr || v == nullptr) return nullptr;
  const DataType dt = var->dtype();
  const Scope& s = ctx.scope();
  // t = step + 1: the bias corrections of the update being applied.
  Output t = ctx.Cached("t", DT_DOUBLE, [&] {
    return ops::Cast(s, ops::AddV2(s, ctx.step(), ops::Const(s, int64_t{1})), DT_DOUBLE);
  });
  auto power = [&](const char* key, double beta) {
    return ctx.Cached(key, dt, [&] { return CastTo(s, ops::Pow(s, ops::Const(s, beta), t), dt); });
  };
  return ops::ResourceApplyAdam(
      scope, var->handle(), m->handle(), v->handle(), power("beta1_power", options_.beta1),
      power("beta2_power", options_.beta2), ctx.LearningRate(dt),
      ctx.Constant("beta1", options_.beta1, dt), ctx.Constant("beta2", options_.beta2, dt),
      ctx.Constant("epsilon", options_.epsilon, dt), grad,
      ops::ApplyAttrs().UseNesterov(options_.use_nesterov));
}

}  // namespace train
}  // namespace strata

namespace strata {
namespace train {

Node* AdamW::ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) {
  const DataType dt = var->dtype();
  Output rate = ops::Mul(scope, ctx.LearningRate(dt), ctx.Constant("weight_decay", weight_decay_, dt));
  Node* decay = var->AssignSub(scope, ops::Mul(scope, rate, var->Read(scope)));
  if (decay == nullptr) return nullptr;
  return Adam::ApplyDense(scope.WithControlDependencies({decay}), grad, var, ctx);
}

}  // namespace train
}  // namespace strata
