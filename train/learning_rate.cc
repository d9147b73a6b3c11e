#include "train/learning_rate.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"

namespace strata {
namespace train {

namespace {

Output D(const Scope& s, double v) { return ops::Const(s, v); }

// The step as a double, or a null Output (error in the scope) if it is not
// an int64 scalar or the schedule's arguments are bad.
Output StepAsDouble(const Scope& s, Output step, const char* schedule, int64_t decay_steps) {
  if (!s.ok()) return Output();
  if (decay_steps <= 0) {
    s.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat(schedule, ": decay_steps must be positive, got ", decay_steps)));
    return Output();
  }
  if (!step.ok() || step.type() != DT_INT64) {
    s.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        schedule, ": the step must be an int64 scalar, got ",
        step.ok() ? DataTypeString(step.type()) : std::string("nothing"))));
    return Output();
  }
  return ops::Cast(s, step, DT_DOUBLE);
}

// cos(pi * p) for p in [0, 1]: with x = pi * p - pi/2 in [-pi/2, pi/2],
// cos(pi * p) = -sin(x), and sin is its odd Taylor series through x^17
// (remainder below (pi/2)^19 / 19! < 5e-14), evaluated by Horner's rule.
Output CosPiTimes(const Scope& s, Output p) {
  Output x = ops::Sub(s, ops::Mul(s, p, D(s, M_PI)), D(s, M_PI / 2));
  Output x2 = ops::Mul(s, x, x);
  // Coefficients of x^1, x^3, ..., x^17 in sin(x): (-1)^k / (2k+1)!.
  double coef[9];
  double fact = 1;
  for (int k = 0; k < 9; ++k) {
    if (k > 0) fact *= (2 * k) * (2 * k + 1);
    coef[k] = (k % 2 == 0 ? 1.0 : -1.0) / fact;
  }
  Output poly = D(s, coef[8]);
  for (int k = 7; k >= 0; --k) poly = ops::AddV2(s, ops::Mul(s, poly, x2), D(s, coef[k]));
  return ops::Neg(s, ops::Mul(s, x, poly));
}

}  // namespace

LearningRateSchedule ConstantLearningRate(double learning_rate) {
  return [learning_rate](const Scope& s, Output) { return D(s, learning_rate); };
}

LearningRateSchedule ExponentialDecay(double initial_learning_rate, int64_t decay_steps,
                                      double decay_rate, bool staircase) {
  return [=](const Scope& s, Output step) -> Output {
    Output t = StepAsDouble(s, step, "ExponentialDecay", decay_steps);
    if (!t.ok()) return Output();
    Output p = ops::RealDiv(s, t, D(s, static_cast<double>(decay_steps)));
    // The step is never negative, so truncation toward zero is floor.
    if (staircase) p = ops::Cast(s, ops::Cast(s, p, DT_INT64), DT_DOUBLE);
    return ops::Mul(s, D(s, initial_learning_rate), ops::Pow(s, D(s, decay_rate), p));
  };
}

LearningRateSchedule CosineDecay(double initial_learning_rate, int64_t decay_steps,
                                 double alpha) {
  return [=](const Scope& s, Output step) -> Output {
    Output t = StepAsDouble(s, step, "CosineDecay", decay_steps);
    if (!t.ok()) return Output();
    const Output steps = D(s, static_cast<double>(decay_steps));
    Output p = ops::RealDiv(s, ops::Minimum(s, t, steps), steps);
    Output cosine = ops::Mul(s, D(s, 0.5), ops::AddV2(s, D(s, 1.0), CosPiTimes(s, p)));
    Output decayed = ops::AddV2(s, ops::Mul(s, D(s, 1.0 - alpha), cosine), D(s, alpha));
    return ops::Mul(s, D(s, initial_learning_rate), decayed);
  };
}

}  // namespace train
}  // namespace strata
