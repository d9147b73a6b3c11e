// Strata's public API in one include, for a user's own training binary
// (Bazel target //fit:strata): the builder and its ops, layers, models,
// losses and optimizers, the input pipeline, the strategies and the
// training library (Fit, checkpoints, callbacks, the shared flags).
//
//   #include "fit/strata.h"
//   int main(int argc, char** argv) {
//     absl::ParseCommandLine(argc, argv);
//     auto strategy = strata::fit::MakeStrategy(*strata::fit::StrategyConfigFromFlags());
//     ...
//     auto result = strata::fit::Fit(strategy->get(), model, optimizer.get(), train, validation, options);
//
// docs/guide.md walks through it; examples/ has complete programs.
#ifndef STRATA_FIT_STRATA_H_
#define STRATA_FIT_STRATA_H_

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status.h"
#include "fit/checkpoint.h"
#include "fit/fit.h"
#include "fit/fit_flags.h"
#include "fit/optimizers.h"
#include "fit/strategy_flags.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "strategy/strategy.h"
#include "train/data/csv.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/learning_rate.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/phase.h"
#include "train/phase_layers.h"
#include "train/sequence_layers.h"
#include "train/transformer_lm.h"
#include "train/optimizers.h"
#include "train/variable.h"

#endif  // STRATA_FIT_STRATA_H_
