// MirroredStrategy: synchronous data-parallel training on the devices of one
// machine, as tf.distribute.MirroredStrategy. One replica per device; every
// variable made under its scope is a MirroredVariable (one identical copy per
// device); gradients are all-reduced (mean) with collectives, fused into
// buckets, and every replica applies the same update to its own copy, so the
// copies stay bitwise identical.
//
//   DeviceOptions machine;
//   machine.num_cpu_devices = 4;                          // virtual CPUs 0..3
//   auto s = *MirroredStrategy::Create({"/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"}, machine);
//   auto all = *MirroredStrategy::Create({}, machine);    // every GPU, else /cpu:0
//   s->num_replicas_in_sync();                            // 4
//
// Devices are given in TensorFlow's grammar ("/cpu:0", "/device:CPU:1",
// "/gpu:1", "/job:localhost/replica:0/task:0/device:CPU:2"), each naming one
// device of `machine`, in replica order. None given: every local GPU, or the
// first CPU when there is none (GPUs exist only in a --config=cuda build).
// When every replica is a GPU the strategy owns the devices (device_mgr())
// and all-reduces with NCCL (NcclCollectiveExecutor, set in
// session_options()); docs/strategy.md, "GPUs and NCCL". Errors:
// InvalidArgument naming an unknown (a missing GPU too, with the reason),
// ambiguous, malformed or duplicated device, or replicas mixing GPUs and
// CPUs.
//
// Thread-safety and ownership: as for Strategy (strategy.h).
#ifndef STRATA_STRATEGY_MIRRORED_STRATEGY_H_
#define STRATA_STRATEGY_MIRRORED_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strategy/strategy.h"

namespace strata {
namespace distribute {

class MirroredStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const std::vector<std::string>& devices, const DeviceOptions& machine = DeviceOptions(),
      const StrategyOptions& options = StrategyOptions());

 protected:
  // Component 0 from `args`, component r > 0 ("<name>/replica_r") from an
  // Identity of component 0's initial value, each on its device.
  absl::StatusOr<std::unique_ptr<train::Variable>> CreateDistributedVariable(
      const strata::Scope& scope, const train::VariableArgs& args,
      const train::VariableCreatorFn& next) override;

  // The value every copy of a new variable starts from, given component 0's
  // initial value (on the first device): as it is here; a multi-worker
  // strategy broadcasts the chief's. Errors go to the scope's status.
  virtual Output SyncInitialValue(const strata::Scope& scope, Output initial,
                                  const train::VariableArgs& args);

  using Strategy::Strategy;

 private:
  int64_t next_creation_index_ = 0;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_MIRRORED_STRATEGY_H_
