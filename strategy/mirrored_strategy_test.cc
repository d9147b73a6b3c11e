// MirroredStrategy graph building: optimizer slots and step counter are
// mirrored once (the collection matches one device's), each replica updates
// its own copies, gradients are fused into buckets, and updating mirrored
// variables outside Run is refused.
#include "strategy/mirrored_strategy.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/mirrored_variable.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"

namespace strata {
namespace distribute {
namespace {

// The MLP 8-16-16-3 with Adam under `s`, graph only.
std::unique_ptr<testing::AdamStep> BuildAdamStep(Strategy& s) {
  return testing::BuildAdamStep(s, 8, {16, 16}, 3);
}

std::unique_ptr<Strategy> Mirrored4(const StrategyOptions& o) {
  return *MirroredStrategy::Create(testing::CpuSpecs(4), testing::Machine(4), o);
}

std::vector<std::string> Names(const Scope& root) {
  std::vector<std::string> out;
  for (train::Variable* v : train::GlobalVariables(root)) out.push_back(v->name());
  return out;
}

TEST(MirroredStrategyTest, SlotsAndStepCounterAreMirroredOnceWithOneDeviceNames) {
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto baseline = BuildAdamStep(*one);
  ASSERT_TRUE(baseline->status.ok()) << baseline->status;
  auto mirrored = *MirroredStrategy::Create(testing::CpuSpecs(3), testing::Machine(3));
  auto built = BuildAdamStep(*mirrored);
  ASSERT_TRUE(built->status.ok()) << built->status;
  // 6 weights, Adam/iter, 12 slots: the same list as on one device.
  EXPECT_EQ(Names(built->root), Names(baseline->root));
  EXPECT_EQ(Names(built->root).size(), 19u);
  for (train::Variable* v : train::GlobalVariables(built->root)) {
    auto* m = dynamic_cast<MirroredVariable*>(v);
    ASSERT_NE(m, nullptr) << v->name();
    EXPECT_EQ(m->num_components(), 3) << v->name();
  }
  // Each replica's updates run on its device, on its own copies (Run checks
  // the handles; here: one update per weight and replica).
  int updates = 0;
  for (Node* n : built->root.graph()->nodes()) {
    if (!n->IsOp("ResourceApplyAdam")) continue;
    ++updates;
    for (int i = 0; i < 3; ++i) {  // var, m, v
      EXPECT_EQ(n->input_edge(i)->src->requested_device(), n->requested_device()) << n->name();
    }
  }
  EXPECT_EQ(updates, 6 * 3);
}

int CountOps(const Scope& root, const char* op) {
  int n = 0;
  for (Node* node : root.graph()->nodes()) n += node->IsOp(op);
  return n;
}

TEST(MirroredStrategyTest, GradientsAreFusedIntoBuckets) {
  auto fused = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2));
  auto a = BuildAdamStep(*fused);
  ASSERT_TRUE(a->status.ok()) << a->status;
  EXPECT_EQ(CountOps(a->root, "CollectiveReduceV2"), 2);  // 1 bucket x 2 replicas

  StrategyOptions o;
  o.gradient_bucket_bytes = 0;  // one all-reduce per gradient
  auto unfused = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), o);
  auto b = BuildAdamStep(*unfused);
  ASSERT_TRUE(b->status.ok()) << b->status;
  EXPECT_EQ(CountOps(b->root, "CollectiveReduceV2"), 6 * 2);

  // Buckets of ~ one 16x16 kernel (1 KiB): the last layers' gradients first.
  o.gradient_bucket_bytes = 1100;
  auto small = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), o);
  auto c = BuildAdamStep(*small);
  ASSERT_TRUE(c->status.ok()) << c->status;
  // Reverse creation order: out bias+kernel (12+192 B) + dense_1 bias (64 B)
  // | dense_1 kernel (1 KiB) | dense bias + kernel (64 + 512 B).
  EXPECT_EQ(CountOps(c->root, "CollectiveReduceV2"), 3 * 2);
}

// Every node `n` depends on (data and control edges), `n` included.
absl::flat_hash_set<const Node*> Ancestors(const Node* n) {
  absl::flat_hash_set<const Node*> seen = {n};
  std::vector<const Node*> todo = {n};
  while (!todo.empty()) {
    const Node* cur = todo.back();
    todo.pop_back();
    for (const Edge* e : cur->in_edges()) {
      if (seen.insert(e->src).second) todo.push_back(e->src);
    }
  }
  return seen;
}

TEST(MirroredStrategyTest, FirstBucketDoesNotWaitForTheFirstLayersGradients) {
  // The all-reduce of the last layers' bucket depends only on their
  // gradients, so the executor starts it while backward still computes the
  // first layer's: no gradient op that reads the input x is upstream of it.
  StrategyOptions o;
  o.gradient_bucket_bytes = 1100;
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2), o);
  auto b = BuildAdamStep(*s);
  ASSERT_TRUE(b->status.ok()) << b->status;
  std::vector<const Node*> collectives;  // replica 0's, in trace (instance key) order
  for (Node* n : b->root.graph()->nodes()) {
    if (n->IsOp("CollectiveReduceV2") && n->requested_device() == s->devices()[0]) {
      collectives.push_back(n);
    }
  }
  ASSERT_EQ(collectives.size(), 3u);
  auto reads_x = [](const Node* n) {
    if (n->name().find("gradients") == std::string::npos) return false;
    for (const Edge* e : n->in_edges()) {
      if (e->src->IsOp("Placeholder")) return true;
    }
    return false;
  };
  int first_layer_grads = 0;
  for (const Node* n : Ancestors(collectives.back())) first_layer_grads += reads_x(n);
  EXPECT_GT(first_layer_grads, 0);  // the last bucket holds the first layer's kernel
  for (const Node* n : Ancestors(collectives.front())) {
    EXPECT_FALSE(reads_x(n)) << n->name() << " is upstream of the first bucket";
  }
}

TEST(MirroredStrategyTest, UpdatingMirroredVariablesOutsideRunIsRefused) {
  auto s = *MirroredStrategy::Create(testing::CpuSpecs(2), testing::Machine(2));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  train::Variable* w = train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones());
  DistributedOptimizer<train::SGD> sgd(0.1);
  Node* op = sgd.ApplyGradients(root, {{ops::Const<float>(root, {1, 1}), w}});
  EXPECT_EQ(op, nullptr);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(root.status().message(), "'w'")) << root.status();
}

TEST(MirroredStrategyTest, DistributedOptimizerWithoutStrategyIsItsBase) {
  Scope root = Scope::NewRootScope();
  train::Variable* w = train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones());
  DistributedOptimizer<train::Momentum> momentum(0.5, 0.9);
  Node* op = momentum.ApplyGradients(root, {{ops::Const<float>(root, {1, 2}), w}});
  ASSERT_NE(op, nullptr) << root.status();
  Node* init = train::GlobalVariablesInitializer(root);
  Output read = w->Read(root);
  auto session = *Session::Create(root);
  {
    absl::Status st = session->Run({}, {}, {init->name()}, nullptr);
    ASSERT_TRUE(st.ok()) << st;
  }
  ASSERT_TRUE(session->Run({}, {}, {op->name()}, nullptr).ok());
  auto out = testing::Fetch(*session, {read.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 1.0f - 0.5f * 2.0f);
  EXPECT_NE(momentum.GetSlot(w, "Momentum"), nullptr);
}

// Gradient compression: float32 gradients all-reduced as bfloat16 or
// float16 (and reduce-scattered so under ZeRO), then cast back; training
// ends close to the uncompressed run.
TEST(MirroredStrategyTest, CompressedGradientsCrossTheWireNarrowAndTrainAlike) {
  auto data = testing::SyntheticData(480, 96, 20, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  testing::TrainConfig c;
  c.hidden = {24, 16};
  c.num_classes = 5;
  c.global_batch = 24;
  c.steps = 200;
  c.optimizer = "adam";
  c.learning_rate = 0.01;
  auto plain = Mirrored4({});
  auto baseline = testing::TrainMlp(*plain, c, *data);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  for (const char* wire : {"bfloat16", "float16"}) {
    for (int zero : {0, 1}) {
      StrategyOptions o;
      o.gradient_compression = wire;
      o.zero_stage = zero;
      auto s = Mirrored4(o);
      auto built = BuildAdamStep(*s);
      ASSERT_TRUE(built->status.ok()) << built->status;
      const DataType want = std::string(wire) == "bfloat16" ? DT_BFLOAT16 : DT_HALF;
      int collectives = 0;
      for (Node* n : built->root.graph()->nodes()) {
        if (n->IsOp(zero ? "CollectiveReduceScatterV2" : "CollectiveReduceV2")) {
          ++collectives;
          EXPECT_EQ(n->output_type(0), want) << n->name();
        }
      }
      EXPECT_GT(collectives, 0);
      auto run = testing::TrainMlp(*s, c, *data);
      ASSERT_TRUE(run.ok()) << run.status();
      SCOPED_TRACE(absl::StrCat(wire, " zero_stage ", zero));
      // The last 20 steps' mean loss within 0.01, the accuracy within 3
      // points (of 96 test examples), and not the same bits: the wire rounds.
      auto tail = [](const std::vector<float>& l) {
        double sum = 0;
        for (size_t i = l.size() - 20; i < l.size(); ++i) sum += l[i];
        return sum / 20;
      };
      EXPECT_LT(tail(run->losses), run->losses.front() * 0.2);
      EXPECT_NEAR(tail(run->losses), tail(baseline->losses), 0.01);
      EXPECT_NEAR(run->test_accuracy, baseline->test_accuracy, 0.03);
      EXPECT_NE(run->losses.back(), baseline->losses.back());
    }
  }
  StrategyOptions bad;
  bad.gradient_compression = "int8";
  auto s = Mirrored4(bad);
  auto built = BuildAdamStep(*s);
  EXPECT_EQ(built->status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(built->status.message(), "gradient_compression is 'int8'"))
      << built->status;
}

}  // namespace
}  // namespace distribute
}  // namespace strata
