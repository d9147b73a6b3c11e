// Pipeline model parallelism in one process (strategy/pipeline.h): the
// schedules' orders, the same weights as one device for every split and
// schedule, 1F1B's activation memory bounded by the stage count, bad options.
#include "strategy/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/core_ops.h"
#include "gtest/gtest.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/remote_rendezvous.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {
namespace {

std::string Order(PipelineSchedule schedule, int stage, int stages, int m) {
  std::vector<std::string> out;
  for (const auto& [backward, mb] : StageSchedule(schedule, stage, stages, m)) {
    out.push_back(absl::StrCat(backward ? "B" : "F", mb));
  }
  return absl::StrJoin(out, " ");
}

TEST(PipelineTest, SchedulesOrderEachStagesWork) {
  EXPECT_EQ(Order(PipelineSchedule::kGPipe, 0, 2, 3), "F0 F1 F2 B0 B1 B2");
  // 1F1B: stage s warms up with (stages - 1 - s) forwards.
  EXPECT_EQ(Order(PipelineSchedule::kOneForwardOneBackward, 0, 2, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(Order(PipelineSchedule::kOneForwardOneBackward, 1, 2, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(Order(PipelineSchedule::kOneForwardOneBackward, 0, 4, 2), "F0 F1 B0 B1");
  EXPECT_EQ(Order(PipelineSchedule::kOneForwardOneBackward, 1, 4, 8),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
}

constexpr int kFeatures = 12;
constexpr int kClasses = 5;

struct Data {
  Tensor x, y;
};

Data MakeData(int batch, int seed) {
  Data d{Tensor(DT_FLOAT, TensorShape{batch, kFeatures}), Tensor(DT_INT32, TensorShape{batch})};
  for (int i = 0; i < batch; ++i) {
    int label = (i * 7 + seed) % kClasses;
    d.y.data<int32_t>()[i] = label;
    for (int f = 0; f < kFeatures; ++f) {
      d.x.data<float>()[i * kFeatures + f] =
          0.1f * std::sin(0.7f * (i + 3 * seed) + 1.3f * f) + (f % kClasses == label ? 0.5f : 0.f);
    }
  }
  return d;
}

std::string Device(int i) { return absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", i); }

Output CrossEntropy(const Scope& s, Output labels, Output logits) {
  return train::SparseSoftmaxCrossEntropy(s, labels, logits);
}

// A graph with inputs "x" [batch, features] and labels "y", an MLP
// `hidden` + `classes` logits (seed 3 unless given), and plain SGD (an
// update off by a factor, a micro-batch's loss not weighted by 1/M, shows
// where Adam would normalize it away).
struct Model {
  Model(int64_t batch, int64_t features, const std::vector<int64_t>& hidden, int64_t classes,
        double learning_rate, int64_t seed = 3)
      : model(*train::MakeMlp(hidden, classes, seed)), sgd(learning_rate) {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({batch, features}));
    y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({batch}));
  }
  absl::StatusOr<PipelineStep> Pipeline(const PipelineOptions& o) {
    return BuildPipelineTrainStep(root, model.get(), x, y, CrossEntropy, &sgd, o);
  }
  // The session over `devices` CPU devices of one thread each, initialized.
  std::unique_ptr<Session> Start(int devices) {
    Node* init = train::GlobalVariablesInitializer(root);
    SessionOptions so;
    so.devices.num_cpu_devices = devices;
    so.devices.intra_op_threads_per_device = 1;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(root, so);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return nullptr;
    absl::Status s = (*session)->Run({}, {}, {init->name()}, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(session);
  }

  Scope root = Scope::NewRootScope();
  Output x, y;
  std::unique_ptr<train::Sequential> model;
  train::SGD sgd;
};

PipelineOptions Options(int stages, std::vector<int> starts, int micro_batches,
                        PipelineSchedule schedule) {
  PipelineOptions o;
  for (int s = 0; s < stages; ++s) o.stage_devices.push_back(Device(s));
  o.stage_starts = std::move(starts);
  o.micro_batches = micro_batches;
  o.schedule = schedule;
  return o;
}

// Trains an MLP 12-16-16-16-5 (four Dense layers) with SGD for `steps`
// steps of batch 16 and returns every weight, by name; stages = 0: no
// pipeline at all (Build and Minimize on one device). `replicas` > 1: a
// pipeline x data mesh, replica r's stage s on CPU device r * stages + s.
std::vector<std::pair<std::string, Tensor>> Train(int stages, int micro_batches,
                                                  PipelineSchedule schedule, int steps,
                                                  std::vector<int> starts = {}, int replicas = 1) {
  Model m(16, kFeatures, {16, 16, 16}, kClasses, 0.3);
  Node* train_op = nullptr;
  if (stages == 0) {
    const Scope on = m.root.WithDevice(Device(0));
    Output logits = *m.model->Build(on, m.x);
    train_op = *train::Minimize(on, CrossEntropy(m.root, m.y, logits), m.model->reads(), &m.sgd);
  } else {
    if (starts.empty()) {
      for (int s = 0; s < stages; ++s) starts.push_back(s * 4 / stages);
    }
    PipelineOptions o = Options(stages, starts, micro_batches, schedule);
    for (int r = 1; r < replicas; ++r) {
      o.replica_stage_devices.emplace_back();
      for (int s = 0; s < stages; ++s)
        o.replica_stage_devices.back().push_back(Device(r * stages + s));
    }
    auto step = m.Pipeline(o);
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    train_op = step->train_op;
  }
  std::vector<std::string> reads;
  for (train::Variable* v : m.model->variables()) {
    reads.push_back(v->Read(m.root.WithDevice(Device(0))).name());
  }
  std::unique_ptr<Session> session = m.Start(4);
  if (session == nullptr) return {};
  for (int i = 0; i < steps; ++i) {
    Data d = MakeData(16, i);
    absl::Status s = session->Run({{"x", d.x}, {"y", d.y}}, {}, {train_op->name()}, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return {};
  }
  std::vector<Tensor> values;
  EXPECT_TRUE(session->Run({}, reads, {}, &values).ok());
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < values.size(); ++i) {
    out.push_back({m.model->variables()[i]->name(), values[i]});
  }
  return out;
}

// The largest difference between two runs' weights, which must have the
// same names (as without a pipeline) and shapes.
double WorstDifference(const std::vector<std::pair<std::string, Tensor>>& got,
                       const std::vector<std::pair<std::string, Tensor>>& want) {
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return 1e30;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.shape(), want[i].second.shape());
    if (got[i].first != want[i].first || got[i].second.shape() != want[i].second.shape())
      return 1e30;
    for (int64_t k = 0; k < want[i].second.NumElements(); ++k) {
      worst = std::max<double>(
          worst, std::abs(got[i].second.data<float>()[k] - want[i].second.data<float>()[k]));
    }
  }
  return worst;
}

TEST(PipelineTest, EverySplitAndScheduleEndsOnOneDevicesWeights) {
  constexpr int kSteps = 200;
  const auto want = Train(0, 1, PipelineSchedule::kGPipe, kSteps);
  ASSERT_EQ(want.size(), 8u);
  struct Case {
    int stages, micro_batches;
    PipelineSchedule schedule;
    std::vector<int> starts;
  };
  const std::vector<Case> cases = {
      {1, 1, PipelineSchedule::kGPipe, {}},
      {2, 1, PipelineSchedule::kGPipe, {}},
      {2, 8, PipelineSchedule::kGPipe, {}},
      {2, 8, PipelineSchedule::kOneForwardOneBackward, {}},
      {2, 4, PipelineSchedule::kOneForwardOneBackward, {0, 3}},  // unequal stages
      {4, 1, PipelineSchedule::kOneForwardOneBackward, {}},
      {4, 8, PipelineSchedule::kGPipe, {}},
      {4, 8, PipelineSchedule::kOneForwardOneBackward, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.stages, " stages, ", c.micro_batches, " micro-batches, ",
                              c.schedule == PipelineSchedule::kGPipe ? "GPipe" : "1F1B"));
    EXPECT_LT(WorstDifference(Train(c.stages, c.micro_batches, c.schedule, kSteps, c.starts), want),
              1e-5);
  }
}

// A pipeline x data mesh: 2 stages x 2 replicas and 1 stage x 4 replicas
// (each replica a quarter or half of the batch, in order) end on one
// device's weights; the weights stay where replica 0's stages are.
TEST(PipelineTest, PipelinesReplicatedOverAMeshEndOnOneDevicesWeights) {
  constexpr int kSteps = 200;
  const auto want = Train(0, 1, PipelineSchedule::kGPipe, kSteps);
  ASSERT_EQ(want.size(), 8u);
  struct Case {
    int stages, replicas, micro_batches;
    PipelineSchedule schedule;
  };
  for (const Case& c :
       {Case{2, 2, 1, PipelineSchedule::kGPipe}, Case{2, 2, 4, PipelineSchedule::kGPipe},
        Case{2, 2, 4, PipelineSchedule::kOneForwardOneBackward},
        Case{1, 4, 2, PipelineSchedule::kOneForwardOneBackward}}) {
    SCOPED_TRACE(absl::StrCat(c.stages, " stages x ", c.replicas, " replicas, ", c.micro_batches,
                              " micro-batches, ",
                              c.schedule == PipelineSchedule::kGPipe ? "GPipe" : "1F1B"));
    EXPECT_LT(
        WorstDifference(Train(c.stages, c.micro_batches, c.schedule, kSteps, {}, c.replicas), want),
        1e-5);
  }
}

// The same training with 4 stages over 2 tasks (processes in a real job;
// here two sessions of this process joined by an in-process transport, as
// runtime/multi_task_session_test.cc also does over TCP): each task builds
// the same model and step, runs its own two stages, and receives every
// fetch.
std::vector<std::pair<std::string, Tensor>> TrainOverTwoTasks(int micro_batches,
                                                              PipelineSchedule schedule,
                                                              int steps) {
  const std::vector<std::string> tasks = {"/job:worker/replica:0/task:0",
                                          "/job:worker/replica:0/task:1"};
  auto dev = [&](int task, int i) { return absl::StrCat(tasks[task], "/device:CPU:", i); };
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<TaskLinks>> links;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::string> train_ops, inits;
  std::vector<std::vector<std::string>> reads(2);
  for (int task = 0; task < 2; ++task) {
    transports.push_back(mailbox->Connect(task));
    links.push_back(std::make_unique<TaskLinks>(*TaskLinks::Create(transports[task].get(), tasks)));
    models.push_back(std::make_unique<Model>(16, kFeatures, std::vector<int64_t>{16, 16, 16},
                                             kClasses, 0.3));
    Model& m = *models.back();
    PipelineOptions o;
    o.stage_devices = {dev(0, 0), dev(0, 1), dev(1, 0), dev(1, 1)};
    o.stage_starts = {0, 1, 2, 3};
    o.micro_batches = micro_batches;
    o.schedule = schedule;
    auto step = m.Pipeline(o);
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    train_ops.push_back(step->train_op->name());
    inits.push_back(train::GlobalVariablesInitializer(m.root)->name());
    for (train::Variable* v : m.model->variables()) {
      reads[task].push_back(v->Read(m.root.WithDevice(dev(0, 0))).name());
    }
    SessionOptions so;
    so.devices.job = "worker";
    so.devices.task = task;
    so.devices.num_cpu_devices = 2;
    so.devices.intra_op_threads_per_device = 1;
    so.remote_devices = {dev(1 - task, 0), dev(1 - task, 1)};
    so.task_links = links.back().get();
    auto session = Session::Create(m.root, so);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    sessions.push_back(*std::move(session));
  }
  std::vector<std::vector<Tensor>> values(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int task = 0; task < 2; ++task) {
    threads.emplace_back([&, task] {
      Session& s = *sessions[task];
      status[task] = s.Run({}, {}, {inits[task]}, nullptr);
      for (int i = 0; i < steps && status[task].ok(); ++i) {
        Data d = MakeData(16, i);
        status[task] = s.Run({{"x", d.x}, {"y", d.y}}, {}, {train_ops[task]}, nullptr);
      }
      if (status[task].ok()) status[task] = s.Run({}, reads[task], {}, &values[task]);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(status[0].ok()) << status[0];
  EXPECT_TRUE(status[1].ok()) << status[1];
  if (!status[0].ok() || !status[1].ok()) return {};
  // Both tasks read the same weights (stage 2 and 3's came from task 1).
  for (size_t i = 0; i < values[0].size(); ++i) {
    for (int64_t k = 0; k < values[0][i].NumElements(); ++k) {
      EXPECT_EQ(values[0][i].data<float>()[k], values[1][i].data<float>()[k]);
    }
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < values[0].size(); ++i) {
    out.push_back({models[0]->model->variables()[i]->name(), values[0][i]});
  }
  return out;
}

TEST(PipelineTest, StagesOnTwoTasksEndOnOneDevicesWeights) {
  constexpr int kSteps = 100;
  const auto want = Train(0, 1, PipelineSchedule::kGPipe, kSteps);
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::kOneForwardOneBackward}) {
    EXPECT_LT(WorstDifference(TrainOverTwoTasks(4, schedule, kSteps), want), 1e-5);
  }
}

// Stage 0's peak bytes (its device's allocator) over 2 steps of an MLP
// 8-512-512-512-512-4 in 2 stages, M micro-batches of 32 examples.
int64_t StageZeroPeakBytes(PipelineSchedule schedule, int micro_batches) {
  const int batch = 32 * micro_batches;
  Model m(batch, 8, {512, 512, 512}, 4, 0.01, /*seed=*/1);
  auto step = m.Pipeline(Options(2, {0, 2}, micro_batches, schedule));
  EXPECT_TRUE(step.ok()) << step.status();
  std::unique_ptr<Session> session = m.Start(2);
  Tensor xs(DT_FLOAT, TensorShape{batch, 8});
  Tensor ys(DT_INT32, TensorShape{batch});
  for (int i = 0; i < batch; ++i) {
    ys.data<int32_t>()[i] = i % 4;
    for (int f = 0; f < 8; ++f) xs.data<float>()[i * 8 + f] = 0.01f * ((i + f) % 13);
  }
  for (int i = 0; i < 2; ++i) {
    absl::Status s = session->Run({{"x", xs}, {"y", ys}}, {}, {step->train_op->name()}, nullptr);
    EXPECT_TRUE(s.ok()) << s;
  }
  return (*session->device_mgr().LookupDevice(Device(0)))
      ->allocator()
      ->GetStats()
      .peak_bytes_in_use;
}

// 1F1B holds at most (stages - stage) micro-batches' activations on a
// stage, whatever M; GPipe holds all M's until the backwards start.
TEST(PipelineTest, OneForwardOneBackwardBoundsActivationMemoryWhereGPipeGrows) {
  std::map<int, int64_t> gpipe, one_f_one_b;
  for (int m : {4, 8, 16}) {
    gpipe[m] = StageZeroPeakBytes(PipelineSchedule::kGPipe, m);
    one_f_one_b[m] = StageZeroPeakBytes(PipelineSchedule::kOneForwardOneBackward, m);
    std::printf("M=%2d: stage 0 peak %8lld bytes with GPipe, %8lld with 1F1B\n", m,
                static_cast<long long>(gpipe[m]), static_cast<long long>(one_f_one_b[m]));
  }
  // A micro-batch's activation kept on stage 0 for its backward: the first
  // layer's ReLU output, 32 x 512 floats (64 KiB; the second layer's output
  // goes to stage 1). GPipe's peak grows by about one per micro-batch
  // (measured: 10 to 11 for 12 more; the rest of the peak, transients
  // such as boundary gradients arriving from stage 1, varies by a unit or
  // two from run to run); 1F1B's not at all but for that noise.
  EXPECT_GT(gpipe[16] - gpipe[4], 6 * 64 * 1024);
  EXPECT_LT(one_f_one_b[16] - one_f_one_b[4], 2 * 64 * 1024);
  EXPECT_LT(one_f_one_b[16], gpipe[16]);
}

// A traced step: each stage's items ran in its schedule's order, one after
// the other, and the trace shows them on the stage's track; in a mesh of 2
// stages x 2 replicas, each replica's stages on devices of their own.
TEST(PipelineTest, EachStageRunsItsItemsInTheScheduleOrder) {
  struct Mesh {
    int stages, replicas;
    std::vector<int> starts;
  };
  for (const Mesh& mesh : {Mesh{3, 1, {0, 1, 2}}, Mesh{2, 2, {0, 2}}})
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::kOneForwardOneBackward}) {
      SCOPED_TRACE(absl::StrCat(mesh.stages, " stages x ", mesh.replicas, " replicas"));
      Model m(16, kFeatures, {64, 64, 64}, kClasses, 0.1);
      PipelineOptions o = Options(mesh.stages, mesh.starts, 4, schedule);
      for (int r = 1; r < mesh.replicas; ++r) {
        o.replica_stage_devices.emplace_back();
        for (int s = 0; s < mesh.stages; ++s)
          o.replica_stage_devices.back().push_back(Device(r * mesh.stages + s));
      }
      auto step = m.Pipeline(o);
      ASSERT_TRUE(step.ok()) << step.status();
      const int devices = mesh.stages * mesh.replicas;
      ASSERT_EQ(step->stage_devices.size(), static_cast<size_t>(devices));
      std::unique_ptr<Session> session = m.Start(devices);
      ASSERT_NE(session, nullptr);
      Data d = MakeData(16, 0);
      StepTracer tracer;
      RunOptions ro;
      ro.tracer = &tracer;
      ASSERT_TRUE(
          session->Run(ro, {{"x", d.x}, {"y", d.y}}, {}, {step->train_op->name()}, nullptr, nullptr)
              .ok());
      const size_t kernels = tracer.num_events();
      RecordPipelineItems(*step, &tracer);
      const std::vector<TraceEvent> events = tracer.events();
      for (int s = 0; s < devices; ++s) {
        EXPECT_EQ(step->stage_devices[s], Device(s));
        std::vector<std::pair<int64_t, const TraceEvent*>> items;
        for (size_t i = kernels; i < events.size(); ++i) {
          if (events[i].device == Device(s)) items.push_back({events[i].start_ns, &events[i]});
        }
        std::sort(items.begin(), items.end());
        std::vector<std::string> order;
        for (size_t k = 0; k < items.size(); ++k) {
          order.push_back(items[k].second->name);
          EXPECT_EQ(items[k].second->op, "PipelineItem");
          if (k > 0) {
            EXPECT_LE(items[k - 1].second->end_ns, items[k].second->start_ns)
                << "stage " << s << " item " << k;
          }
        }
        EXPECT_EQ(absl::StrJoin(order, " "), Order(schedule, s % mesh.stages, mesh.stages, 4))
            << "device " << s;
      }
      EXPECT_TRUE(absl::StrContains(tracer.ToChromeTraceJson(), "\"B3\""));
    }
}

TEST(PipelineTest, BadOptionsAreNamed) {
  auto build = [](PipelineOptions o, int64_t batch = 16) {
    return Model(batch, kFeatures, {16, 16, 16}, kClasses, 0.1).Pipeline(o).status();
  };
  PipelineOptions good;
  good.stage_devices = {Device(0), Device(1)};
  good.stage_starts = {0, 2};
  good.micro_batches = 4;
  EXPECT_TRUE(build(good).ok());
  auto expect = [&](PipelineOptions o, const std::string& says, int64_t batch = 16) {
    absl::Status s = build(o, batch);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), says)) << s;
  };
  PipelineOptions o = good;
  o.micro_batches = 3;
  expect(o, "micro_batches = 3 does not divide the batch of 16");
  o.micro_batches = 0;
  expect(o, "micro_batches must be >= 1");
  o = good;
  o.stage_starts = {0, 4};
  expect(o, "stage_starts[1] = 4");
  o.stage_starts = {1, 2};
  expect(o, "stage_starts[0] = 1");
  o.stage_starts = {0, 2, 3};
  expect(o, "3 stage_starts for 2 stage_devices");
  o = good;
  o.stage_devices = {Device(0), ""};
  expect(o, "stage 1 has no device");
  o.stage_devices.clear();
  expect(o, "no stage");
  o = good;
  o.replica_stage_devices = {{Device(2)}};
  expect(o, "replica 1 has 1 stage devices (replica_stage_devices[0]) for 2 stages");
  o.replica_stage_devices = {{Device(2), ""}};
  expect(o, "replica 1's stage 1 has no device");
  o.replica_stage_devices = {{Device(2), Device(3)}};
  expect(o, "micro_batches = 4 on each of 2 replicas does not divide the batch of 12", 12);
}

}  // namespace
}  // namespace distribute
}  // namespace strata
