#include "strategy/sharded_update.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "base/status.h"
#include "strategy/gradient_bucketing.h"
#include "train/initializers.h"

namespace strata {
namespace distribute {
namespace {

Output Int64s(const Scope& s, std::initializer_list<int64_t> values) {
  return ops::Const<int64_t>(s, values);
}

Output Flat(const Scope& s, Output x) { return ops::Reshape(s, x, Int64s(s, {-1})); }

Output Zeros(const Scope& s, DataType dtype, int64_t n) {
  return ops::Fill(s, Int64s(s, {n}), train::ScalarConst(s, dtype, 0));
}

Output ConcatOrOne(const Scope& s, const OutputList& parts) {
  if (parts.size() == 1) return ops::Identity(s, parts[0]);
  return ops::Concat(s, parts, ops::Const(s, 0));
}

}  // namespace

absl::StatusOr<ShardedUpdates::Group*> ShardedUpdates::FindOrMakeGroup(
    const Scope& scope, ReplicaContext& ctx, const std::string& optimizer_name, DataType dtype,
    const std::vector<train::Variable*>& vars) {
  for (const std::unique_ptr<Group>& g : groups_) {
    if (g->dtype == dtype && g->vars == vars) return g.get();
  }
  if (ctx.replica_id() != 0) {
    return absl::InternalError(absl::StrCat(
        "replica ", ctx.replica_id(), " shards ", DataTypeString(dtype), " variables (the first '",
        vars[0]->name(), "') that replica 0 did not: every replica must run the same step"));
  }
  const Strategy& strategy = *ctx.strategy();
  const int n = strategy.num_replicas_in_sync();
  auto g = std::make_unique<Group>();
  g->dtype = dtype;
  g->vars = vars;
  for (train::Variable* v : vars) {
    g->offsets.push_back(g->total);
    g->total += v->shape().num_elements();
  }
  g->block = std::max<int64_t>(1, (g->total + n - 1) / n);
  g->component_of_block.assign(n, -1);
  for (int r = 0; r < strategy.num_local_replicas(); ++r) {
    g->component_of_block[strategy.collective_rank(r)] = r;
  }
  // Made in replica 0's trace, so the strategy mirrors it (one copy per
  // replica, named as on one device).
  std::string name = absl::StrCat(optimizer_name, "/zero_", DataTypeString(dtype));
  if (groups_.size() > 0) absl::StrAppend(&name, "_", groups_.size());
  g->shard = train::CreateVariable(scope.WithNoControlDependencies(), name,
                                   TensorShape{g->block}, dtype, train::Zeros(),
                                   /*trainable=*/false);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (g->shard == nullptr || g->shard->num_replicas() != strategy.num_local_replicas()) {
    return absl::InternalError(absl::StrCat("the shard variable '", name,
                                            "' was not mirrored over the strategy's replicas"));
  }
  train::ShardedContents contents;
  for (train::Variable* v : vars) {
    contents.names.push_back(v->name());
    contents.shapes.push_back(v->shape());
  }
  contents.block = g->block;
  contents.component_of_block = g->component_of_block;
  contents.saved = false;  // rewritten from the parameters every step
  if (strategy.num_workers() > 1) {
    // A checkpoint's read of the whole state: the workers' blocks, gathered
    // over the workers (their group, as Strategy::Reduce's).
    Strategy* owner = ctx.strategy();
    contents.gather_processes = [owner](const Scope& s, Output local) {
      absl::StatusOr<Output> all = owner->GatherWorkers(s, local);
      if (!all.ok()) s.UpdateStatus(all.status());
      return all.ok() ? *all : Output();
    };
  }
  g->shard->set_sharded_contents(std::move(contents));
  groups_.push_back(std::move(g));
  return groups_.back().get();
}

absl::StatusOr<std::vector<train::GradAndVar>> ShardedUpdates::Scatter(
    const Scope& scope, ReplicaContext& ctx, const std::string& optimizer_name,
    const std::vector<train::GradAndVar>& grads_and_vars) {
  pending_.clear();
  const int r = ctx.replica_id();
  const int n = ctx.num_replicas_in_sync();
  const int64_t k = ctx.collective_rank();
  // Groups: the gradient buckets of the all-reduce (gradient_bucketing.h,
  // the same plan on every replica): the last layers' first, so that their
  // reduce-scatter, update and all-gather overlap the rest of the backward
  // pass.
  std::vector<GradientSpec> specs;
  for (size_t i = 0; i < grads_and_vars.size(); ++i) {
    const train::Variable* var = grads_and_vars[i].second;
    if (var->dtype() != DT_FLOAT && var->dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero_stage 1: variable '", var->name(), "' is ", DataTypeString(var->dtype()),
          "; sharded optimizer state needs float or double variables"));
    }
    const int64_t order =
        var->creation_index() < 0 ? static_cast<int64_t>(i) : var->creation_index();
    specs.push_back({var->dtype(), var->shape().num_elements(), order});
  }
  // Compressed gradients (StrategyOptions::gradient_compression) are
  // reduce-scattered in the narrow dtype, the buckets sized by it.
  STRATA_ASSIGN_OR_RETURN(const DataType wire, GradientWireDtype(ctx.strategy()->options()));
  std::vector<GradientSpec> wire_specs = specs;
  if (wire != DT_INVALID) {
    for (GradientSpec& spec : wire_specs) {
      if (spec.dtype == DT_FLOAT) spec.dtype = wire;
    }
  }
  const std::vector<std::vector<int>> buckets =
      PlanGradientBuckets(wire_specs, ctx.strategy()->options().gradient_bucket_bytes);
  std::vector<train::GradAndVar> out;
  for (const std::vector<int>& bucket : buckets) {
    const DataType dtype = specs[bucket[0]].dtype;
    std::vector<train::Variable*> vars;
    std::vector<Output> grads;
    for (int i : bucket) {
      grads.push_back(grads_and_vars[i].first);
      vars.push_back(grads_and_vars[i].second);
    }
    STRATA_ASSIGN_OR_RETURN(Group * g, FindOrMakeGroup(scope, ctx, optimizer_name, dtype, vars));
    const Scope s = scope.NewSubScope(absl::StrCat("zero_", pending_.size())).WithDevice(ctx.device());
    Pending p{g, {}, g->shard->replica(r)};
    for (train::Variable* v : vars) p.copies.push_back(v->replica(r));

    // The gradient block (in the wire's dtype, back in the variables').
    const DataType travel = wire != DT_INVALID && dtype == DT_FLOAT ? wire : dtype;
    OutputList flat;
    for (const Output& grad : grads) {
      Output f = Flat(s, grad);
      flat.push_back(travel == dtype ? f : ops::Cast(s, f, travel));
    }
    const int64_t padded = g->block * n;
    if (padded > g->total) {
      Output zeros = Zeros(s, dtype, padded - g->total);
      flat.push_back(travel == dtype ? zeros : ops::Cast(s, zeros, travel));
    }
    STRATA_ASSIGN_OR_RETURN(Output grad_block,
                            ctx.ReduceScatter(s, ReduceOp::kMean, ConcatOrOne(s, flat)));
    if (travel != dtype) grad_block = ops::Cast(s, grad_block, dtype);

    // This replica's block of the parameters, cut from the variables it
    // overlaps, into the shard variable.
    const int64_t lo = k * g->block;
    const int64_t hi = lo + g->block;
    OutputList pieces;
    for (size_t i = 0; i < vars.size(); ++i) {
      const int64_t begin = std::max(lo, g->offsets[i]);
      const int64_t end = std::min(hi, g->offsets[i] + vars[i]->shape().num_elements());
      if (begin >= end) continue;
      Output whole = Flat(s, p.copies[i]->Read(s));
      pieces.push_back(ops::Slice(s, whole, Int64s(s, {begin - g->offsets[i]}),
                                  Int64s(s, {end - begin})));
    }
    const int64_t filled = std::clamp(g->total - lo, int64_t{0}, g->block);
    if (filled < g->block) pieces.push_back(Zeros(s, dtype, g->block - filled));
    Node* load = p.shard_copy->Assign(s, ConcatOrOne(s, pieces));
    STRATA_RETURN_IF_ERROR(scope.status());
    // The update reads the shard variable after the load. Replica 0 updates
    // the mirrored variable itself (its handle is copy 0's), so that the
    // optimizer makes mirrored slots for it (DistributedOptimizer).
    out.push_back({ops::Identity(s.WithControlDependencies({load}), grad_block),
                   r == 0 ? g->shard : p.shard_copy});
    pending_.push_back(std::move(p));
  }
  STRATA_RETURN_IF_ERROR(scope.status());
  return out;
}

absl::StatusOr<std::vector<Node*>> ShardedUpdates::Finish(const Scope& scope, ReplicaContext& ctx,
                                                          const std::vector<Node*>& updates) {
  std::vector<Node*> assigns;
  for (size_t k = 0; k < pending_.size(); ++k) {
    const Pending& p = pending_[k];
    const Group& g = *p.group;
    const Scope s = scope.NewSubScope(absl::StrCat("zero_", k, "_gather")).WithDevice(ctx.device());
    // Update k is group k's (the optimizer applies the pairs in order): the
    // group's all-gather waits for it alone.
    const std::vector<Node*> after =
        updates.size() == pending_.size() ? std::vector<Node*>{updates[k]} : updates;
    Output block = p.shard_copy->Read(s.WithControlDependencies(after));
    STRATA_ASSIGN_OR_RETURN(Output all, ctx.AllGather(s, block));
    for (size_t i = 0; i < g.vars.size(); ++i) {
      const TensorShape& shape = g.vars[i]->shape();
      // A lone unpadded variable is the whole gather (no copy).
      const bool whole = g.vars.size() == 1 && g.total == g.block * ctx.num_replicas_in_sync();
      Output piece = whole ? all
                           : ops::Slice(s, all, Int64s(s, {g.offsets[i]}),
                                        Int64s(s, {shape.num_elements()}));
      std::vector<int64_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
      Output value = ops::Reshape(
          s, piece, ops::Const<int64_t>(s, dims, TensorShape{static_cast<int64_t>(dims.size())}));
      assigns.push_back(p.copies[i]->Assign(s, value));
    }
  }
  pending_.clear();
  STRATA_RETURN_IF_ERROR(scope.status());
  return assigns;
}

std::pair<train::Variable*, int> ShardedUpdates::ShardOf(const train::Variable* component) const {
  for (const std::unique_ptr<Group>& g : groups_) {
    for (int r = 0; r < g->shard->num_replicas(); ++r) {
      if (g->shard->replica(r) == component) return {g->shard, r};
    }
  }
  return {nullptr, -1};
}

absl::Status ShardedUpdates::MarkSlots(const train::Variable* shard,
                                       const std::vector<train::Variable*>& slots) const {
  const train::ShardedContents* of = shard->sharded_contents();
  if (of == nullptr) return absl::OkStatus();
  const std::string prefix = absl::StrCat(shard->name(), "/");
  for (train::Variable* slot : slots) {
    if (!absl::StartsWith(slot->name(), prefix) || slot->shape() != shard->shape()) {
      return absl::InternalError(absl::StrCat("slot '", slot->name(), "' of the shard variable '",
                                              shard->name(), "' is not named or shaped after it"));
    }
    const std::string suffix = slot->name().substr(prefix.size());
    train::ShardedContents contents = *of;
    for (std::string& name : contents.names) absl::StrAppend(&name, "/", suffix);
    contents.saved = true;
    slot->set_sharded_contents(std::move(contents));
  }
  return absl::OkStatus();
}

}  // namespace distribute
}  // namespace strata
