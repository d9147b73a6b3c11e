#include "strategy/distributed_optimizer.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "strategy/replica_context.h"

namespace strata {
namespace distribute {

std::vector<train::SparseGradient> ReplicaUpdates::AggregateSparse(
    const Scope& scope, const std::string& optimizer_name,
    const std::vector<train::SparseGradient>& sparse) {
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx != nullptr && ctx->strategy()->num_replicas_in_sync() > 1 && !sparse.empty()) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        optimizer_name, ": the sparse gradient of '", sparse.front().variable->name(),
        "' would need combining over ", ctx->strategy()->num_replicas_in_sync(),
        " replicas in sync, which this strategy does not do; partitioned variables (sparse "
        "updates) are ParameterServerStrategy's")));
    return {};
  }
  return sparse;
}

std::vector<train::GradAndVar> ReplicaUpdates::Aggregate(
    const Scope& scope, const std::string& optimizer_name,
    const std::vector<train::GradAndVar>& grads_and_vars) {
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) {
    // No strategy traces this step: plain Base, but mirrored copies would
    // drift apart, so the strategy checks (and rejects) that case.
    for (const auto& [grad, var] : grads_and_vars) {
      if (var->num_replicas() > 1) {
        scope.UpdateStatus(absl::FailedPreconditionError(absl::StrCat(
            "ApplyGradients outside Strategy::Run would update only the primary copy of mirrored "
            "variable '", var->name(), "'; apply gradients inside the step function")));
        return {};
      }
    }
    return grads_and_vars;
  }
  const int zero_stage = ctx->strategy()->options().zero_stage;
  if (zero_stage < 0 || zero_stage > 2) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "StrategyOptions::zero_stage is ", zero_stage, "; 0 (mirrored optimizer state), 1 "
        "(sharded optimizer state) and 2 (sharded state and gradients) are the stages Strata has")));
    return {};
  }
  if (zero_stage >= 1 && ctx->strategy()->options().gradient_compression == "powersgd") {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "StrategyOptions::gradient_compression 'powersgd' does not combine with zero_stage 1 or 2: "
        "ZeRO reduce-scatters whole gradients, PowerSGD all-reduces low-rank factors of them"));
    return {};
  }
  if (zero_stage >= 1 && ctx->num_replicas_in_sync() > 1) {
    // The strategy's checks first (variables made under it), then sharding.
    absl::Status checked = ctx->strategy()->CheckGradientVariables(grads_and_vars);
    absl::StatusOr<std::vector<train::GradAndVar>> out =
        checked.ok() ? sharded_.Scatter(scope, *ctx, optimizer_name, grads_and_vars) : checked;
    if (!out.ok()) {
      scope.UpdateStatus(out.status());
      return {};
    }
    if (ctx->replica_id() > 0) {
      for (const auto& [grad, copy] : *out) {
        auto [shard, replica] = sharded_.ShardOf(copy);
        if (shard != nullptr) component_of_[copy] = {shard, replica};
      }
    }
    return *std::move(out);
  }
  absl::StatusOr<std::vector<train::GradAndVar>> out =
      ctx->strategy()->AggregateGradients(scope, grads_and_vars);
  if (!out.ok()) {
    scope.UpdateStatus(out.status());
    return {};
  }
  if (ctx->replica_id() > 0) {
    for (size_t i = 0; i < out->size(); ++i) {
      train::Variable* v = grads_and_vars[i].second;
      if (v->distributed_by() != nullptr) component_of_[(*out)[i].second] = {v, ctx->replica_id()};
    }
  }
  return *std::move(out);
}

std::vector<Node*> ReplicaUpdates::Finish(const Scope& scope, const std::vector<Node*>& updates) {
  if (!sharded_.sharding()) return updates;
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) {
    scope.UpdateStatus(absl::InternalError("sharded updates finish outside Strategy::Run"));
    return updates;
  }
  absl::StatusOr<std::vector<Node*>> assigns = sharded_.Finish(scope, *ctx, updates);
  if (!assigns.ok()) {
    scope.UpdateStatus(assigns.status());
    return updates;
  }
  return *std::move(assigns);
}

Output ReplicaUpdates::CombineSquaredNorm(const Scope& scope, Output part) {
  ReplicaContext* ctx = ReplicaContext::Current();
  if (!sharded_.sharding() || ctx == nullptr) return part;
  // Each replica holds a block of the gradients: the squares of all blocks.
  absl::StatusOr<Output> sum = ctx->AllReduce(scope, ReduceOp::kSum, part);
  if (!sum.ok()) {
    scope.UpdateStatus(sum.status());
    return part;
  }
  return *sum;
}

void ReplicaUpdates::CreateSlots(const Scope& scope, train::Variable* var,
                                 const std::function<void(const Scope&, train::Variable*)>& base) {
  auto comp = component_of_.find(var);
  if (comp == component_of_.end()) {
    if (var->distributed_by() == nullptr) {
      base(scope, var);
      return;
    }
    // Replica 0 (or no Run): the slots are made through the creator stack,
    // i.e. mirrored by the strategy. Remember them, in order, for the other
    // replicas.
    std::vector<train::Variable*>& made = slots_[var];
    train::VariableCreatorScope record(
        [&made](const Scope& s, const train::VariableArgs& a, const train::VariableCreatorFn& next)
            -> absl::StatusOr<std::unique_ptr<train::Variable>> {
          absl::StatusOr<std::unique_ptr<train::Variable>> v = next(s, a);
          if (v.ok() && *v != nullptr) made.push_back(v->get());
          return v;
        });
    base(scope, var);
    absl::Status marked = sharded_.MarkSlots(var, made);
    if (!marked.ok()) scope.UpdateStatus(marked);
    return;
  }
  // Component r of a mirrored variable, in replica r's trace. Base would make
  // new slot variables; instead each slot it asks for (in the order replica 0
  // asked) is a view of component r of replica 0's mirrored slot. The view
  // must be a Variable object owned by a collection; registering it in the
  // model's graph would list every slot once per replica (and a checkpoint
  // would save the copies), so it is registered in side_'s graph, which
  // lives as long as this optimizer.
  // Named copies, not a structured binding: the view's lambda captures them.
  const auto mirrored = comp->second.first;
  const auto replica = comp->second.second;
  auto made = slots_.find(mirrored);
  if (made == slots_.end()) {
    scope.UpdateStatus(absl::InternalError(absl::StrCat(
        "replica ", replica, " updates '", mirrored->name(),
        "' but replica 0 made no slots for it: every replica must run the same step")));
    return;
  }
  size_t next_slot = 0;
  {
    train::VariableCreatorScope view(
        [&](const Scope&, const train::VariableArgs& a, const train::VariableCreatorFn&)
            -> absl::StatusOr<std::unique_ptr<train::Variable>> {
          if (next_slot >= made->second.size()) {
            return absl::InternalError(absl::StrCat(
                "replica ", replica, " asks for more slots of '", mirrored->name(),
                "' than replica 0 made"));
          }
          const train::Variable* slot = made->second[next_slot++];
          if (slot->num_replicas() <= replica || slot->dtype() != a.dtype ||
              !(slot->shape() == a.shape)) {
            return absl::InternalError(absl::StrCat("replica ", replica, "'s slot '", a.name,
                                                    "' does not match replica 0's"));
          }
          const train::Variable* c = slot->replica(replica);
          return std::make_unique<train::Variable>(c->name(), c->handle(), c->dtype(), c->shape(),
                                                   /*initializer=*/nullptr, c->device(),
                                                   /*trainable=*/false);
        });
    base(side_, var);
  }
  if (!side_.ok()) scope.UpdateStatus(side_.status());
  if (scope.ok() && next_slot != made->second.size()) {
    scope.UpdateStatus(absl::InternalError(absl::StrCat(
        "replica ", replica, " made ", next_slot, " slots for '", mirrored->name(),
        "', replica 0 made ", made->second.size())));
  }
}

}  // namespace distribute
}  // namespace strata
