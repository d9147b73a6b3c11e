// Learning-rate schedules: the learning rate as graph ops of the optimizer's
// step counter, so a run resumed from a checkpoint (which restores the
// counter) continues the schedule exactly. Formulas are TensorFlow's
// (tf.keras.optimizers.schedules):
//
//   ConstantLearningRate(lr):                 lr
//   ExponentialDecay(lr0, decay_steps, rate): lr0 * rate ^ (step / decay_steps)
//       (staircase: the exponent is floor(step / decay_steps))
//   CosineDecay(lr0, decay_steps, alpha):     p = min(step, decay_steps) / decay_steps
//       lr0 * ((1 - alpha) * 0.5 * (1 + cos(pi * p)) + alpha)
//
//   LearningRateSchedule lr = ExponentialDecay(0.1, 1000, 0.96, /*staircase=*/true);
//   Output rate = lr(root.NewSubScope("learning_rate"), step);   // step: int64 scalar
//   SGD sgd(lr);                                                  // train/optimizers.h
//
// The result is a DT_DOUBLE scalar computed in double precision (the
// optimizer casts it to each variable's dtype). Step is the number of
// updates applied before this one (0 for the first update).
//
// The math op family has no Cos op, so CosineDecay evaluates cos(pi * p) as
// -sin(pi * p - pi / 2) by its Taylor polynomial through x^17 on
// [-pi/2, pi/2], which is within 5e-14 of cos there: far below anything a
// learning rate can notice.
//
// Thread-safety: schedules are immutable and may be shared.
#ifndef STRATA_TRAIN_LEARNING_RATE_H_
#define STRATA_TRAIN_LEARNING_RATE_H_

#include <cstdint>
#include <functional>

#include "graph/scope.h"

namespace strata {
namespace train {

// Maps the step counter (an int64 scalar Output) to a DT_DOUBLE scalar.
// Bad arguments (a non-positive decay_steps, a step of another dtype) are
// recorded in the scope as InvalidArgument.
using LearningRateSchedule = std::function<Output(const Scope& scope, Output step)>;

LearningRateSchedule ConstantLearningRate(double learning_rate);
LearningRateSchedule ExponentialDecay(double initial_learning_rate, int64_t decay_steps,
                                      double decay_rate, bool staircase = false);
LearningRateSchedule CosineDecay(double initial_learning_rate, int64_t decay_steps,
                                 double alpha = 0.0);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_LEARNING_RATE_H_
