// Optimizers: turn (gradient, variable) pairs into the update ops of one
// training step, with TensorFlow's update kernels (graph/ops/training_ops.h),
// slot variables and a step counter.
//
//   Variable* w = CreateVariable(root, "w", TensorShape{3}, DT_FLOAT, Zeros());
//   Output grad = ...;                                   // d loss / d w
//   Adam adam(ExponentialDecay(1e-3, 1000, 0.9));        // or Adam adam(1e-3)
//   Node* train_op = adam.ApplyGradients(root, {{grad, w}});
//   Node* init = GlobalVariablesInitializer(root);       // after ApplyGradients: slots too
//   session->Run({}, {}, {init->name()}, nullptr);
//   for (...) session->Run(feeds, {}, {train_op->name()}, nullptr);
//
// One ApplyGradients call adds, in order: AggregateGradients (a hook, the
// identity here; a distribution strategy overrides it to all-reduce), a read
// of the step counter `<name>/iter` (int64, starts at 0), the learning rate
// of that step from the schedule, one update op per variable (on the
// variable's device), an increment of the counter that runs after every
// update, and the returned train op (a NoOp "train" after the increment).
// The schedule and Adam's bias corrections use the counter, so a run
// restored from a checkpoint continues exactly.
//
// Slot variables are created (through the variable-creator hook, zeros, not
// trainable) the first time a variable is updated, with TensorFlow 1's
// names: "<var>/Momentum"; "<var>/Adam" (m) and "<var>/Adam_1" (v) — the
// suffix is the optimizer's name. Names are made under the scope passed to
// ApplyGradients: pass a scope without a name prefix to get exactly these.
//
// Pairs whose gradient is a null Output (a variable the loss does not reach)
// are skipped. A null variable, or a gradient whose dtype is not the
// variable's or whose shape does not fit it, is InvalidArgument naming the
// variable, recorded in the scope (ApplyGradients then returns nullptr).
//
// Thread-safety: build with one thread (as for Scope); the optimizer keeps
// its slot table. Ownership: the slot and counter Variables belong to the
// graph's collection (train/variable.h), so they live as long as the graph;
// the optimizer must outlive its ApplyGradients calls only.
#ifndef STRATA_TRAIN_OPTIMIZERS_H_
#define STRATA_TRAIN_OPTIMIZERS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "graph/scope.h"
#include "train/learning_rate.h"
#include "train/variable.h"

namespace strata {
namespace train {

using GradAndVar = std::pair<Output, Variable*>;

// A gradient that touches some rows of its variable only (TensorFlow's
// IndexedSlices): d loss / d variable is the sum over i of values[i] put at
// row indices[i] (duplicates add); values [n] + the variable's shape[1:],
// indices int32 or int64 [n]. What an embedding lookup into a partitioned
// table gives each partition (train/layers.h, Minimize in train/models.h).
struct SparseGradient {
  Output values;
  Output indices;
  Variable* variable = nullptr;
};

// Dynamic loss scaling (Keras's LossScaleOptimizer), for float16 gradients
// that would underflow: the loss is multiplied by the scale before
// backpropagation (ScaleLoss), the gradients are divided by it after their
// aggregation, and a step whose gradients hold an Inf or NaN is skipped
// whole (no update, no slot change, the step counter stays) while the scale
// is halved; after `growth_steps` finite steps in a row it doubles. Under a
// strategy the check reads the aggregated gradients, the same on every
// replica (summed over the replicas where each holds a shard), so every
// replica skips the same steps. The scale "<name>/loss_scale" and the count
// "<name>/good_steps" are variables, checkpointed with the rest.
struct LossScaleOptions {
  double initial_scale = 32768;  // 2^15
  int64_t growth_steps = 2000;
  double multiplier = 2;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }

  // Adds one step's updates; returns the train op (nullptr on error).
  // Sparse gradients update only their rows where the optimizer knows how
  // (SGD: a scatter on the variable's device); the others add their rows
  // into a dense gradient on the variable's device and apply that. The
  // gradient of a partitioned variable (train/partitioned_variable.h) is
  // cut into its partitions' rows, each updated where it lives, with slots
  // of its own.
  Node* ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars);
  Node* ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                       const std::vector<SparseGradient>& sparse);

  // Clips the gradients by their global norm after AggregateGradients (so,
  // under a strategy, after the all-reduce: the same on every replica):
  // each is scaled by clip / max(norm, clip), norm = sqrt(sum of every
  // gradient's squares), as tf.clip_by_global_norm. 0 (the default): off.
  void set_clip_global_norm(double clip) { clip_global_norm_ = clip; }
  double clip_global_norm() const { return clip_global_norm_; }

  // The learning rate of the latest ApplyGradients' step (a DT_DOUBLE scalar
  // of its graph; null before the first), for reports.
  Output applied_learning_rate() const { return applied_learning_rate_; }

  // The step counter; nullptr before the first ApplyGradients.
  Variable* iterations() const { return iterations_; }

  // Turns dynamic loss scaling on (LossScaleOptions), before the first
  // ScaleLoss or ApplyGradients. train::Minimize scales the loss.
  void set_loss_scale(const LossScaleOptions& options);
  bool loss_scaling() const { return loss_scaling_; }
  // The loss times the current scale (in the loss's dtype); the loss itself
  // when loss scaling is off. Makes the scale's variables the first time.
  Output ScaleLoss(const Scope& scope, Output loss);
  // The scale and the finite steps since it last changed; nullptr until
  // ScaleLoss or ApplyGradients made them.
  Variable* loss_scale() const { return loss_scale_; }
  Variable* good_steps() const { return good_steps_; }
  // The slot `slot` ("Momentum", "m", "v") of `var`, or nullptr.
  Variable* GetSlot(const Variable* var, const std::string& slot) const;

  // Where a distribution strategy combines the replicas' gradients (e.g.
  // all-reduce) before they are applied. The default returns them as given.
  virtual std::vector<GradAndVar> AggregateGradients(const Scope& scope,
                                                     const std::vector<GradAndVar>& grads_and_vars);
  // The same for sparse gradients; the default returns them as given.
  virtual std::vector<SparseGradient> AggregateSparseGradients(
      const Scope& scope, const std::vector<SparseGradient>& sparse) {
    return sparse;
  }
  // Where a strategy that shards the update (ZeRO, strategy/sharded_update.h)
  // finishes it: `updates` are the update ops of the pairs that
  // AggregateGradients returned, the returned ops (the default: `updates`)
  // run before the step counter's increment. nullptr-free; errors are
  // recorded in `scope`.
  virtual std::vector<Node*> FinishUpdates(const Scope& scope, const std::vector<Node*>& updates) {
    return updates;
  }
  // The squared global norm from this replica's part of it (a float64
  // scalar over the gradients AggregateGradients returned): the default
  // returns `part`; a strategy whose replicas each hold a shard of the
  // gradients sums the parts over the replicas.
  virtual Output CombineSquaredNorm(const Scope& scope, Output part) { return part; }

 protected:
  // What one step's updates share. Values are made once per step (per
  // dtype) in the step's scope, which has no device of its own.
  class StepContext {
   public:
    StepContext(const Scope& scope, Output step, Output learning_rate)
        : scope_(scope), step_(step), learning_rate_(learning_rate) {}
    const Scope& scope() const { return scope_; }
    // Updates applied before this one (int64 scalar).
    Output step() const { return step_; }
    // The schedule's learning rate for this step, as a `dtype` scalar.
    Output LearningRate(DataType dtype);
    // A `dtype` scalar constant.
    Output Constant(const std::string& key, double value, DataType dtype);
    // The value `make` builds, made once per (key, dtype).
    Output Cached(const std::string& key, DataType dtype, const std::function<Output()>& make);

   private:
    Scope scope_;
    Output step_;
    Output learning_rate_;
    std::map<std::pair<std::string, DataType>, Output> cache_;
  };

  Optimizer(std::string name, LearningRateSchedule learning_rate);

  // Makes the slots `var` needs (AddSlot); called once per variable.
  virtual void CreateSlots(const Scope& scope, Variable* var) {}
  // Adds the update of `var` by `grad` in `scope` (on the variable's device).
  virtual Node* ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) = 0;
  // The same for a sparse gradient (`values` [n, ...], `indices` [n]). The
  // default sums the rows into a dense gradient (UnsortedSegmentSum, on the
  // variable's device) and applies that with ApplyDense.
  virtual Node* ApplySparse(const Scope& scope, Output values, Output indices, Variable* var,
                            StepContext& ctx);

  // A zero-initialized, non-trainable variable like `var`, named
  // "<var>/<suffix>", registered as slot `slot` of `var`.
  Variable* AddSlot(const Scope& scope, Variable* var, const std::string& slot,
                    const std::string& suffix);

 private:
  // The gradients to apply (those the loss reaches) into dense_out and
  // sparse_out; false with InvalidArgument recorded in `scope` for a bad one.
  bool CheckGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                      const std::vector<SparseGradient>& sparse, std::vector<GradAndVar>* dense_out,
                      std::vector<SparseGradient>* sparse_out);
  // The update ops of a step's gradients (slots made the first time).
  bool AddUpdates(const Scope& scope, const Scope& ns, const std::vector<GradAndVar>& dense,
                  const std::vector<SparseGradient>& sparse, StepContext& ctx,
                  std::vector<Node*>* updates);
  // The gradients scaled to a global norm of at most clip_global_norm_.
  std::vector<GradAndVar> ClipByGlobalNorm(const Scope& scope, const std::vector<GradAndVar>& grads);

  const std::string name_;
  const LearningRateSchedule learning_rate_;
  double clip_global_norm_ = 0;
  Variable* iterations_ = nullptr;
  // Dynamic loss scaling.
  absl::Status MakeLossScale(const Scope& scope);
  // Divides the gradients by the scale; `finite` becomes whether all are
  // finite (a bool scalar, the same on every replica).
  std::vector<GradAndVar> Unscale(const Scope& scope, const std::vector<GradAndVar>& grads,
                                  Output* finite);
  // The train op of a loss-scaled step: live whether `train` ran or was
  // skipped, after the scale's update.
  Node* FinishLossScaledStep(const Scope& scope, Node* train, Output finite);
  bool loss_scaling_ = false;
  LossScaleOptions loss_scale_options_;
  Variable* loss_scale_ = nullptr;
  Variable* good_steps_ = nullptr;
  const Graph* graph_ = nullptr;  // where iterations_ and the slots live
  Output applied_learning_rate_;
  std::map<std::pair<const Variable*, std::string>, Variable*> slots_;
  absl::flat_hash_set<const Variable*> slotted_;  // CreateSlots has run for these
};

// var -= lr * grad
// (a sparse gradient: var[indices] -= lr * values, a scatter of its rows)
class SGD : public Optimizer {
 public:
  explicit SGD(LearningRateSchedule learning_rate, std::string name = "SGD")
      : Optimizer(std::move(name), std::move(learning_rate)) {}
  explicit SGD(double learning_rate, std::string name = "SGD")
      : SGD(ConstantLearningRate(learning_rate), std::move(name)) {}

 protected:
  Node* ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) override;
  Node* ApplySparse(const Scope& scope, Output values, Output indices, Variable* var,
                    StepContext& ctx) override;
};

// accum = momentum * accum + grad; var -= lr * accum (Nesterov: var -= lr *
// (grad + momentum * accum)). Slot "Momentum".
class Momentum : public Optimizer {
 public:
  Momentum(LearningRateSchedule learning_rate, double momentum, bool use_nesterov = false,
           std::string name = "Momentum")
      : Optimizer(std::move(name), std::move(learning_rate)),
        momentum_(momentum),
        use_nesterov_(use_nesterov) {}
  Momentum(double learning_rate, double momentum, bool use_nesterov = false,
           std::string name = "Momentum")
      : Momentum(ConstantLearningRate(learning_rate), momentum, use_nesterov, std::move(name)) {}

 protected:
  void CreateSlots(const Scope& scope, Variable* var) override;
  Node* ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) override;

 private:
  const double momentum_;
  const bool use_nesterov_;
};

// TensorFlow's Adam (ResourceApplyAdam) with beta powers beta^t, t = step + 1.
// Slots "m" ("<var>/Adam") and "v" ("<var>/Adam_1").
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;  // Keras's default
  bool use_nesterov = false;
};

class Adam : public Optimizer {
 public:
  using Options = AdamOptions;
  explicit Adam(LearningRateSchedule learning_rate, Options options = Options(),
                std::string name = "Adam")
      : Optimizer(std::move(name), std::move(learning_rate)), options_(options) {}
  explicit Adam(double learning_rate, Options options = Options(), std::string name = "Adam")
      : Adam(ConstantLearningRate(learning_rate), options, std::move(name)) {}

 protected:
  void CreateSlots(const Scope& scope, Variable* var) override;
  Node* ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) override;

 private:
  const Options options_;
};

// Adam with decoupled weight decay (Loshchilov and Hutter; Keras's AdamW):
// each step first var -= lr * weight_decay * var, then Adam's update.
class AdamW : public Adam {
 public:
  AdamW(LearningRateSchedule learning_rate, double weight_decay, Options options = Options(),
        std::string name = "AdamW")
      : Adam(std::move(learning_rate), options, std::move(name)), weight_decay_(weight_decay) {}
  AdamW(double learning_rate, double weight_decay, Options options = Options(), std::string name = "AdamW")
      : AdamW(ConstantLearningRate(learning_rate), weight_decay, options, std::move(name)) {}

 protected:
  Node* ApplyDense(const Scope& scope, Output grad, Variable* var, StepContext& ctx) override;

 private:
  const double weight_decay_;
};

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_OPTIMIZERS_H_
