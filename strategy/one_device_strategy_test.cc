// OneDeviceStrategy: plain variables on its device, and training under it is
// bit for bit the training of the same model code without any strategy.
#include "strategy/one_device_strategy.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/mirrored_variable.h"
#include "strategy/pipeline.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"

namespace strata {
namespace distribute {
namespace {

TEST(OneDeviceStrategyTest, VariablesArePlainOnTheDevice) {
  auto s = *OneDeviceStrategy::Create("/device:CPU:1", testing::Machine(2));
  EXPECT_EQ(s->num_replicas_in_sync(), 1);
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  train::Variable* v = train::CreateVariable(root, "v", TensorShape{2}, DT_FLOAT, train::Ones());
  ASSERT_NE(v, nullptr) << root.status();
  EXPECT_EQ(dynamic_cast<MirroredVariable*>(v), nullptr);
  EXPECT_EQ(v->device(), "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(v->name(), "v");
}

TEST(OneDeviceStrategyTest, VariablesFromOutsideItsScopeMayBeUsedInRun) {
  auto s = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  Scope root = Scope::NewRootScope();
  train::Variable* v = train::CreateVariable(root, "v", TensorShape{2}, DT_FLOAT, train::Ones());
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    return ReplicaResult{{v->Read(ctx.scope())}, {}};
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

// A pipeline traced under the strategy keeps each stage's weights, and
// their optimizer slots, on the stage's device (they went on the strategy's
// device, and every micro-batch read stage 1's weights from there).
TEST(OneDeviceStrategyTest, APipelinesWeightsStayOnTheirStagesDevices) {
  auto s = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(2));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  auto model = train::MakeMlp({4, 4}, 3, /*seed=*/1);
  ASSERT_TRUE(model.ok()) << model.status();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({8, 5}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({8}));
  PipelineOptions po;
  po.stage_devices = {"/device:CPU:0", "/device:CPU:1"};
  po.stage_starts = {0, 2};
  po.micro_batches = 2;
  train::Momentum momentum(0.1, 0.9);
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>& in)
                                 -> absl::StatusOr<ReplicaResult> {
    auto loss = [](const Scope& sc, Output labels, Output logits) {
      return train::SparseSoftmaxCrossEntropy(sc, labels, logits);
    };
    STRATA_ASSIGN_OR_RETURN(PipelineStep step, BuildPipelineTrainStep(ctx.scope(), model->get(),
                                                                      in[0], in[1], loss,
                                                                      &momentum, po));
    return ReplicaResult{{step.loss}, {step.train_op}};
  }, {PerReplica({x}), PerReplica({y})});
  ASSERT_TRUE(result.ok()) << result.status();
  int on_stage_1 = 0;
  for (int layer = 0; layer < 3; ++layer) {
    for (train::Variable* v : (*model)->layers()[layer]->variables()) {
      // The stage's device as asked for, or in full.
      const std::string want = layer < 2 ? "CPU:0" : "CPU:1";
      EXPECT_TRUE(absl::EndsWith(v->device(), want)) << v->name() << " on " << v->device();
      train::Variable* slot = momentum.GetSlot(v, "Momentum");
      ASSERT_NE(slot, nullptr) << v->name();
      EXPECT_TRUE(absl::EndsWith(slot->device(), want)) << slot->name() << " on " << slot->device();
      on_stage_1 += layer == 2 ? 1 : 0;
    }
  }
  EXPECT_EQ(on_stage_1, 2);  // the last layer's kernel and bias
}

// The trainer's MLP trained with plain model code, no strategy.
absl::StatusOr<std::vector<Tensor>> TrainWithoutStrategy(const testing::TrainConfig& c,
                                                         const testing::Data& d) {
  const int64_t features = d.train_x.dim_size(1);
  Scope root = Scope::NewRootScope();
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({d.train_x, d.train_y}));
  STRATA_ASSIGN_OR_RETURN(ds, data::Shuffle(ds, static_cast<uint64_t>(c.seed)));
  STRATA_ASSIGN_OR_RETURN(ds, data::Batch(ds, c.global_batch, true));
  STRATA_ASSIGN_OR_RETURN(ds, data::Repeat(ds));
  STRATA_ASSIGN_OR_RETURN(auto it, data::DatasetIterator::Create(ds));
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, features}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({-1}));
  STRATA_ASSIGN_OR_RETURN(auto model, train::MakeMlp(c.hidden, c.num_classes, c.seed));
  STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(root, x));
  Output loss = train::SparseSoftmaxCrossEntropy(root, y, logits);
  train::SGD sgd(c.learning_rate);
  STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(root, loss, model->reads(), &sgd));
  std::vector<std::string> reads;
  for (train::Variable* v : model->variables()) reads.push_back(v->Read(root).name());
  Node* init = train::GlobalVariablesInitializer(root);
  SessionOptions so;
  so.devices = testing::Machine(1);
  STRATA_ASSIGN_OR_RETURN(auto session, Session::Create(root, so));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  for (int i = 0; i < c.steps; ++i) {
    data::Example batch;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    STRATA_RETURN_IF_ERROR(session->Run({{"x", batch[0]}, {"y", batch[1]}}, {}, {train_op->name()}, nullptr));
  }
  return testing::Fetch(*session, reads);
}

TEST(OneDeviceStrategyTest, TrainsBitwiseLikeNoStrategyAndLikeMirroredOnOneDevice) {
  auto d = testing::SyntheticData(256, 64, 12, 4);
  ASSERT_TRUE(d.ok()) << d.status();
  testing::TrainConfig c;
  c.num_classes = 4;
  c.hidden = {16};
  c.steps = 20;
  auto plain = TrainWithoutStrategy(c, *d);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto under_one = testing::TrainMlp(*one, c, *d);
  ASSERT_TRUE(under_one.ok()) << under_one.status();
  auto mirrored = *MirroredStrategy::Create({"/cpu:0"}, testing::Machine(1));
  auto under_mirrored = testing::TrainMlp(*mirrored, c, *d);
  ASSERT_TRUE(under_mirrored.ok()) << under_mirrored.status();
  ASSERT_EQ(plain->size(), under_one->weights.size());
  for (size_t k = 0; k < plain->size(); ++k) {
    EXPECT_TRUE(testing::SameBits((*plain)[k], under_one->weights[k])) << under_one->names[k];
    EXPECT_TRUE(testing::SameBits((*plain)[k], under_mirrored->weights[k])) << under_one->names[k];
  }
  EXPECT_LT(under_one->losses.back(), under_one->losses.front());
}

}  // namespace
}  // namespace distribute
}  // namespace strata
