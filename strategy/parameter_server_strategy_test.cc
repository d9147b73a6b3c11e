// ParameterServerStrategy: variables on ps tasks (worker services on
// loopback in this process), workers training against them.
#include "strategy/parameter_server_strategy.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/one_device_strategy.h"
#include "strategy/test_util.h"
#include "train/data/dataset.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/models.h"
#include "train/partitioned_variable.h"
#include "train/variable.h"

namespace strata {
namespace distribute {
namespace {

std::string PsTaskName(int i) { return absl::StrCat("/job:ps/replica:0/task:", i); }
std::string WorkerTask(int i) { return absl::StrCat("/job:worker/replica:0/task:", i); }

std::vector<std::unique_ptr<ParameterServerTask>> StartPsTasks(int n) {
  std::vector<std::unique_ptr<ParameterServerTask>> tasks;
  for (int i = 0; i < n; ++i) {
    ParameterServerTask::Options o;
    o.task = PsTaskName(i);
    o.address = "127.0.0.1:0";
    o.devices.intra_op_threads_per_device = 1;
    auto t = ParameterServerTask::Start(o);
    EXPECT_TRUE(t.ok()) << t.status();
    tasks.push_back(*std::move(t));
  }
  return tasks;
}

ParameterServerOptions Options(int worker,
                               const std::vector<std::unique_ptr<ParameterServerTask>>& ps) {
  ParameterServerOptions o;
  o.worker_task = WorkerTask(worker);
  for (size_t i = 0; i < ps.size(); ++i) {
    o.ps_tasks.push_back({PsTaskName(static_cast<int>(i)), ps[i]->address(), ps[i]->devices()});
  }
  return o;
}

TEST(ParameterServerStrategyTest, VariablesGoToThePsTasksRoundRobinAndSlotsStayWithThem) {
  auto ps = StartPsTasks(2);
  auto s = *ParameterServerStrategy::Create(Options(0, ps), "/cpu:0", testing::Machine(1));
  EXPECT_EQ(s->devices(), std::vector<std::string>{WorkerTask(0) + "/device:CPU:0"});
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  std::vector<train::Variable*> v;
  for (int i = 0; i < 3; ++i) {
    v.push_back(train::CreateVariable(root, absl::StrCat("v", i), TensorShape({2}), DT_FLOAT,
                                      [](const Scope& sc, const TensorShape& shape, DataType) {
                                        return ops::Const<float>(sc, {1, 2});
                                      }));
  }
  ASSERT_TRUE(root.status().ok()) << root.status();
  EXPECT_EQ(v[0]->device(), PsTaskName(0) + "/device:CPU:0");
  EXPECT_EQ(v[1]->device(), PsTaskName(1) + "/device:CPU:0");
  EXPECT_EQ(v[2]->device(), PsTaskName(0) + "/device:CPU:0");
  // Made in a scope on v1's device (as optimizer slots are): stays there.
  train::Variable* slot =
      train::CreateVariable(root.WithDevice(v[1]->device()), "v1/slot", TensorShape({2}), DT_FLOAT,
                            [](const Scope& sc, const TensorShape&, DataType) {
                              return ops::Const<float>(sc, {0, 0});
                            });
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->device(), v[1]->device());
}

TEST(ParameterServerStrategyTest, OneWorkerTrainsAsOneDeviceDoes) {
  auto data = testing::LoadDigits();
  ASSERT_TRUE(data.ok()) << data.status();
  testing::TrainConfig c;
  c.optimizer = "adam";
  c.learning_rate = 1e-2;
  c.steps = 40;
  auto ps = StartPsTasks(2);
  auto s = *ParameterServerStrategy::Create(Options(0, ps), "/cpu:0", testing::Machine(1));
  auto on_ps = testing::TrainMlp(*s, c, *data);
  ASSERT_TRUE(on_ps.ok()) << on_ps.status();
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto on_one = testing::TrainMlp(*one, c, *data);
  ASSERT_TRUE(on_one.ok()) << on_one.status();
  ASSERT_EQ(on_ps->weights.size(), on_one->weights.size());
  for (size_t k = 0; k < on_ps->weights.size(); ++k) {
    EXPECT_LT(testing::MaxRelativeDifference(on_ps->weights[k], on_one->weights[k]), 1e-5)
        << on_ps->names[k];
  }
  for (int i = 0; i < c.steps; ++i) EXPECT_NEAR(on_ps->losses[i], on_one->losses[i], 1e-5) << i;
  EXPECT_NEAR(on_ps->test_accuracy, on_one->test_accuracy, 1e-6);
  // Both ps tasks served every step (the layers' variables alternate).
  for (const auto& t : ps) EXPECT_GE(t->service()->steps_started(), c.steps) << t->address();
}

// The loss of `step` (an AdamStep) over `x`, `y` without training.
float LossOf(Session& session, const testing::AdamStep& step, const Tensor& x, const Tensor& y) {
  std::vector<Tensor> out;
  absl::Status s = session.Run({{step.xs[0].name(), x}, {step.ys[0].name(), y}},
                               {step.step.values[0][0].name()}, {}, &out);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? *out[0].data<float>() : -1;
}

TEST(ParameterServerStrategyTest, TwoWorkersTrainAsynchronouslyOnSharedVariables) {
  auto data = testing::LoadDigits();
  ASSERT_TRUE(data.ok()) << data.status();
  auto ps = StartPsTasks(2);
  const int64_t features = data->train_x.dim_size(1);
  std::vector<std::unique_ptr<ParameterServerStrategy>> strategies;
  std::vector<std::unique_ptr<testing::AdamStep>> steps;
  std::vector<std::unique_ptr<Session>> sessions;
  std::string init;
  for (int w = 0; w < 2; ++w) {
    strategies.push_back(
        *ParameterServerStrategy::Create(Options(w, ps), "/cpu:0", testing::Machine(1)));
    steps.push_back(testing::BuildAdamStep(*strategies[w], features, {32}, 10));
    ASSERT_TRUE(steps[w]->status.ok()) << steps[w]->status;
    init = train::GlobalVariablesInitializer(steps[w]->root)->name();
    auto session = Session::Create(steps[w]->root, strategies[w]->session_options());
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(*std::move(session));
  }
  // The chief's job: initialize once; then each worker trains on its own
  // half of the data, neither waiting for the other.
  ASSERT_TRUE(sessions[0]->Run({}, {}, {init}, nullptr).ok());
  const float before = LossOf(*sessions[1], *steps[1], data->train_x, data->train_y);
  const int iterations = 150;
  std::vector<absl::Status> failed(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      // Each worker's own pipeline: the data shuffled with its own seed.
      auto ds = data::FromTensors({data->train_x, data->train_y});
      if (ds.ok()) ds = data::Shuffle(*ds, 100 + w);
      if (ds.ok()) ds = data::Batch(*ds, 32, /*drop_remainder=*/true);
      if (ds.ok()) ds = data::Repeat(*ds);
      auto it = ds.ok() ? data::DatasetIterator::Create(*ds) : ds.status();
      if (!it.ok()) {
        failed[w] = it.status();
        return;
      }
      for (int i = 0; i < iterations && failed[w].ok(); ++i) {
        data::Example batch;
        bool end = false;
        failed[w] = (*it)->GetNext(&batch, &end);
        if (!failed[w].ok()) break;
        failed[w] = sessions[w]->Run(
            {{steps[w]->xs[0].name(), batch[0]}, {steps[w]->ys[0].name(), batch[1]}}, {},
            {steps[w]->step.op->name()}, nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(failed[0].ok()) << failed[0];
  ASSERT_TRUE(failed[1].ok()) << failed[1];
  // Both workers' updates landed on the one set of variables: either
  // worker sees the trained model.
  const float after0 = LossOf(*sessions[0], *steps[0], data->train_x, data->train_y);
  const float after1 = LossOf(*sessions[1], *steps[1], data->train_x, data->train_y);
  EXPECT_GT(before, 1.5f);
  EXPECT_LT(after0, 0.5f) << "before " << before;
  EXPECT_FLOAT_EQ(after0, after1);
  for (const auto& t : ps) EXPECT_GE(t->service()->steps_started(), 2 * iterations);
}

// An embedding table [rows, 4] (values i / 100) looked up by `ids`, the
// rows pulled toward 1 by SGD for `steps` steps under `strategy`: the
// table's value after, and the parts it was made of.
struct EmbeddingRun {
  std::vector<float> table;
  std::vector<std::string> part_devices;
};
absl::StatusOr<EmbeddingRun> TrainEmbedding(Strategy& strategy, int64_t rows,
                                            const std::vector<int64_t>& ids, int steps) {
  Scope root = Scope::NewRootScope();
  Tensor init(DT_FLOAT, TensorShape({rows, 4}));
  for (int64_t i = 0; i < init.NumElements(); ++i)
    init.data<float>()[i] = static_cast<float>(i) / 100;
  train::Variable* table = nullptr;
  {
    StrategyScope in_scope = strategy.Scope();
    table =
        train::CreateVariable(root, "table", init.shape(), DT_FLOAT, train::ConstantTensor(init));
  }
  STRATA_RETURN_IF_ERROR(root.status());
  DistributedOptimizer<train::SGD> sgd(0.5);
  Output x = ops::Const<int64_t>(root, ids, TensorShape({static_cast<int64_t>(ids.size()) / 2, 2}));
  STRATA_ASSIGN_OR_RETURN(
      RunResult step,
      strategy.Run(
          root,
          [&](ReplicaContext& ctx, const std::vector<Output>&) -> absl::StatusOr<ReplicaResult> {
            std::vector<train::VariableRead> reads;
            Output looked = train::EmbeddingLookup(ctx.scope(), table, x, &reads);
            Output diff = ops::Sub(ctx.scope(), looked, ops::Const(ctx.scope(), 1.0f));
            Output loss = ops::Sum(ctx.scope(), ops::Square(ctx.scope(), diff),
                                   ops::Const(ctx.scope(), {0, 1, 2}));
            STRATA_ASSIGN_OR_RETURN(Node * train_op,
                                    train::Minimize(ctx.scope(), loss, reads, &sgd));
            return ReplicaResult{{loss}, {train_op}};
          }));
  Output value = table->Read(root);
  Node* init_op = train::GlobalVariablesInitializer(root);
  STRATA_RETURN_IF_ERROR(root.status());
  STRATA_ASSIGN_OR_RETURN(auto session, Session::Create(root, strategy.session_options()));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init_op->name()}, nullptr));
  for (int i = 0; i < steps; ++i)
    STRATA_RETURN_IF_ERROR(session->Run({}, {}, {step.op->name()}, nullptr));
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR(session->Run({}, {value.name()}, {}, &out));
  EmbeddingRun r;
  r.table.assign(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
  for (int p = 0; p < table->num_partitions(); ++p)
    r.part_devices.push_back(table->partition(p)->device());
  return r;
}

TEST(ParameterServerStrategyTest, PartitionedEmbeddingTrainsOnThePsTasksAsAWholeTableDoes) {
  auto ps = StartPsTasks(2);
  ParameterServerOptions o = Options(0, ps);
  o.variable_partitioner = train::FixedShardsPartitioner(2);
  auto s = *ParameterServerStrategy::Create(o, "/cpu:0", testing::Machine(1));
  // Rows 0..4 on ps 0, 5..8 on ps 1; ids repeat and skip rows of each.
  const std::vector<int64_t> ids = {0, 7, 7, 2, 8, 0};
  auto on_ps = TrainEmbedding(*s, 9, ids, 3);
  ASSERT_TRUE(on_ps.ok()) << on_ps.status();
  EXPECT_EQ(on_ps->part_devices, (std::vector<std::string>{PsTaskName(0) + "/device:CPU:0",
                                                           PsTaskName(1) + "/device:CPU:0"}));
  auto one = *OneDeviceStrategy::Create("/cpu:0", testing::Machine(1));
  auto whole = TrainEmbedding(*one, 9, ids, 3);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(on_ps->table.size(), whole->table.size());
  for (size_t i = 0; i < whole->table.size(); ++i)
    EXPECT_NEAR(on_ps->table[i], whole->table[i], 1e-6) << i;
  // Rows no id names are untouched; named ones moved.
  for (int64_t row : {1, 3, 4, 5, 6}) {
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(on_ps->table[row * 4 + d], static_cast<float>(row * 4 + d) / 100);
  }
  EXPECT_NE(on_ps->table[7 * 4], 0.28f);
  for (const auto& t : ps) EXPECT_GE(t->service()->steps_started(), 3) << t->address();
}

TEST(ParameterServerStrategyTest, BadOptionsAreNamed) {
  ParameterServerOptions o;
  o.worker_task = WorkerTask(0);
  auto s = ParameterServerStrategy::Create(o);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "needs a ps task")) << s.status();
  o.ps_tasks = {{WorkerTask(0), "127.0.0.1:1", {WorkerTask(0) + "/device:CPU:0"}}};
  s = ParameterServerStrategy::Create(o);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "own task")) << s.status();
  o.worker_task = "/job:worker";
  s = ParameterServerStrategy::Create(o);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "ParameterServerOptions.worker_task"))
      << s.status();
  ParameterServerTask::Options t;
  t.task = "/job:ps/replica:0/task:0";
  t.address = "127.0.0.1:99999";
  auto task = ParameterServerTask::Start(t);
  EXPECT_FALSE(task.ok());
}

}  // namespace
}  // namespace distribute
}  // namespace strata
