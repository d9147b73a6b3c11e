// Helpers shared by the strategy tests and tests/mirrored_*_test.cc: device
// lists, fetching, bitwise comparison, and a harness that trains the
// trainer's MLP under any strategy with the same model code (the code of
// docs/strategy.md's example).
//
//   DeviceOptions m = testing::Machine(4);
//   auto s = *MirroredStrategy::Create(testing::CpuSpecs(4), m);
//   STRATA_ASSIGN_OR_RETURN(testing::TrainOutcome out, testing::TrainMlp(*s, config, data));
//
// Thread-safety: call from one thread. Ownership: results are values.
#ifndef STRATA_STRATEGY_TEST_UTIL_H_
#define STRATA_STRATEGY_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "runtime/device.h"
#include "runtime/session.h"
#include "strategy/strategy.h"
#include "train/data/dataset.h"

namespace strata {
namespace distribute {
namespace testing {

// `n` virtual CPU devices with one intra-op thread each.
DeviceOptions Machine(int n);
// "/cpu:0" .. "/cpu:<n-1>".
std::vector<std::string> CpuSpecs(int n);

absl::StatusOr<std::vector<Tensor>> Fetch(Session& session, const std::vector<std::string>& names,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds = {});
bool SameBits(const Tensor& a, const Tensor& b);
// max |a - b| / max(|b|, 1e-3) over the elements of two float tensors.
double MaxRelativeDifference(const Tensor& a, const Tensor& b);

struct TrainConfig {
  std::vector<int64_t> hidden = {32};
  int64_t num_classes = 10;
  int64_t global_batch = 32;
  int steps = 100;
  std::string optimizer = "sgd";  // sgd, momentum, adam
  double learning_rate = 0.1;
  double clip_global_norm = 0;  // off
  int64_t seed = 1;
};

// Train and test data: x float [n, features], y int32 [n].
struct Data {
  Tensor train_x, train_y, test_x, test_y;
};

// The 8x8 digits (data/digits), standardized with the training split's
// statistics, 20% test (seeded split).
absl::StatusOr<Data> LoadDigits();
// A learnable synthetic problem (data::Synthetic).
absl::StatusOr<Data> SyntheticData(int64_t train, int64_t test, int64_t features, int classes);

struct TrainOutcome {
  std::vector<std::string> names;                // the model's variables, in creation order
  std::vector<Tensor> weights;                   // their values (the primary copy)
  std::vector<std::vector<Tensor>> copies;       // copies[r][k]: replica r's copy of variable k
  std::vector<float> losses;                     // mean loss of each step
  double test_accuracy = 0;
};

// Trains a train::MakeMlp model under `strategy` for config.steps steps on
// global batches of `data` (shuffled with config.seed, repeated), then
// evaluates on the test split outside Run (reading the primary copies).
absl::StatusOr<TrainOutcome> TrainMlp(Strategy& strategy, const TrainConfig& config,
                                      const Data& data);

// One step of a train::MakeMlp(hidden, classes, seed 1) model with
// DistributedOptimizer<train::Adam>(1e-3) on sparse softmax cross-entropy,
// traced by `strategy` (graph only; each replica's inputs are placeholders
// float [-1, features] and int32 [-1]). `status` is Run's.
struct AdamStep {
  Scope root = Scope::NewRootScope();
  absl::Status status;
  RunResult step;
  std::vector<Output> xs, ys;  // each replica's placeholders
};
std::unique_ptr<AdamStep> BuildAdamStep(Strategy& strategy, int64_t features,
                                        const std::vector<int64_t>& hidden, int64_t classes);

}  // namespace testing
}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_TEST_UTIL_H_
