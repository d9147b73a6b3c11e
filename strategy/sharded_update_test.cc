// ZeRO stage 1 (StrategyOptions::zero_stage = 1): each replica's optimizer
// slots are a block of 1/N of the parameters, measured by the devices'
// allocators; training follows the unsharded run step by step; the slots
// name the unsharded slots they stand for; bad options are refused by name.
#include "strategy/sharded_update.h"

#include <cstdio>
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
#include "train/losses.h"
#include "train/models.h"

namespace strata {
namespace distribute {
namespace {

StrategyOptions Zero(int stage) {
  StrategyOptions o;
  o.zero_stage = stage;
  return o;
}

std::unique_ptr<Strategy> Mirrored(int replicas, int stage) {
  return *MirroredStrategy::Create(testing::CpuSpecs(replicas), testing::Machine(replicas),
                                   Zero(stage));
}

// The MLP 20-24-16-5 (P = 20*24+24 + 24*16+16 + 16*5+5 = 989 parameters)
// with Adam under `s`.
constexpr int64_t kParams = 989;
std::unique_ptr<testing::AdamStep> BuildAdamStep(Strategy& s) {
  return testing::BuildAdamStep(s, 20, {24, 16}, 5);
}

int CountOps(const Scope& root, const char* op) {
  int n = 0;
  for (Node* node : root.graph()->nodes()) n += node->IsOp(op);
  return n;
}

train::Variable* Find(const Scope& root, const std::string& name) {
  for (train::Variable* v : train::GlobalVariables(root)) {
    if (v->name() == name) return v;
  }
  return nullptr;
}

TEST(ShardedUpdateTest, EachReplicaKeepsTheSlotsOfItsBlockOnly) {
  auto s = Mirrored(3, 1);
  auto built = BuildAdamStep(*s);
  ASSERT_TRUE(built->status.ok()) << built->status;
  const int64_t block = (kParams + 2) / 3;  // 330, the last block padded by 1
  // No slot per weight: one shard variable and its two slots, [block] each.
  for (const char* absent : {"dense/kernel/Adam", "dense/kernel/Adam_1", "dense_2/bias/Adam"}) {
    EXPECT_EQ(Find(built->root, absent), nullptr) << absent;
  }
  train::Variable* shard = Find(built->root, "Adam/zero_float");
  train::Variable* m = Find(built->root, "Adam/zero_float/Adam");
  train::Variable* v = Find(built->root, "Adam/zero_float/Adam_1");
  ASSERT_NE(shard, nullptr);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(v, nullptr);
  for (train::Variable* x : {shard, m, v}) {
    EXPECT_EQ(x->shape(), TensorShape({block})) << x->name();
    EXPECT_EQ(x->num_replicas(), 3) << x->name();
    ASSERT_NE(x->sharded_contents(), nullptr) << x->name();
    EXPECT_EQ(x->sharded_contents()->block, block);
    EXPECT_EQ(x->sharded_contents()->component_of_block, (std::vector<int>{0, 1, 2}));
  }
  // The slots stand for the unsharded slots, in the gradient buckets' order
  // (the last layer's first); the shard of the parameters is scratch.
  EXPECT_FALSE(shard->sharded_contents()->saved);
  EXPECT_TRUE(m->sharded_contents()->saved);
  const std::vector<std::string> names = m->sharded_contents()->names;
  ASSERT_EQ(names.size(), 6u);
  EXPECT_EQ(names[0], "dense_2/bias/Adam");
  EXPECT_EQ(names[5], "dense/kernel/Adam");
  EXPECT_EQ(v->sharded_contents()->names[5], "dense/kernel/Adam_1");
  EXPECT_EQ(m->sharded_contents()->shapes[5], TensorShape({20, 24}));
  // Per replica: one reduce-scatter, one update, one all-gather.
  EXPECT_EQ(CountOps(built->root, "CollectiveReduceScatterV2"), 3);
  EXPECT_EQ(CountOps(built->root, "CollectiveGatherV2"), 3);
  EXPECT_EQ(CountOps(built->root, "CollectiveReduceV2"), 0);
  EXPECT_EQ(CountOps(built->root, "ResourceApplyAdam"), 3);
}

TEST(ShardedUpdateTest, OneShardVariablePerGradientBucket) {
  // gradient_bucket_bytes 0: a bucket, a shard variable and a reduce-scatter
  // per weight, each block a third of its weight (padded).
  StrategyOptions o = Zero(1);
  o.gradient_bucket_bytes = 0;
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(3), testing::Machine(3), o);
  auto built = BuildAdamStep(*s);
  ASSERT_TRUE(built->status.ok()) << built->status;
  EXPECT_EQ(CountOps(built->root, "CollectiveReduceScatterV2"), 6 * 3);
  EXPECT_EQ(CountOps(built->root, "CollectiveGatherV2"), 6 * 3);
  EXPECT_EQ(CountOps(built->root, "ResourceApplyAdam"), 6 * 3);
  train::Variable* first = Find(built->root, "Adam/zero_float/Adam");  // dense_2/bias's: 5
  train::Variable* last = Find(built->root, "Adam/zero_float_5/Adam");  // dense/kernel's: 480
  ASSERT_NE(first, nullptr);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(first->shape(), TensorShape({2}));
  EXPECT_EQ(first->sharded_contents()->names, std::vector<std::string>{"dense_2/bias/Adam"});
  EXPECT_EQ(last->shape(), TensorShape({160}));
  EXPECT_EQ(last->sharded_contents()->names, std::vector<std::string>{"dense/kernel/Adam"});
}

// Bytes in use on each device after the variables are initialized.
std::vector<int64_t> BytesAfterInit(Strategy& s, const testing::AdamStep& b) {
  Node* init = train::GlobalVariablesInitializer(b.root);
  auto session = *Session::Create(b.root, s.session_options());
  absl::Status ran = session->Run({}, {}, {init->name()}, nullptr);
  EXPECT_TRUE(ran.ok()) << ran;
  std::vector<int64_t> out;
  for (const std::string& d : s.devices()) {
    const AllocatorStats st = (*session->device_mgr().LookupDevice(d))->allocator()->GetStats();
    out.push_back(st.bytes_in_use);
  }
  return out;
}

TEST(ShardedUpdateTest, TheAllocatorsHoldAQuarterOfTheSlotsOnFourReplicas) {
  // A graph whose initializer runs in a session of its own strategy (the
  // session's devices are the strategy's own).
  auto mirrored = Mirrored(4, 0);
  auto sharded = Mirrored(4, 1);
  auto a = BuildAdamStep(*mirrored);
  auto b = BuildAdamStep(*sharded);
  ASSERT_TRUE(a->status.ok()) << a->status;
  ASSERT_TRUE(b->status.ok()) << b->status;
  const std::vector<int64_t> full = BytesAfterInit(*mirrored, *a);
  const std::vector<int64_t> sharded_bytes = BytesAfterInit(*sharded, *b);
  const int64_t params = kParams * 4;
  const int64_t block = (kParams + 3) / 4 * 4;  // bytes of one [block] float tensor
  for (int r = 0; r < 4; ++r) {
    const int64_t state_full = full[r] - params;
    const int64_t state_sharded = sharded_bytes[r] - params;
    std::printf("replica %d: optimizer state %lld bytes mirrored, %lld sharded (%.3f)\n", r,
                static_cast<long long>(state_full), static_cast<long long>(state_sharded),
                static_cast<double>(state_sharded) / static_cast<double>(state_full));
    // Mirrored: m and v of every parameter (and the step counter; replica
    // 0's device also keeps a few small host values).
    EXPECT_GE(state_full, 2 * params) << r;
    EXPECT_LE(state_full, 2 * params + 512) << r;
    // Sharded: m and v of a quarter, and the quarter's working copy.
    EXPECT_GE(state_sharded, 3 * block) << r;
    EXPECT_LE(state_sharded, 3 * block + 512) << r;
  }
}

// Each device's peak bytes over initialization and 3 training steps of an
// MLP 256-512-512-10 with Adam, batch 8 per replica.
std::vector<int64_t> PeakBytesOfSteps(int stage) {
  auto s = Mirrored(4, stage);
  auto b = testing::BuildAdamStep(*s, 256, {512, 512}, 10);
  EXPECT_TRUE(b->status.ok()) << b->status;
  Node* init = train::GlobalVariablesInitializer(b->root);
  auto session = *Session::Create(b->root, s->session_options());
  EXPECT_TRUE(session->Run({}, {}, {init->name()}, nullptr).ok());
  std::vector<std::pair<std::string, Tensor>> feeds;
  Tensor x(DT_FLOAT, TensorShape{8, 256});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<float>()[i] = 0.01f * (i % 97);
  Tensor y(DT_INT32, TensorShape{8});
  for (int i = 0; i < 8; ++i) y.data<int32_t>()[i] = i % 10;
  for (int r = 0; r < 4; ++r) {
    feeds.push_back({b->xs[r].name(), x});
    feeds.push_back({b->ys[r].name(), y});
  }
  for (int step = 0; step < 3; ++step) {
    absl::Status ran = session->Run(feeds, {}, {b->step.op->name()}, nullptr);
    EXPECT_TRUE(ran.ok()) << ran;
  }
  std::vector<int64_t> out;
  for (const std::string& d : s->devices()) {
    out.push_back((*session->device_mgr().LookupDevice(d))->allocator()->GetStats().peak_bytes_in_use);
  }
  return out;
}

// ZeRO stage 2 (here the same mechanism as stage 1, which already
// reduce-scatters the gradients: no replica ever holds the reduced full
// gradient): each device's peak memory over training steps.
TEST(ShardedUpdateTest, StageTwoLowersEachReplicasPeakMemory) {
  const std::vector<int64_t> mirrored = PeakBytesOfSteps(0);
  const std::vector<int64_t> sharded = PeakBytesOfSteps(2);
  for (int r = 0; r < 4; ++r) {
    std::printf("replica %d: peak %lld bytes mirrored, %lld with zero_stage 2 (%.3f)\n", r,
                static_cast<long long>(mirrored[r]), static_cast<long long>(sharded[r]),
                static_cast<double>(sharded[r]) / static_cast<double>(mirrored[r]));
    // P = 399,370 parameters (1.6 MB): mirrored holds P + m, v (2P) + the
    // gradients and their bucket's copy (2P) at its peak, 5P; sharded holds
    // P + m, v and the working copy of a quarter (0.75P) + the same 2P.
    EXPECT_LE(static_cast<double>(sharded[r]), 0.8 * static_cast<double>(mirrored[r])) << r;
  }
}

testing::TrainConfig Config(const std::string& optimizer) {
  testing::TrainConfig c;
  c.hidden = {24, 16};
  c.num_classes = 5;
  c.global_batch = 24;
  c.steps = 200;
  c.optimizer = optimizer;
  c.learning_rate = optimizer == "adam" ? 0.01 : 0.05;
  c.clip_global_norm = 0.5;  // binds at the start: the norm sums every replica's part
  return c;
}

void ExpectSameRun(const testing::TrainOutcome& a, const testing::TrainOutcome& b,
                   const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    ASSERT_NEAR(a.losses[i], b.losses[i], 1e-5) << what << ", step " << i;
  }
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t k = 0; k < a.weights.size(); ++k) {
    const float* x = a.weights[k].data<float>();
    const float* y = b.weights[k].data<float>();
    for (int64_t i = 0; i < a.weights[k].NumElements(); ++i) {
      ASSERT_NEAR(x[i], y[i], 1e-5) << what << ", " << a.names[k] << "[" << i << "]";
    }
  }
  // Every replica's copy of the parameters is the same.
  for (size_t r = 1; r < b.copies.size(); ++r) {
    for (size_t k = 0; k < b.weights.size(); ++k) {
      EXPECT_TRUE(testing::SameBits(b.copies[r][k], b.copies[0][k]))
          << what << ": replica " << r << "'s " << b.names[k];
    }
  }
}

TEST(ShardedUpdateTest, ShardedAdamAndMomentumTrainAsMirroredStepByStep) {
  auto data = testing::SyntheticData(480, 96, 20, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  for (const char* optimizer : {"adam", "momentum"}) {
    const testing::TrainConfig c = Config(optimizer);
    auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
    auto baseline = testing::TrainMlp(*one, c, *data);
    ASSERT_TRUE(baseline.ok()) << baseline.status();
    EXPECT_LT(baseline->losses.back(), baseline->losses.front() * 0.7) << optimizer;
    for (int replicas : {4, 3}) {
      for (int64_t bucket_bytes : {int64_t{25} << 20, int64_t{0}}) {
        StrategyOptions o = Zero(1);
        o.gradient_bucket_bytes = bucket_bytes;
        auto sharded = *MirroredStrategy::Create(testing::CpuSpecs(replicas),
                                                 testing::Machine(replicas), o);
        auto run = testing::TrainMlp(*sharded, c, *data);
        ASSERT_TRUE(run.ok()) << run.status();
        ExpectSameRun(*baseline, *run,
                      absl::StrCat(optimizer, " sharded over ", replicas, ", buckets of ",
                                   bucket_bytes, " bytes"));
      }
    }
  }
}

TEST(ShardedUpdateTest, BadStagesAndDtypesAreRefusedByName) {
  auto s = Mirrored(2, 3);
  auto built = BuildAdamStep(*s);
  ASSERT_FALSE(built->status.ok());
  EXPECT_EQ(built->status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(built->status.message(), "zero_stage is 3")) << built->status;

  // An integer variable cannot be averaged by reduce-scatter.
  auto z = Mirrored(2, 1);
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = z->Scope();
  train::Variable* counts = train::CreateVariable(root, "counts", TensorShape{4}, DT_INT32,
                                                  train::Zeros());
  ASSERT_NE(counts, nullptr);
  DistributedOptimizer<train::SGD> sgd(0.1);
  auto result = z->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    Output grad = ops::Const<int32_t>(ctx.scope(), {1, 1, 1, 1});
    Node* op = sgd.ApplyGradients(ctx.scope(), {{grad, counts}});
    STRATA_RETURN_IF_ERROR(ctx.scope().status());
    return ReplicaResult{{}, {op}};
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "zero_stage 1: variable 'counts'"))
      << result.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
