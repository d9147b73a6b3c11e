#include "strategy/one_device_strategy.h"

#include <utility>
#include <vector>

#include "graph/status.h"

namespace strata {
namespace distribute {

absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> OneDeviceStrategy::Create(
    const std::string& device, const DeviceOptions& machine, const StrategyOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> devices, ResolveDevices({device}, machine));
  return std::unique_ptr<OneDeviceStrategy>(
      new OneDeviceStrategy(std::move(devices), machine, options));
}

absl::StatusOr<std::unique_ptr<train::Variable>> OneDeviceStrategy::CreateDistributedVariable(
    const strata::Scope& scope, const train::VariableArgs& args,
    const train::VariableCreatorFn& next) {
  return next(scope.WithDevice(devices()[0]), args);
}

}  // namespace distribute
}  // namespace strata
