#include "strategy/replica_context.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"

namespace strata {
namespace distribute {

namespace {

thread_local ReplicaContext* current_context = nullptr;

// The dtypes whose mean the collectives take (the narrow ones reduced in
// float and rounded once).
bool IsFloating(DataType dt) {
  return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_HALF || dt == DT_BFLOAT16;
}

// The dtypes the collective kernels reduce.
bool IsReducible(DataType dt) {
  switch (dt) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_INT32:
    case DT_INT64:
    case DT_HALF:
    case DT_BFLOAT16:
      return true;
    default:
      return false;
  }
}

}  // namespace

ReplicaContext* ReplicaContext::Current() { return current_context; }

ReplicaContext::ReplicaContext(Strategy* strategy, int replica_id, strata::Scope scope,
                               strata::Scope cross_replica_scope, std::string name_prefix,
                               int first_instance_key)
    : strategy_(strategy),
      replica_id_(replica_id),
      scope_(std::move(scope)),
      cross_replica_scope_(std::move(cross_replica_scope)),
      name_prefix_(std::move(name_prefix)),
      next_instance_key_(first_instance_key) {}

absl::StatusOr<std::vector<Output>> ReplicaContext::AllReduce(const strata::Scope& scope,
                                                              ReduceOp op,
                                                              const std::vector<Output>& values,
                                                              bool differentiable) {
  STRATA_RETURN_IF_ERROR(scope.status());
  for (size_t i = 0; i < values.size(); ++i) {
    const Output& v = values[i];
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllReduce on replica ", replica_id_, ": value ", i, " is null"));
    }
    if (!IsReducible(v.type())) {
      return absl::InvalidArgumentError(absl::StrCat("AllReduce on replica ", replica_id_, ": ",
                                                     v.name(), " is ", DataTypeString(v.type()),
                                                     "; collectives reduce float, double, half, "
                                                     "bfloat16, int32 and int64"));
    }
    if (op == ReduceOp::kMean && !IsFloating(v.type())) {
      return absl::InvalidArgumentError(absl::StrCat("AllReduce on replica ", replica_id_,
                                                     ": the mean of ", v.name(), " (",
                                                     DataTypeString(v.type()),
                                                     ") needs a floating dtype"));
    }
  }
  const strata::Scope s = scope.WithDevice(device());
  const StrategyOptions& o = strategy_->options();
  const int n = num_replicas_in_sync();
  std::vector<Output> out;
  for (const Output& v : values) {
    if (n == 1) {
      // Nothing to exchange; an Identity keeps "the reduced value" a node of
      // its own, as with several replicas.
      out.push_back(ops::Identity(s, v));
      continue;
    }
    const int key = next_instance_key_++;
    ops::CollectiveAttrs attrs = ops::CollectiveAttrs()
                                     .MergeOp("Add")
                                     .FinalOp(op == ReduceOp::kMean ? "Div" : "Id")
                                     .TimeoutSeconds(o.collective_timeout_seconds)
                                     .CommunicationHint(o.communication_hint);
    if (differentiable) attrs.BackwardInstanceKey(next_instance_key_++);
    Output r = ops::CollectiveReduce(s, v, n, strategy_->collective_group_key(), key, attrs);
    STRATA_RETURN_IF_ERROR(scope.status());
    collectives_.push_back({key, v.type(), v.shape(), r.node()->name()});
    out.push_back(r);
  }
  STRATA_RETURN_IF_ERROR(scope.status());
  return out;
}

int ReplicaContext::collective_rank() const { return strategy_->collective_rank(replica_id_); }

absl::StatusOr<Output> ReplicaContext::ReduceScatter(const strata::Scope& scope, ReduceOp op,
                                                     Output value) {
  STRATA_RETURN_IF_ERROR(scope.status());
  const std::string what = absl::StrCat("ReduceScatter on replica ", replica_id_);
  if (!value.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": the value is null"));
  if (!IsReducible(value.type())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", value.name(), " is ",
                                                   DataTypeString(value.type()),
                                                   "; collectives reduce float, double, half, "
                                                   "bfloat16, int32 and int64"));
  }
  if (op == ReduceOp::kMean && !IsFloating(value.type())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the mean of ", value.name(),
                                                   " needs a floating dtype"));
  }
  const int n = num_replicas_in_sync();
  const PartialTensorShape shape = value.shape();
  if (!shape.unknown_rank() &&
      (shape.dims() == 0 || (shape.dim_size(0) >= 0 && shape.dim_size(0) % n != 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", value.name(), " has shape ", shape.DebugString(),
        "; its dimension 0 must split into the ", n, " replicas' equal blocks"));
  }
  const strata::Scope s = scope.WithDevice(device());
  if (n == 1) return ops::Identity(s, value);
  const StrategyOptions& o = strategy_->options();
  const int key = next_instance_key_++;
  Output r = ops::CollectiveReduceScatter(
      s, value, n, strategy_->collective_group_key(), key,
      ops::CollectiveAttrs()
          .MergeOp("Add")
          .FinalOp(op == ReduceOp::kMean ? "Div" : "Id")
          .TimeoutSeconds(o.collective_timeout_seconds)
          .CommunicationHint(o.communication_hint));
  STRATA_RETURN_IF_ERROR(scope.status());
  collectives_.push_back({key, value.type(), shape, r.node()->name()});
  return r;
}

absl::StatusOr<Output> ReplicaContext::AllGather(const strata::Scope& scope, Output value) {
  STRATA_RETURN_IF_ERROR(scope.status());
  const std::string what = absl::StrCat("AllGather on replica ", replica_id_);
  if (!value.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": the value is null"));
  if (!IsReducible(value.type())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", value.name(), " is ",
                                                   DataTypeString(value.type()),
                                                   "; all-gather moves float, double, half, "
                                                   "bfloat16, int32 and int64"));
  }
  const PartialTensorShape shape = value.shape();
  if (!shape.unknown_rank() && shape.dims() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", value.name(), " is a scalar; all-gather concatenates along "
                                               "dimension 0"));
  }
  const strata::Scope s = scope.WithDevice(device());
  const int n = num_replicas_in_sync();
  if (n == 1) return ops::Identity(s, value);
  const StrategyOptions& o = strategy_->options();
  const int key = next_instance_key_++;
  Output r = ops::CollectiveGather(s, value, n, strategy_->collective_group_key(), key,
                                   ops::CollectiveAttrs()
                                       .TimeoutSeconds(o.collective_timeout_seconds)
                                       .CommunicationHint(o.communication_hint));
  STRATA_RETURN_IF_ERROR(scope.status());
  collectives_.push_back({key, value.type(), shape, r.node()->name()});
  return r;
}

absl::StatusOr<Output> ReplicaContext::AllReduce(const strata::Scope& scope, ReduceOp op,
                                                 Output value) {
  STRATA_ASSIGN_OR_RETURN(std::vector<Output> out, AllReduce(scope, op, std::vector<Output>{value}));
  return out[0];
}

ReplicaContext* ReplicaContext::SetCurrent(ReplicaContext* ctx) {
  ReplicaContext* previous = current_context;
  current_context = ctx;
  return previous;
}

}  // namespace distribute
}  // namespace strata
