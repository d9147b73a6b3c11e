#include "fit/optimizers.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "strategy/distributed_optimizer.h"

namespace strata {
namespace fit {

double DefaultLearningRate(const std::string& name) {
  if (name == "sgd") return 0.1;
  if (name == "momentum") return 0.01;
  if (name == "adam" || name == "adamw") return 1e-3;
  return 0;
}

absl::StatusOr<std::unique_ptr<train::Optimizer>> MakeOptimizer(const std::string& name, double learning_rate,
                                                                const OptimizerOptions& options) {
  if (name != "sgd" && name != "momentum" && name != "adam" && name != "adamw") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", name, "'; expected sgd, momentum, adam or adamw"));
  }
  if (!(options.weight_decay >= 0) || !std::isfinite(options.weight_decay)) {
    return absl::InvalidArgumentError(absl::StrCat("weight decay ", options.weight_decay, " is not >= 0"));
  }
  if (!(options.clip_global_norm >= 0) || !std::isfinite(options.clip_global_norm)) {
    return absl::InvalidArgumentError(absl::StrCat("clip_global_norm ", options.clip_global_norm, " is not >= 0"));
  }
  if (!(learning_rate >= 0) || !std::isfinite(learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate ", learning_rate, " is not a positive number"));
  }
  if (!(options.momentum >= 0 && options.momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("momentum ", options.momentum, " is not in [0, 1)"));
  }
  const double lr = learning_rate > 0 ? learning_rate : DefaultLearningRate(name);
  train::LearningRateSchedule schedule = options.schedule ? options.schedule : train::ConstantLearningRate(lr);
  std::unique_ptr<train::Optimizer> o;
  if (name == "sgd") {
    o = std::make_unique<distribute::DistributedOptimizer<train::SGD>>(schedule);
  } else if (name == "momentum") {
    o = std::make_unique<distribute::DistributedOptimizer<train::Momentum>>(schedule, options.momentum);
  } else if (name == "adamw") {
    o = std::make_unique<distribute::DistributedOptimizer<train::AdamW>>(schedule, options.weight_decay);
  } else {
    o = std::make_unique<distribute::DistributedOptimizer<train::Adam>>(schedule);
  }
  o->set_clip_global_norm(options.clip_global_norm);
  return o;
}

}  // namespace fit
}  // namespace strata
