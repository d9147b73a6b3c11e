#include "fit/fit_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "fit/optimizers.h"

ABSL_FLAG(int64_t, epochs, 1, "passes over the training examples (a program may set its own default)");
ABSL_FLAG(int64_t, steps, 0, "total steps (wins over --epochs when > 0)");
ABSL_FLAG(int64_t, global_batch_size, 32, "examples per step, split over every replica");
ABSL_FLAG(bool, drop_remainder, false,
          "drop each epoch's last partial global batch (false, as Keras: it trains too, split over "
          "the replicas, each replica's loss weighted by its share: every example once an epoch)");
ABSL_FLAG(int64_t, seed, 1, "seeds the shuffle (and the program's own randomness)");
ABSL_FLAG(std::string, optimizer, "adam", "sgd, momentum, adam or adamw");
ABSL_FLAG(double, learning_rate, 0, "0: the optimizer's default (sgd 0.1, momentum 0.01, adam 0.001)");
ABSL_FLAG(double, momentum, 0.9, "the momentum optimizer's momentum");
ABSL_FLAG(double, weight_decay, 0.004, "adamw's decoupled weight decay");
ABSL_FLAG(double, clip_global_norm, 0,
          "clip the gradients to this global norm after the all-reduce (0: no clipping)");
ABSL_FLAG(std::string, checkpoint_dir, "", "write checkpoints here and resume from the newest intact one");
ABSL_FLAG(int64_t, save_every_steps, 0, "checkpoint period in steps (0: only at the end)");
ABSL_FLAG(int32_t, max_to_keep, 3, "checkpoints kept (0: all)");
ABSL_FLAG(std::string, metrics_out, "", "append JSON lines: one per step, one per epoch, a final one");
ABSL_FLAG(int64_t, log_every_steps, 0, "progress line period when stderr is not a terminal (0: auto)");
ABSL_FLAG(bool, quiet, false, "no progress output");
ABSL_FLAG(int64_t, prefetch, 2, "global batches prepared ahead on a background thread (0: none)");
ABSL_FLAG(std::string, trace_out, "",
          "write a Chrome trace (Perfetto, chrome://tracing) of --trace_steps steps after 10 of warm-up here");
ABSL_FLAG(int64_t, trace_steps, 3, "steps traced for --trace_out");
ABSL_FLAG(std::string, tensorboard_dir, "",
          "write TensorBoard event files here (train/, validation/; `tensorboard --logdir` plots them)");
ABSL_FLAG(int64_t, tensorboard_update_steps, 1,
          "TensorBoard's batch_* scalars every this many steps (0: epoch scalars only)");
ABSL_FLAG(std::string, dtype_policy, "float32",
          "float32, mixed_bfloat16 or mixed_float16: layers compute in bfloat16 / float16, variables stay "
          "float32; mixed_float16 with dynamic loss scaling (train/policy.h)");

namespace strata {
namespace fit {

absl::StatusOr<FitOptions> FitOptionsFromFlags() {
  FitOptions o;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
  o.drop_remainder = absl::GetFlag(FLAGS_drop_remainder);
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed < 0) return absl::InvalidArgumentError("--seed: must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.save_every_steps = absl::GetFlag(FLAGS_save_every_steps);
  o.max_to_keep = absl::GetFlag(FLAGS_max_to_keep);
  o.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  o.log_every_steps = absl::GetFlag(FLAGS_log_every_steps);
  o.quiet = absl::GetFlag(FLAGS_quiet);
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.trace_out = absl::GetFlag(FLAGS_trace_out);
  o.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  o.tensorboard_dir = absl::GetFlag(FLAGS_tensorboard_dir);
  o.tensorboard_update_steps = absl::GetFlag(FLAGS_tensorboard_update_steps);
  auto bad = [](const char* flag, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
  };
  if (o.epochs < 0) return bad("epochs", "must be >= 0");
  if (o.steps < 0) return bad("steps", "must be >= 0");
  if (o.epochs == 0 && o.steps == 0) return bad("epochs", "0 and no --steps: nothing to train");
  if (o.global_batch_size < 1) return bad("global_batch_size", "must be >= 1");
  if (o.save_every_steps < 0) return bad("save_every_steps", "must be >= 0");
  if (o.save_every_steps > 0 && o.checkpoint_dir.empty()) return bad("save_every_steps", "needs --checkpoint_dir");
  if (o.max_to_keep < 0) return bad("max_to_keep", "must be >= 0 (0 keeps every checkpoint)");
  if (o.log_every_steps < 0) return bad("log_every_steps", "must be >= 0");
  if (o.prefetch < 0) return bad("prefetch", "must be >= 0");
  if (o.trace_steps < 1) return bad("trace_steps", "must be >= 1");
  if (o.tensorboard_update_steps < 0) return bad("tensorboard_update_steps", "must be >= 0");
  return o;
}

absl::StatusOr<train::Policy> DtypePolicyFromFlags() {
  absl::StatusOr<train::Policy> p = train::PolicyFromName(absl::GetFlag(FLAGS_dtype_policy));
  if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype_policy: ", p.status().message()));
  return p;
}

absl::StatusOr<std::unique_ptr<train::Optimizer>> OptimizerFromFlags() {
  OptimizerOptions options;
  options.momentum = absl::GetFlag(FLAGS_momentum);
  options.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  options.clip_global_norm = absl::GetFlag(FLAGS_clip_global_norm);
  absl::StatusOr<std::unique_ptr<train::Optimizer>> o =
      MakeOptimizer(absl::GetFlag(FLAGS_optimizer), absl::GetFlag(FLAGS_learning_rate), options);
  if (!o.ok()) return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer / --learning_rate / --momentum / --weight_decay / --clip_global_norm: ", o.status().message()));
  return o;
}

}  // namespace fit
}  // namespace strata
