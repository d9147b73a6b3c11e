#include "strategy/mirrored_strategy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "strategy/mirrored_variable.h"
#include "strategy/strategy_devices.h"

namespace strata {
namespace distribute {

absl::StatusOr<std::unique_ptr<MirroredStrategy>> MirroredStrategy::Create(
    const std::vector<std::string>& devices, const DeviceOptions& machine,
    const StrategyOptions& options) {
  // None given: every GPU, else the first CPU, as
  // tf.distribute.MirroredStrategy() does.
  STRATA_ASSIGN_OR_RETURN(PreparedDevices local,
                          PrepareDevices(devices, machine, /*default_to_gpus=*/true));
  STRATA_RETURN_IF_ERROR(CheckNotMixed("MirroredStrategy", local.devices));
  std::unique_ptr<MirroredStrategy> s(new MirroredStrategy(local.devices, local.options, options));
  if (local.device_mgr != nullptr) {
    std::unique_ptr<CollectiveExecutor> executor;
    if (AllGpus(local.devices)) {
      // GPU replicas all-reduce with NCCL (one process: ncclCommInitAll
      // over the replicas' GPUs, made by the first collective).
      STRATA_ASSIGN_OR_RETURN(GpuCollectives nccl,
                              MakeGpuCollectives(*local.device_mgr, local.devices, {}));
      executor = std::move(nccl.executor);
    }
    s->AdoptDevices(std::move(local.device_mgr), std::move(executor));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<train::Variable>> MirroredStrategy::CreateDistributedVariable(
    const strata::Scope& scope, const train::VariableArgs& args,
    const train::VariableCreatorFn& next) {
  const std::vector<std::string>& devs = devices();
  std::vector<std::unique_ptr<train::Variable>> components;
  // Component 0's initial value, captured as its initializer makes it: the
  // other components copy it, so all start with the same bits whatever the
  // initializer (seeded or not).
  Output initial;
  train::VariableArgs first = args;
  if (args.initializer) {
    first.initializer = [this, &initial, &args, init = args.initializer](
                            const strata::Scope& s, const TensorShape& shape, DataType dtype) {
      initial = SyncInitialValue(s, init(s, shape, dtype), args);
      return initial;
    };
  }
  for (size_t r = 0; r < devs.size(); ++r) {
    train::VariableArgs a = first;
    if (r > 0) {
      a = args;
      a.name = absl::StrCat(args.name, "/replica_", r);
      a.initializer = [&initial](const strata::Scope& s, const TensorShape&, DataType) {
        return ops::Identity(s, initial);
      };
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Variable> c, next(scope.WithDevice(devs[r]), a));
    if (c == nullptr) {
      return absl::InternalError(absl::StrCat("a variable creator made nothing for '", a.name, "'"));
    }
    if (c->device() != devs[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "component ", r, " of mirrored variable '", args.name, "' was made on '", c->device(),
          "' instead of ", devs[r], " (a variable creator below the strategy moved it)"));
    }
    if (r > 0 && !initial.ok()) {
      return absl::InternalError(absl::StrCat("mirrored variable '", args.name,
                                              "': component 0 has no initial value to copy"));
    }
    components.push_back(std::move(c));
  }
  // One initializer for all copies.
  // (NodeBuilder keeps a reference to its scope: name it.)
  const strata::Scope init_scope = scope.WithNoControlDependencies().WithDevice(devs[0]).WithOpName(
      absl::StrCat(args.name, "/InitializeReplicas"));
  NodeBuilder b(init_scope, "NoOp");
  for (const auto& c : components) {
    if (c->initializer() != nullptr) b.ControlInput(c->initializer());
  }
  Node* init = b.Finalize();
  STRATA_RETURN_IF_ERROR(scope.status());
  return std::unique_ptr<train::Variable>(
      new MirroredVariable(this, std::move(components), init, next_creation_index_++));
}

Output MirroredStrategy::SyncInitialValue(const strata::Scope&, Output initial,
                                          const train::VariableArgs&) {
  return initial;
}

}  // namespace distribute
}  // namespace strata
