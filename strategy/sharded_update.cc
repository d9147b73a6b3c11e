#include "strategy/sharded_update.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "base/status.h"
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
  // Groups by dtype, each in creation order (the same on every replica).
  std::vector<train::GradAndVar> sorted = grads_and_vars;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second->creation_index() < b.second->creation_index();
  });
  std::vector<DataType> dtypes;
  for (const auto& [grad, var] : sorted) {
    if (var->dtype() != DT_FLOAT && var->dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero_stage 1: variable '", var->name(), "' is ", DataTypeString(var->dtype()),
          "; sharded optimizer state needs float or double variables"));
    }
    if (std::find(dtypes.begin(), dtypes.end(), var->dtype()) == dtypes.end()) {
      dtypes.push_back(var->dtype());
    }
  }
  std::sort(dtypes.begin(), dtypes.end());
  std::vector<train::GradAndVar> out;
  for (DataType dtype : dtypes) {
    std::vector<train::Variable*> vars;
    std::vector<Output> grads;
    for (const auto& [grad, var] : sorted) {
      if (var->dtype() != dtype) continue;
      vars.push_back(var);
      grads.push_back(grad);
    }
    STRATA_ASSIGN_OR_RETURN(Group * g, FindOrMakeGroup(scope, ctx, optimizer_name, dtype, vars));
    const Scope s =
        scope.NewSubScope(absl::StrCat("zero_", DataTypeString(dtype))).WithDevice(ctx.device());
    Pending p{g, {}, g->shard->replica(r)};
    for (train::Variable* v : vars) p.copies.push_back(v->replica(r));

    // The gradient block.
    OutputList flat;
    for (const Output& grad : grads) flat.push_back(Flat(s, grad));
    const int64_t padded = g->block * n;
    if (padded > g->total) flat.push_back(Zeros(s, dtype, padded - g->total));
    STRATA_ASSIGN_OR_RETURN(Output grad_block,
                            ctx.ReduceScatter(s, ReduceOp::kMean, ConcatOrOne(s, flat)));

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
  for (const Pending& p : pending_) {
    const Group& g = *p.group;
    const Scope s = scope.NewSubScope(absl::StrCat("zero_", DataTypeString(g.dtype), "_gather"))
                        .WithDevice(ctx.device());
    Output block = p.shard_copy->Read(s.WithControlDependencies(updates));
    STRATA_ASSIGN_OR_RETURN(Output all, ctx.AllGather(s, block));
    for (size_t i = 0; i < g.vars.size(); ++i) {
      const TensorShape& shape = g.vars[i]->shape();
      Output piece =
          ops::Slice(s, all, Int64s(s, {g.offsets[i]}), Int64s(s, {shape.num_elements()}));
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
