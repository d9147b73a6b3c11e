// Dropout and BatchNormalization (train/phase_layers.h): inference and
// training forms, masks that are new each step, repeat from run to run and
// differ per replica, batch statistics and moving averages against values
// computed here from the definitions, and bad arguments refused by name.
#include "train/phase_layers.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/phase.h"
#include "train/transformer_lm.h"
#include "train/variable.h"

namespace strata {
namespace train {
namespace {

std::unique_ptr<Session> Init(const Scope& root) {
  const std::string init = GlobalVariablesInitializer(root)->name();
  auto s = Session::Create(root);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE((*s)->Run({}, {}, {init}, nullptr).ok());
  return *std::move(s);
}

Tensor Filled(const TensorShape& shape, float v) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = v;
  return t;
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements()); }

// The masks of `steps` training runs of Dropout(rate 0.25, seed 7) on ones
// [64, 32], traced as `replica` of `replicas` (no ReplicaScope when 1), in a
// fresh graph and session.
std::vector<std::vector<float>> DropoutMasks(int steps, int replica = 0, int replicas = 1) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 32}));
  Dropout dropout(0.25, 7);
  absl::StatusOr<Output> y;
  {
    TrainingPhase training(true);
    ReplicaInfo info;
    info.replica_id = replica;
    info.num_replicas = replicas;
    std::optional<ReplicaScope> in_replica;
    if (replicas > 1) in_replica.emplace(info);
    y = dropout.Apply(root, x);
  }
  EXPECT_TRUE(y.ok()) << y.status();
  if (!y.ok()) return {};
  auto s = Init(root);
  std::vector<std::vector<float>> masks;
  for (int i = 0; i < steps; ++i) {
    std::vector<Tensor> out;
    EXPECT_TRUE(s->Run({{"x", Filled(TensorShape{64, 32}, 1)}}, {y->name()}, {}, &out).ok());
    masks.push_back(Values(out[0]));
  }
  return masks;
}

TEST(DropoutTest, InInferenceItIsTheIdentity) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 4}));
  Dropout dropout(0.5, 1);
  auto y = dropout.Apply(root, x);
  ASSERT_TRUE(y.ok()) << y.status();
  Output step = dropout.variables()[0]->Read(root);
  auto s = Init(root);
  Tensor in(DT_FLOAT, TensorShape{2, 4});
  for (int i = 0; i < 8; ++i) in.data<float>()[i] = static_cast<float>(i) - 3.5f;
  std::vector<Tensor> out;
  ASSERT_TRUE(s->Run({{"x", in}}, {y->name(), step.name()}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), Values(in));
  EXPECT_EQ(out[1].data<int64_t>()[0], 0) << "inference leaves the step alone";
  EXPECT_EQ(dropout.variables()[0]->name(), "dropout/seed_step");
  EXPECT_FALSE(dropout.variables()[0]->trainable());
}

TEST(DropoutTest, InTrainingItDropsAboutRateAndScalesTheRestWithANewMaskEachStep) {
  const std::vector<std::vector<float>> masks = DropoutMasks(3);
  ASSERT_EQ(masks.size(), 3u);
  for (const std::vector<float>& m : masks) {
    int dropped = 0;
    for (float v : m) {
      if (v == 0) {
        ++dropped;
      } else {
        EXPECT_FLOAT_EQ(v, 1 / 0.75f);
      }
    }
    EXPECT_NEAR(dropped / 2048.0, 0.25, 0.04);
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
}

TEST(DropoutTest, MasksRepeatFromRunToRunAndDifferPerReplica) {
  const auto single = DropoutMasks(3);
  EXPECT_EQ(DropoutMasks(3), single) << "same seed, same steps: same masks";
  const auto replica0 = DropoutMasks(2, 0, 2);
  const auto replica1 = DropoutMasks(2, 1, 2);
  ASSERT_EQ(replica0.size(), 2u);
  ASSERT_EQ(replica1.size(), 2u);
  EXPECT_NE(replica0[0], replica1[0]) << "each replica draws its own mask";
  // Stream step * replicas + replica: replica r of 2 at step s draws what a
  // single replica draws at step 2s + r.
  EXPECT_EQ(replica0[0], single[0]);
  EXPECT_EQ(replica1[0], single[1]);
  EXPECT_EQ(replica0[1], single[2]);
}

TEST(DropoutTest, ABadRateIsRefusedByName) {
  for (double rate : {-0.1, 1.0}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 4}));
    Dropout dropout(rate, 1, "drop");
    auto y = dropout.Apply(root, x);
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(y.status().message().find("layer 'drop' (dropout): rate must be in [0, 1)"), std::string::npos)
        << y.status();
  }
}

// x [n, ..., features] with feature f ~ N(mean f, scale f).
Tensor Features(const TensorShape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0, 1);
  Tensor t(DT_FLOAT, shape);
  const int64_t f = shape.dim_size(shape.dims() - 1);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const int64_t k = i % f;
    t.data<float>()[i] = 3.0f - 2.0f * k + (1.0f + k) * normal(gen);
  }
  return t;
}

// Per feature: mean and biased variance over every row.
void Moments(const Tensor& t, std::vector<double>* mean, std::vector<double>* var) {
  const int64_t f = t.dim_size(t.dims() - 1), rows = t.NumElements() / f;
  mean->assign(f, 0);
  var->assign(f, 0);
  for (int64_t i = 0; i < t.NumElements(); ++i) (*mean)[i % f] += t.data<float>()[i] / rows;
  for (int64_t i = 0; i < t.NumElements(); ++i) (*var)[i % f] += std::pow(t.data<float>()[i] - (*mean)[i % f], 2) / rows;
}

TEST(BatchNormalizationTest, TrainsOnTheBatchUpdatesTheMovingAveragesAndInfersFromThem) {
  for (const TensorShape& shape : {TensorShape{16, 3}, TensorShape{2, 3, 5, 3}}) {
    SCOPED_TRACE(shape.DebugString());
    Scope root = Scope::NewRootScope();
    std::vector<int64_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
    dims[0] = -1;
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape(dims));
    BatchNormalization bn({.momentum = 0.9, .epsilon = 1e-3});
    absl::StatusOr<Output> train_y, infer_y;
    {
      TrainingPhase training(true);
      train_y = bn.Apply(root, x);
    }
    infer_y = bn.Apply(root, x);
    ASSERT_TRUE(train_y.ok()) << train_y.status();
    ASSERT_TRUE(infer_y.ok()) << infer_y.status();
    ASSERT_EQ(bn.variables().size(), 4u);
    EXPECT_EQ(bn.variables()[2]->name(), "batch_normalization/moving_mean");
    EXPECT_FALSE(bn.variables()[3]->trainable());
    EXPECT_TRUE(bn.variables()[0]->trainable());
    const std::vector<std::string> moving = {bn.variables()[2]->Read(root).name(), bn.variables()[3]->Read(root).name()};
    auto s = Init(root);
    const Tensor in = Features(shape, 3);
    std::vector<double> mean, var;
    Moments(in, &mean, &var);

    std::vector<Tensor> out;
    ASSERT_TRUE(s->Run({{"x", in}}, {train_y->name()}, {}, &out).ok());
    std::vector<double> out_mean, out_var;
    Moments(out[0], &out_mean, &out_var);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(out_mean[k], 0, 1e-5) << k;
      EXPECT_NEAR(out_var[k], var[k] / (var[k] + 1e-3), 1e-4) << k;
    }
    // Fetching the output ran the update once.
    ASSERT_TRUE(s->Run({}, moving, {}, &out).ok());
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(out[0].data<float>()[k], 0.1 * mean[k], 1e-5) << k;
      EXPECT_NEAR(out[1].data<float>()[k], 0.9 + 0.1 * var[k], 1e-4) << k;
    }
    const std::vector<float> moving_mean = Values(out[0]), moving_var = Values(out[1]);
    ASSERT_TRUE(s->Run({{"x", in}}, {infer_y->name()}, {}, &out).ok());
    for (int64_t i = 0; i < in.NumElements(); ++i) {
      const int k = static_cast<int>(i % 3);
      const double want = (in.data<float>()[i] - moving_mean[k]) / std::sqrt(moving_var[k] + 1e-3);
      EXPECT_NEAR(out[0].data<float>()[i], want, 1e-4 * (1 + std::abs(want))) << i;
    }
    ASSERT_TRUE(s->Run({}, moving, {}, &out).ok());
    EXPECT_EQ(Values(out[0]), moving_mean) << "inference updates nothing";
  }
}

TEST(BatchNormalizationTest, BadArgumentsAreRefusedByName) {
  struct Case {
    BatchNormalization::Options options;
    PartialTensorShape input;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{.momentum = 1.5}, PartialTensorShape({-1, 4}), "momentum must be in [0, 1]"},
      {{.epsilon = 0}, PartialTensorShape({-1, 4}), "epsilon must be > 0"},
      {{}, PartialTensorShape({4}), "at least 2 dims"},
      {{}, PartialTensorShape({-1, -1}), "the last (the features) known"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, c.input);
    BatchNormalization bn(c.options, "bn");
    auto y = bn.Apply(root, x);
    ASSERT_FALSE(y.ok()) << c.message;
    EXPECT_NE(y.status().message().find("layer 'bn' (batch_normalization): "), std::string::npos) << y.status();
    EXPECT_NE(y.status().message().find(c.message), std::string::npos) << y.status();
  }
}

TEST(TransformerLmTest, ResidualDropoutActsInTrainingOnly) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, PartialTensorShape({-1, 8}));
  TransformerLm lm({.vocab = 11, .seq = 8, .width = 16, .heads = 2, .blocks = 2, .seed = 1, .dropout = 0.5});
  absl::StatusOr<Output> train_logits, infer_logits;
  {
    TrainingPhase training(true);
    train_logits = lm.Build(root, ids);
  }
  infer_logits = lm.Build(root, ids);
  ASSERT_TRUE(train_logits.ok()) << train_logits.status();
  ASSERT_TRUE(infer_logits.ok()) << infer_logits.status();
  int steps = 0;
  for (Variable* v : lm.variables()) steps += v->name().find("dropout/seed_step") != std::string::npos;
  EXPECT_EQ(steps, 4) << "two Dropout layers per block";
  auto s = Init(root);
  Tensor x(DT_INT32, TensorShape{3, 8});
  for (int i = 0; i < 24; ++i) x.data<int32_t>()[i] = i % 11;
  std::vector<Tensor> a, b;
  ASSERT_TRUE(s->Run({{"ids", x}}, {train_logits->name(), infer_logits->name()}, {}, &a).ok());
  ASSERT_TRUE(s->Run({{"ids", x}}, {train_logits->name(), infer_logits->name()}, {}, &b).ok());
  EXPECT_NE(Values(a[0]), Values(b[0])) << "a new mask each training step";
  EXPECT_EQ(Values(a[1]), Values(b[1])) << "inference drops nothing";
}

}  // namespace
}  // namespace train
}  // namespace strata
