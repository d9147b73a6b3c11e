// OneDeviceStrategy: every variable and op on one device, one replica, as
// tf.distribute.OneDeviceStrategy. The same model code runs under it and
// under MirroredStrategy; this is the one-device baseline.
//
//   DeviceOptions machine;                              // one CPU
//   std::unique_ptr<Strategy> s = *OneDeviceStrategy::Create("/cpu:0", machine);
//   StrategyScope in_scope = s->Scope();
//   Variable* w = CreateVariable(root, "w", ...);       // a plain variable on /cpu:0
//   RunResult step = *s->Run(root, step_fn, inputs);    // traced once, "replica_0/..."
//
// Variables made under its scope (or while Run traces) are plain
// train::Variables on the device, named as without a strategy; a variable
// made in a scope that asks for another device (Scope::WithDevice: a
// pipeline stage's weights, strategy/pipeline.h) stays on that device. Variables made
// outside its scope may be used inside Run (one replica cannot disagree with
// itself). AllReduce and gradient aggregation are identities; Reduce is an
// Identity on the device.
//
// Thread-safety and ownership: as for Strategy (strategy.h).
#ifndef STRATA_STRATEGY_ONE_DEVICE_STRATEGY_H_
#define STRATA_STRATEGY_ONE_DEVICE_STRATEGY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "strategy/strategy.h"

namespace strata {
namespace distribute {

class OneDeviceStrategy : public Strategy {
 public:
  // `device` in TensorFlow's grammar ("/cpu:0", "/device:CPU:1", "/gpu:0"
  // in a --config=cuda build) must name one device of `machine`;
  // InvalidArgument naming it otherwise (for a GPU that is not there, with
  // the reason). A GPU's devices are made by the strategy and shared by its
  // sessions (session_options()).
  static absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> Create(
      const std::string& device, const DeviceOptions& machine = DeviceOptions(),
      const StrategyOptions& options = StrategyOptions());

 protected:
  absl::StatusOr<std::unique_ptr<train::Variable>> CreateDistributedVariable(
      const strata::Scope& scope, const train::VariableArgs& args,
      const train::VariableCreatorFn& next) override;

 private:
  using Strategy::Strategy;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_ONE_DEVICE_STRATEGY_H_
