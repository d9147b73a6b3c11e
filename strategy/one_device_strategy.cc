#include "strategy/one_device_strategy.h"

#include <utility>
#include <vector>

#include "base/status.h"
#include "strategy/strategy_devices.h"

namespace strata {
namespace distribute {

absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> OneDeviceStrategy::Create(
    const std::string& device, const DeviceOptions& machine, const StrategyOptions& options) {
  STRATA_ASSIGN_OR_RETURN(PreparedDevices local,
                          PrepareDevices({device}, machine, /*default_to_gpus=*/false));
  std::unique_ptr<OneDeviceStrategy> s(
      new OneDeviceStrategy(std::move(local.devices), local.options, options));
  // One replica makes no collectives; a GPU's devices are shared by the
  // strategy's sessions.
  if (local.device_mgr != nullptr) s->AdoptDevices(std::move(local.device_mgr));
  return s;
}

absl::StatusOr<std::unique_ptr<train::Variable>> OneDeviceStrategy::CreateDistributedVariable(
    const strata::Scope& scope, const train::VariableArgs& args,
    const train::VariableCreatorFn& next) {
  // A device the code asks for stays (a pipeline stage's weights on the
  // stage's device, an optimizer slot beside its variable); the rest go on
  // the strategy's device.
  return next(scope.device().empty() ? scope.WithDevice(devices()[0]) : scope, args);
}

}  // namespace distribute
}  // namespace strata
