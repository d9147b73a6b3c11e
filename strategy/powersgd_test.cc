// PowerSGD (StrategyOptions::gradient_compression = "powersgd"): with a
// rank that spans every gradient it reproduces the uncompressed run step by
// step (so P and Q are reduced and combined right); before start_step it is
// the uncompressed run exactly; at low rank the replicas stay identical and
// the model still learns; bad options are refused by name.
#include "strategy/powersgd.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/initializers.h"

namespace strata {
namespace distribute {
namespace {

StrategyOptions PowerSgdOptions(int rank, int64_t start_step) {
  StrategyOptions o;
  o.gradient_compression = "powersgd";
  o.powersgd_rank = rank;
  o.powersgd_start_step = start_step;
  return o;
}

testing::TrainConfig Config(const std::string& optimizer, int steps) {
  testing::TrainConfig c;
  c.hidden = {24, 16};  // kernels 20x24, 24x16, 16x5
  c.num_classes = 5;
  c.global_batch = 24;
  c.steps = steps;
  c.optimizer = optimizer;
  c.learning_rate = optimizer == "adam" ? 0.01 : 0.05;
  return c;
}

void ExpectLossesNear(const testing::TrainOutcome& a, const testing::TrainOutcome& b, size_t steps,
                      double tol, const std::string& what) {
  ASSERT_GE(a.losses.size(), steps);
  ASSERT_GE(b.losses.size(), steps);
  for (size_t i = 0; i < steps; ++i) {
    ASSERT_NEAR(a.losses[i], b.losses[i], tol) << what << ", step " << i;
  }
}

void ExpectReplicasIdentical(const testing::TrainOutcome& run, const std::string& what) {
  for (size_t r = 1; r < run.copies.size(); ++r) {
    for (size_t k = 0; k < run.weights.size(); ++k) {
      EXPECT_TRUE(testing::SameBits(run.copies[r][k], run.copies[0][k]))
          << what << ": replica " << r << "'s " << run.names[k];
    }
  }
}

TEST(PowerSgdTest, AFullRankApproximationIsTheExactAllReduce) {
  auto data = testing::SyntheticData(480, 96, 20, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  const testing::TrainConfig c = Config("momentum", 60);
  for (int replicas : {2, 3}) {
    auto plain = *MirroredStrategy::Create(testing::CpuSpecs(replicas), testing::Machine(replicas));
    auto baseline = testing::TrainMlp(*plain, c, *data);
    ASSERT_TRUE(baseline.ok()) << baseline.status();
    // Rank 24 spans every kernel's gradient (24 >= each one's smaller dim),
    // so P Q^T is the mean gradient exactly; the error feedback carries each
    // replica's difference from the mean, which averages to zero.
    StrategyOptions o = PowerSgdOptions(24, /*start_step=*/5);
    o.powersgd_min_compression_rate = 1e-3;
    auto compressed_strategy =
        *MirroredStrategy::Create(testing::CpuSpecs(replicas), testing::Machine(replicas), o);
    auto compressed = testing::TrainMlp(*compressed_strategy, c, *data);
    ASSERT_TRUE(compressed.ok()) << compressed.status();
    const std::string what = absl::StrCat(replicas, " replicas, rank 24");
    ExpectLossesNear(*baseline, *compressed, c.steps, 2e-4, what);
    ExpectReplicasIdentical(*compressed, what);
  }
}

TEST(PowerSgdTest, LowRankKeepsReplicasIdenticalAndStillLearns) {
  auto data = testing::SyntheticData(960, 192, 20, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  const testing::TrainConfig c = Config("momentum", 300);
  auto plain = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2));
  auto baseline = testing::TrainMlp(*plain, c, *data);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  for (int rank : {1, 2}) {
    const int64_t start = 20;
    auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2),
                                       PowerSgdOptions(rank, start));
    auto run = testing::TrainMlp(*s, c, *data);
    ASSERT_TRUE(run.ok()) << run.status();
    const std::string what = absl::StrCat("rank ", rank);
    // Before start_step: the uncompressed all-reduce, bit for bit the same
    // arithmetic.
    ExpectLossesNear(*baseline, *run, start, 1e-6, what);
    // Afterwards an approximation: not the uncompressed run...
    bool differs = false;
    for (size_t i = start; i < run->losses.size(); ++i) {
      differs |= std::abs(run->losses[i] - baseline->losses[i]) > 1e-4;
    }
    EXPECT_TRUE(differs) << what << ": compression changed nothing";
    // ...but the same on every replica, and it learns.
    ExpectReplicasIdentical(*run, what);
    // (Mean losses over windows: one batch of 24 is noisy.)
    auto mean = [](const std::vector<float>& l, size_t from, size_t to) {
      double sum = 0;
      for (size_t i = from; i < to; ++i) sum += l[i];
      return sum / (to - from);
    };
    const size_t n = run->losses.size();
    EXPECT_LT(mean(run->losses, n - 50, n), 0.4 * mean(run->losses, 0, 10)) << what;
    EXPECT_LT(mean(run->losses, n - 50, n), 1.5 * mean(baseline->losses, n - 50, n)) << what;
    EXPECT_GT(run->test_accuracy, baseline->test_accuracy - 0.1) << what;
  }
}

TEST(PowerSgdTest, CompressesTheMatricesWorthItAndKeepsItsStateOutOfCheckpoints) {
  auto s =
      *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), PowerSgdOptions(4, 0));
  auto built = testing::BuildAdamStep(*s, 20, {24, 16}, 5);
  ASSERT_TRUE(built->status.ok()) << built->status;
  std::vector<std::string> state;
  for (train::Variable* v : train::GlobalVariables(built->root)) {
    if (!absl::StrContains(v->name(), "powersgd")) continue;
    state.push_back(v->name());
    ASSERT_NE(v->sharded_contents(), nullptr) << v->name();
    EXPECT_FALSE(v->sharded_contents()->saved) << v->name();
  }
  // Rank 4: 20x24 (rate 2.7) and 24x16 (2.4) are compressed, 16x5 (0.95)
  // and the biases are not.
  std::sort(state.begin(), state.end());
  EXPECT_EQ(state,
            (std::vector<std::string>{"dense/kernel/powersgd_error", "dense/kernel/powersgd_q",
                                      "dense_1/kernel/powersgd_error", "dense_1/kernel/powersgd_q",
                                      "powersgd/step"}));
}

// Error feedback, checked by an identity: with a constant gradient G_r on
// each replica and SGD at learning rate 1 from zero, the weights after T
// steps are -(sum of the applied approximations) = -(T mean_r G_r -
// mean_r error_r), since each step's error is what its approximation left
// out of M = G + previous error. Without error feedback (or with a wrong
// one) the identity breaks; rank 1 of a 6x5 matrix leaves a large error.
TEST(PowerSgdTest, ErrorFeedbackCarriesWhatTheApproximationsLeftOut) {
  constexpr int kReplicas = 3, kSteps = 40;
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(kReplicas), testing::Machine(kReplicas),
                                     PowerSgdOptions(1, 0));
  Scope root = Scope::NewRootScope();
  train::Variable* w = nullptr;
  {
    StrategyScope in_scope = s->Scope();
    w = train::CreateVariable(root, "w", TensorShape{6, 5}, DT_FLOAT, train::Zeros());
  }
  ASSERT_NE(w, nullptr);
  std::vector<std::vector<float>> g(kReplicas);
  std::vector<float> mean(30, 0);
  for (int r = 0; r < kReplicas; ++r) {
    for (int i = 0; i < 30; ++i) {
      g[r].push_back(std::sin(1.0f + i * (r + 2)) + 0.1f * r);
      mean[i] += g[r][i] / kReplicas;
    }
  }
  DistributedOptimizer<train::SGD> sgd(1.0);
  auto result = s->Run(
      root, [&](ReplicaContext& ctx, const std::vector<Output>&) -> absl::StatusOr<ReplicaResult> {
        Output grad = ops::Const<float>(ctx.scope(), g[ctx.replica_id()], TensorShape{6, 5});
        Node* op = sgd.ApplyGradients(ctx.scope(), {{grad, w}});
        STRATA_RETURN_IF_ERROR(ctx.scope().status());
        return ReplicaResult{{}, {op}};
      });
  ASSERT_TRUE(result.ok()) << result.status();
  train::Variable* error = nullptr;
  for (train::Variable* v : train::GlobalVariables(root)) {
    if (v->name() == "w/powersgd_error") error = v;
  }
  ASSERT_NE(error, nullptr);
  std::vector<std::string> reads = {w->replica(0)->Read(root).name()};
  for (int r = 0; r < kReplicas; ++r) reads.push_back(error->replica(r)->Read(root).name());
  Node* init = train::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = *Session::Create(root, s->session_options());
  ASSERT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  for (int step = 0; step < kSteps; ++step) {
    absl::Status ran = session->Run({}, {}, {result->op->name()}, nullptr);
    ASSERT_TRUE(ran.ok()) << ran;
  }
  auto values = testing::Fetch(*session, reads);
  ASSERT_TRUE(values.ok()) << values.status();
  double largest_error = 0;
  for (int i = 0; i < 30; ++i) {
    double mean_error = 0;
    for (int r = 0; r < kReplicas; ++r) mean_error += (*values)[1 + r].data<float>()[i] / kReplicas;
    largest_error = std::max(largest_error, std::abs(mean_error));
    const double applied = -(*values)[0].data<float>()[i];
    EXPECT_NEAR(applied, kSteps * mean[i] - mean_error, 1e-3 * kSteps) << "element " << i;
  }
  EXPECT_GT(largest_error, 0.05);  // rank 1 left something out, carried forward
}

absl::Status BuildWith(const StrategyOptions& o, int replicas = 2) {
  auto s = MirroredStrategy::Create(testing::CpuSpecs(replicas), testing::Machine(replicas), o);
  if (!s.ok()) return s.status();
  return testing::BuildAdamStep(**s, 20, {24, 16}, 5)->status;
}

TEST(PowerSgdTest, BadOptionsAreRefusedByName) {
  StrategyOptions o = PowerSgdOptions(1, 0);
  o.powersgd_variables = {"dense/bias"};
  absl::Status s = BuildWith(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "powersgd_variables names 'dense/bias'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "matrices")) << s;

  o.powersgd_variables = {"dense/kernal"};
  s = BuildWith(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "'dense/kernal', which is not a variable")) << s;

  o.powersgd_variables = {"dense/kernel"};
  EXPECT_TRUE(BuildWith(o).ok());

  o = PowerSgdOptions(0, 0);
  s = BuildWith(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "powersgd_rank is 0")) << s;

  o = PowerSgdOptions(1, 0);
  o.zero_stage = 1;
  s = BuildWith(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "'powersgd' does not combine with zero_stage 1")) << s;
}

}  // namespace
}  // namespace distribute
}  // namespace strata
