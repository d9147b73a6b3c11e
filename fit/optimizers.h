// Optimizers by name, ready for any strategy: each is a
// distribute::DistributedOptimizer (gradients all-reduced over the
// replicas, the same update on every copy; exactly the base optimizer on
// one device).
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> opt, fit::MakeOptimizer("adam", 1e-3));
//   fit::OptimizerOptions o;
//   o.schedule = train::CosineDecay(0.1, 1000);
//   auto sgd = fit::MakeOptimizer("momentum", 0, o);
//
// Names: "sgd", "momentum" (OptimizerOptions::momentum), "adam" and "adamw"
// (Adam with decoupled weight decay, OptimizerOptions::weight_decay). A
// learning rate of 0 takes the optimizer's default (sgd 0.1, momentum 0.01,
// adam and adamw 0.001); a schedule, when set, wins over the rate. Any of
// them may clip the gradients by their global norm after the all-reduce
// (OptimizerOptions::clip_global_norm; the same on every replica).
//
// Errors: InvalidArgument naming the unknown name (and the known ones) or a
// rate that is negative or not finite.
//
// Thread-safety and ownership: as train::Optimizer.
#ifndef STRATA_FIT_OPTIMIZERS_H_
#define STRATA_FIT_OPTIMIZERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "train/learning_rate.h"
#include "train/optimizers.h"

namespace strata {
namespace fit {

struct OptimizerOptions {
  train::LearningRateSchedule schedule;  // wins over the rate when set
  double momentum = 0.9;                 // "momentum"
  double weight_decay = 0.004;           // "adamw" (Keras's default)
  double clip_global_norm = 0;           // 0: no clipping
};

// The default learning rate of an optimizer name (0 for an unknown one).
double DefaultLearningRate(const std::string& name);

absl::StatusOr<std::unique_ptr<train::Optimizer>> MakeOptimizer(const std::string& name, double learning_rate,
                                                                const OptimizerOptions& options = {});

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_OPTIMIZERS_H_
