// The training flags a user's binary shares with the examples: how long to
// train, the batch, the optimizer, checkpoints, reports. With
// fit/strategy_flags.h (--strategy, --devices, the cluster, threads) a
// binary gets the whole command line of a Strata trainer from two calls.
//
//   int main(int argc, char** argv) {
//     absl::SetFlag(&FLAGS_epochs, 20);          // this program's defaults,
//     absl::SetFlag(&FLAGS_optimizer, "adam");   // before parsing
//     absl::ParseCommandLine(argc, argv);
//     auto strategy = fit::MakeStrategy(*fit::StrategyConfigFromFlags());
//     auto options = fit::FitOptionsFromFlags();
//     auto optimizer = fit::OptimizerFromFlags();
//
// Flags: --epochs, --steps (wins when > 0), --global_batch_size,
// --drop_remainder, --seed
// (the shuffle's), --optimizer (sgd, momentum, adam, adamw), --learning_rate
// (0: the optimizer's default), --momentum, --weight_decay (adamw),
// --clip_global_norm, --checkpoint_dir, --save_every_steps,
// --max_to_keep, --metrics_out, --log_every_steps, --quiet, --prefetch,
// --trace_out, --trace_steps, --tensorboard_dir, --tensorboard_update_steps,
// --dtype_policy (float32, mixed_bfloat16 or mixed_float16;
// set it with train::SetGlobalPolicy before making the model's layers).
//
// Errors: InvalidArgument naming the flag. Thread-safety: after
// absl::ParseCommandLine, from one thread.
#ifndef STRATA_FIT_FIT_FLAGS_H_
#define STRATA_FIT_FIT_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "fit/fit.h"
#include "train/optimizers.h"
#include "train/policy.h"

ABSL_DECLARE_FLAG(int64_t, epochs);
ABSL_DECLARE_FLAG(int64_t, steps);
ABSL_DECLARE_FLAG(int64_t, global_batch_size);
ABSL_DECLARE_FLAG(bool, drop_remainder);
ABSL_DECLARE_FLAG(int64_t, seed);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(double, learning_rate);
ABSL_DECLARE_FLAG(double, momentum);
ABSL_DECLARE_FLAG(double, weight_decay);
ABSL_DECLARE_FLAG(double, clip_global_norm);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int64_t, save_every_steps);
ABSL_DECLARE_FLAG(int32_t, max_to_keep);
ABSL_DECLARE_FLAG(std::string, metrics_out);
ABSL_DECLARE_FLAG(int64_t, log_every_steps);
ABSL_DECLARE_FLAG(bool, quiet);
ABSL_DECLARE_FLAG(int64_t, prefetch);
ABSL_DECLARE_FLAG(std::string, trace_out);
ABSL_DECLARE_FLAG(int64_t, trace_steps);
ABSL_DECLARE_FLAG(std::string, tensorboard_dir);
ABSL_DECLARE_FLAG(int64_t, tensorboard_update_steps);
ABSL_DECLARE_FLAG(std::string, dtype_policy);

namespace strata {
namespace fit {

// FitOptions from the flags (callbacks and log left at their defaults).
absl::StatusOr<FitOptions> FitOptionsFromFlags();

// The dtype policy --dtype_policy names (train/policy.h).
absl::StatusOr<train::Policy> DtypePolicyFromFlags();

// The optimizer --optimizer, --learning_rate and --momentum describe.
absl::StatusOr<std::unique_ptr<train::Optimizer>> OptimizerFromFlags();

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_FIT_FLAGS_H_
