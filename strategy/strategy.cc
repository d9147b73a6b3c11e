#include "strategy/strategy.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "runtime/device_name.h"
#include "strategy/distributed_dataset.h"
#include "strategy/gradient_bucketing.h"
#include "strategy/powersgd.h"
#include "strategy/replica_context.h"
#include "strategy/strategy_devices.h"
#include "train/initializers.h"
#include "train/phase.h"

namespace strata {
namespace distribute {

namespace {

// The strategies whose scope is active on this thread, innermost last.
std::vector<const Strategy*>& ActiveScopes() {
  thread_local std::vector<const Strategy*> active;
  return active;
}

bool ScopeActive(const Strategy* s) {
  const auto& a = ActiveScopes();
  return std::find(a.begin(), a.end(), s) != a.end();
}

// Group keys are unique per strategy object in the process, handed out in
// creation order (processes that make their strategies in the same order
// agree on them).
int NextGroupKey() {
  static std::atomic<int> next{1};
  return next.fetch_add(1);
}

// The node-name prefix of `scope` ("a/b", or "" for a root scope).
std::string PrefixOf(const strata::Scope& scope) {
  const std::string probe = scope.WithOpName("x").GetUniqueNameForOp("");
  return probe.size() > 2 ? probe.substr(0, probe.size() - 2) : "";
}

bool IsFloating(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }

}  // namespace

const char* ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "mean"; }

std::vector<std::string> PerReplica::names() const {
  std::vector<std::string> out;
  for (const Output& v : values_) out.push_back(v.name());
  return out;
}

StrategyScope::StrategyScope(Strategy* strategy) {
  if (ScopeActive(strategy)) return;  // nested: the outer scope's creator does the work
  ActiveScopes().push_back(strategy);
  creator_.emplace([strategy](const strata::Scope& s, const train::VariableArgs& a,
                              const train::VariableCreatorFn& next) {
    return strategy->CreateVariable(s, a, next);
  });
}

StrategyScope::~StrategyScope() {
  if (creator_.has_value()) {
    creator_.reset();
    ActiveScopes().pop_back();
  }
}

Strategy::Strategy(std::vector<std::string> devices, DeviceOptions machine,
                   StrategyOptions options)
    : Strategy(std::move(devices), std::move(machine), std::move(options), 1, 0) {}

Strategy::Strategy(std::vector<std::string> devices, DeviceOptions machine,
                   StrategyOptions options, int num_workers, int worker_index)
    : devices_(std::move(devices)),
      machine_(std::move(machine)),
      options_(std::move(options)),
      num_workers_(num_workers),
      worker_index_(worker_index),
      group_key_(NextGroupKey()),
      worker_group_key_(NextGroupKey()) {}

Strategy::~Strategy() = default;

absl::StatusOr<DataType> GradientWireDtype(const StrategyOptions& options) {
  const std::string& c = options.gradient_compression;
  if (c == "none" || c.empty() || c == "powersgd") return DT_INVALID;
  if (c == "bfloat16") return DT_BFLOAT16;
  if (c == "float16") return DT_HALF;
  return absl::InvalidArgumentError(absl::StrCat("StrategyOptions::gradient_compression is '", c,
                                                 "'; use none, bfloat16, float16 or powersgd"));
}

int Strategy::collective_rank(int local_replica) const {
  int before = 0;
  for (const std::string& d : devices_) before += d < devices_[local_replica] ? 1 : 0;
  return worker_index_ * num_local_replicas() + before;
}

SessionOptions Strategy::session_options() const {
  SessionOptions o;
  o.devices = machine_;
  o.device_mgr = device_mgr_.get();
  o.collective_executor = collective_executor_;
  o.remote_tasks = remote_tasks_;
  // Initializers' random ops have CPU kernels only: they run on the host and
  // their values are copied to the replica's device.
  o.host_fallback_without_kernel = true;
  return o;
}

void Strategy::AdoptDevices(std::unique_ptr<DeviceMgr> devices,
                            std::unique_ptr<CollectiveExecutor> executor) {
  device_mgr_ = std::move(devices);
  owned_executor_ = std::move(executor);
  if (owned_executor_ != nullptr) collective_executor_ = owned_executor_.get();
}

StrategyScope Strategy::Scope() { return StrategyScope(this); }

std::vector<std::string> Strategy::LocalDevices(const DeviceOptions& machine) {
  std::vector<std::string> out;
  for (int i = 0; i < machine.num_cpu_devices; ++i) {
    out.push_back(DeviceName::Full(machine.job, machine.replica, machine.task, "CPU", i).ToString());
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Strategy::ResolveDevices(
    const std::vector<std::string>& specs, const DeviceOptions& machine) {
  return ResolveDeviceSpecs(specs, LocalDevices(machine));
}

absl::StatusOr<std::unique_ptr<train::Variable>> Strategy::CreateVariable(
    const strata::Scope& scope, const train::VariableArgs& args,
    const train::VariableCreatorFn& next) {
  for (const Strategy* s : ActiveScopes()) {
    if (s != this) {
      return absl::FailedPreconditionError(absl::StrCat(
          "variable '", args.name, "' is made under the scopes of two strategies; enter one "
          "strategy's Scope() at a time"));
    }
  }
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) return CreateDistributedVariable(scope, args, next);
  if (ctx->strategy() != this) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variable '", args.name, "' is made while another strategy's Run traces a step"));
  }
  // Made while tracing a replica: made once, for every replica, outside the
  // replica's name prefix, so it has the name it would have on one device.
  const std::string full = scope.WithOpName(args.name).GetUniqueNameForOp("");
  const std::string prefix = absl::StrCat(ctx->name_prefix(), "/");
  if (!absl::StartsWith(full, prefix)) return CreateDistributedVariable(scope, args, next);
  train::VariableArgs stripped = args;
  stripped.name = full.substr(prefix.size());
  // The rest of the name is relative to the replica's scope, i.e. to Run's.
  strata::Scope base = ctx->cross_replica_scope().WithNoControlDependencies();
  // A device asked for stays asked for (an optimizer's slot beside its
  // variable, for a strategy that places variables by it).
  if (!scope.device().empty()) base = base.WithDevice(scope.device());
  return CreateDistributedVariable(base, stripped, next);
}

absl::Status Strategy::CheckReplicaVariables(const strata::Scope& scope, int replica,
                                             int first_node_id) const {
  if (num_replicas_in_sync() == 1) return absl::OkStatus();
  // The handles and initializers of this strategy's variables in this graph.
  absl::flat_hash_map<const Node*, const train::Variable*> owned;  // handle node -> variable
  absl::flat_hash_set<const Node*> initializers;
  for (train::Variable* v : train::GlobalVariables(scope)) {
    if (v->distributed_by() != this) continue;
    for (int r = 0; r < v->num_replicas(); ++r) {
      owned[v->replica(r)->handle().node()] = v;
      initializers.insert(v->replica(r)->initializer());
    }
  }
  const Graph* g = scope.graph();
  const std::string& device = devices_[replica];
  for (int id = first_node_id; id < g->num_node_ids(); ++id) {
    const Node* n = g->FindNodeId(id);
    if (n == nullptr || initializers.contains(n)) continue;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() || !e->src->IsOp("VarHandleOp")) continue;
      const Node* h = e->src;
      auto it = owned.find(h);
      if (it == owned.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replica ", replica, ": node '", n->name(), "' uses variable '", h->name(),
            "', which was not made under this strategy's Scope() (or inside Run): every replica "
            "would share one copy and update it ", num_replicas_in_sync(),
            " times. Make the model's variables inside strategy.Scope()"));
      }
      if (h->requested_device() != device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replica ", replica, " (", device, "): node '", n->name(), "' uses the copy of '",
            it->second->name(), "' on ", h->requested_device(),
            "; each replica must use its own copy (read variables with Variable::Read and "
            "update them with a DistributedOptimizer)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> Strategy::Run(const strata::Scope& scope, const StepFn& step_fn,
                                        const std::vector<PerReplica>& inputs) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (ReplicaContext::Current() != nullptr) {
    return absl::FailedPreconditionError("Strategy::Run called while a step is being traced");
  }
  const int n = num_local_replicas();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].num_replicas() != n) {
      return absl::InvalidArgumentError(absl::StrCat("Run: input ", i, " has ",
                                                     inputs[i].num_replicas(),
                                                     " per-replica values for ", n, " replicas"));
    }
    for (int r = 0; r < n; ++r) {
      if (!inputs[i][r].ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Run: input ", i, " of replica ", r, " is null"));
      }
    }
  }
  StrategyScope in_scope = Scope();  // variables made by the step are distributed
  const int first_key = next_instance_key_;
  std::vector<std::vector<ReplicaContext::CollectiveRecord>> collectives(n);
  std::vector<ReplicaResult> results(n);
  for (int r = 0; r < n; ++r) {
    const strata::Scope rs = scope.NewSubScope(absl::StrCat("replica_", r)).WithDevice(devices_[r]);
    ReplicaContext ctx(this, r, rs, scope, PrefixOf(rs), first_key);
    std::vector<Output> replica_inputs;
    for (const PerReplica& in : inputs) replica_inputs.push_back(in[r]);
    const int first_node_id = scope.graph()->num_node_ids();
    ReplicaContext* previous = ReplicaContext::SetCurrent(&ctx);
    absl::StatusOr<ReplicaResult> result;
    {
      // What layers read (train/phase.h): the replica among all workers' and
      // a differentiable sum over them (synchronized batch statistics).
      train::ReplicaInfo info;
      info.replica_id = worker_index_ * n + r;
      info.num_replicas = num_replicas_in_sync();
      if (info.num_replicas > 1) {
        info.all_reduce_sum = [&ctx](const strata::Scope& s, const std::vector<Output>& values) {
          return ctx.AllReduce(s, ReduceOp::kSum, values, /*differentiable=*/true);
        };
      }
      train::ReplicaScope replica(std::move(info));
      result = step_fn(ctx, replica_inputs);
    }
    ReplicaContext::SetCurrent(previous);
    const std::string where = absl::StrCat("replica ", r, " (", devices_[r], "): ");
    if (!result.ok()) return AnnotateStatus(result.status(), where);
    STRATA_RETURN_IF_ERROR(AnnotateStatus(scope.status(), where));
    for (const Output& v : result->values) {
      if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(where, "a returned value is null"));
    }
    for (Node* op : result->ops) {
      if (op == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, "a returned op is null"));
    }
    STRATA_RETURN_IF_ERROR(CheckReplicaVariables(scope, r, first_node_id));
    collectives[r] = ctx.collectives();
    results[r] = *std::move(result);
  }

  // Every replica must have issued the same collectives, in the same order,
  // or some would wait for partners that never come.
  for (int r = 1; r < n; ++r) {
    if (collectives[r].size() != collectives[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Run: replica ", r, " made ", collectives[r].size(), " collectives, replica 0 made ",
          collectives[0].size(), "; every replica must make the same collectives in the same order"));
    }
    for (size_t k = 0; k < collectives[r].size(); ++k) {
      const auto& a = collectives[0][k];
      const auto& b = collectives[r][k];
      if (a.dtype != b.dtype || !a.shape.IsCompatibleWith(b.shape)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Run: collective ", k, " (instance key ", a.instance_key, ") differs between replicas: '",
            a.node, "' on replica 0 reduces ", DataTypeString(a.dtype), " ", a.shape.DebugString(),
            ", '", b.node, "' on replica ", r, " ", DataTypeString(b.dtype), " ",
            b.shape.DebugString()));
      }
    }
  }
  next_instance_key_ += static_cast<int>(collectives[0].size());

  RunResult out;
  const size_t num_values = results[0].values.size();
  for (int r = 1; r < n; ++r) {
    if (results[r].values.size() != num_values) {
      return absl::InvalidArgumentError(absl::StrCat("Run: replica ", r, " returned ",
                                                     results[r].values.size(),
                                                     " values, replica 0 ", num_values));
    }
  }
  for (size_t k = 0; k < num_values; ++k) {
    std::vector<Output> per;
    for (int r = 0; r < n; ++r) {
      if (results[r].values[k].type() != results[0].values[k].type()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Run: value ", k, " is ", DataTypeString(results[0].values[k].type()),
            " on replica 0 and ", DataTypeString(results[r].values[k].type()), " on replica ", r));
      }
      per.push_back(results[r].values[k]);
    }
    out.values.emplace_back(std::move(per));
  }
  std::vector<Node*> ops;
  for (const ReplicaResult& rr : results) ops.insert(ops.end(), rr.ops.begin(), rr.ops.end());
  if (!ops.empty()) {
    NodeBuilder b(scope, "NoOp", "run");
    for (Node* op : ops) b.ControlInput(op);
    out.op = b.Finalize();
    STRATA_RETURN_IF_ERROR(scope.status());
  }
  return out;
}

absl::StatusOr<Output> Strategy::Reduce(const strata::Scope& scope, ReduceOp op,
                                        const PerReplica& value) {
  STRATA_RETURN_IF_ERROR(scope.status());
  const int n = num_local_replicas();
  if (value.num_replicas() != n) {
    return absl::InvalidArgumentError(absl::StrCat("Reduce: ", value.num_replicas(),
                                                   " per-replica values for ", n, " replicas"));
  }
  const DataType dt = value[0].type();
  for (int r = 0; r < n; ++r) {
    if (!value[r].ok()) {
      return absl::InvalidArgumentError(absl::StrCat("Reduce: the value of replica ", r, " is null"));
    }
    if (value[r].type() != dt) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Reduce: ", value[0].name(), " is ", DataTypeString(dt), " but ", value[r].name(),
          " is ", DataTypeString(value[r].type())));
    }
  }
  if (op == ReduceOp::kMean && !IsFloating(dt)) {
    return absl::InvalidArgumentError(absl::StrCat("Reduce: the mean of ", DataTypeString(dt),
                                                   " values needs a floating dtype"));
  }
  const strata::Scope s = scope.NewSubScope(absl::StrCat("reduce_", ReduceOpName(op)))
                              .WithDevice(devices_[0]);
  Output total = n == 1 ? ops::Identity(s, value[0]) : ops::AddN(s, value.values());
  if (num_workers_ > 1) {
    total = ops::CollectiveReduce(s, total, num_workers_, worker_group_key_,
                                  NextWorkerInstanceKey(),
                                  ops::CollectiveAttrs()
                                      .MergeOp("Add")
                                      .FinalOp("Id")
                                      .TimeoutSeconds(options_.collective_timeout_seconds)
                                      .CommunicationHint(options_.communication_hint));
  }
  const int all = num_replicas_in_sync();
  if (op == ReduceOp::kMean && all > 1) {
    total = ops::RealDiv(s, total, train::ScalarConst(s, dt, all));
  }
  STRATA_RETURN_IF_ERROR(scope.status());
  return total;
}

absl::StatusOr<Output> Strategy::GatherWorkers(const strata::Scope& scope, Output value) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (!value.ok()) return absl::InvalidArgumentError("GatherWorkers: the value is null");
  if (num_workers_ == 1) return value;
  Output all = ops::CollectiveGather(scope.WithDevice(devices_[0]), value, num_workers_,
                                     worker_group_key_, NextWorkerInstanceKey(),
                                     ops::CollectiveAttrs()
                                         .TimeoutSeconds(options_.collective_timeout_seconds)
                                         .CommunicationHint(options_.communication_hint));
  STRATA_RETURN_IF_ERROR(scope.status());
  return all;
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::DistributeDataset(
    data::DatasetPtr batches, std::vector<InputSpec> specs) const {
  return DistributedDataset::Create(*this, std::move(batches), std::move(specs));
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::DistributeDataset(
    data::DatasetPtr batches, std::vector<InputSpec> specs, const DistributeOptions& options) const {
  return DistributedDataset::Create(*this, std::move(batches), std::move(specs), options);
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::DistributeDatasetsFromFunction(
    const DatasetFn& fn, std::vector<InputSpec> specs) const {
  return DistributedDataset::CreateFromFunction(*this, fn, std::move(specs));
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::DistributeDatasetsFromFunction(
    const DatasetFn& fn, std::vector<InputSpec> specs, const DistributeOptions& options) const {
  return DistributedDataset::CreateFromFunction(*this, fn, std::move(specs), options);
}

absl::Status Strategy::CheckGradientVariables(
    const std::vector<train::GradAndVar>& grads_and_vars) const {
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) return absl::OkStatus();
  if (ctx->strategy() != this) {
    return absl::FailedPreconditionError(
        "a DistributedOptimizer applies gradients inside the Run of another strategy");
  }
  if (num_replicas_in_sync() == 1) return absl::OkStatus();
  for (const auto& [grad, var] : grads_and_vars) {
    if (var->distributed_by() != this) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica ", ctx->replica_id(), ": variable '", var->name(),
          "' was not made under this strategy's Scope(), so the replicas have no copies of it "
          "to update"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<train::GradAndVar>> Strategy::AggregateGradients(
    const strata::Scope& scope, const std::vector<train::GradAndVar>& grads_and_vars) {
  ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) {
    for (const auto& [grad, var] : grads_and_vars) {
      if (var->num_replicas() > 1) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ApplyGradients outside Strategy::Run would update only the primary copy of mirrored "
            "variable '", var->name(), "'; apply gradients inside the step function"));
      }
    }
    return grads_and_vars;
  }
  STRATA_RETURN_IF_ERROR(CheckGradientVariables(grads_and_vars));
  const int n = num_replicas_in_sync();  // a lone replica reduces nothing
  const int r = ctx->replica_id();
  // Each replica updates its own copy: the primary object for replica 0
  // (its handle is component 0's), the component for the others.
  std::vector<train::GradAndVar> local;
  std::vector<GradientSpec> specs;
  OutputList grads;
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < grads_and_vars.size(); ++i) {
    const auto& [grad, var] = grads_and_vars[i];
    train::Variable* target = r == 0 ? var : var->replica(r);
    local.push_back({grad, target});
    const int64_t order = var->creation_index() < 0 ? static_cast<int64_t>(i) : var->creation_index();
    specs.push_back({var->dtype(), var->shape().num_elements(), order});
    grads.push_back(grad);
    shapes.push_back(var->shape());
  }
  STRATA_ASSIGN_OR_RETURN(const DataType wire, GradientWireDtype(options_));
  const bool powersgd = options_.gradient_compression == "powersgd";
  if (powersgd) STRATA_RETURN_IF_ERROR(PowerSgd::CheckOptions(options_));
  if (n == 1) return local;
  if (powersgd) {
    if (powersgd_ == nullptr) powersgd_ = std::make_unique<PowerSgd>();
    std::vector<train::GradAndVar> mine;
    for (size_t i = 0; i < grads_and_vars.size(); ++i) {
      mine.push_back({grads[i], grads_and_vars[i].second});
    }
    STRATA_ASSIGN_OR_RETURN(OutputList reduced, powersgd_->AllReduce(scope, *ctx, mine));
    for (size_t i = 0; i < local.size(); ++i) local[i].first = reduced[i];
    STRATA_RETURN_IF_ERROR(scope.status());
    return local;
  }
  // Compressed: float32 gradients cross the wire in `wire` (the buckets
  // sized by what they carry), and come back as float32.
  const strata::Scope compress = scope.NewSubScope("compress").WithDevice(ctx->device());
  if (wire != DT_INVALID) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].type() != DT_FLOAT) continue;
      grads[i] = ops::Cast(compress, grads[i], wire);
      specs[i].dtype = wire;
    }
  }
  const std::vector<std::vector<int>> buckets =
      PlanGradientBuckets(specs, options_.gradient_bucket_bytes);
  STRATA_ASSIGN_OR_RETURN(OutputList reduced,
                          AllReduceInBuckets(scope.NewSubScope("allreduce"), *ctx, ReduceOp::kMean,
                                             grads, shapes, buckets));
  for (size_t i = 0; i < local.size(); ++i) {
    local[i].first = reduced[i].type() == local[i].second->dtype()
                         ? reduced[i]
                         : ops::Cast(compress, reduced[i], local[i].second->dtype());
  }
  STRATA_RETURN_IF_ERROR(scope.status());
  return local;
}

}  // namespace distribute
}  // namespace strata
