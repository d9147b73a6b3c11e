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
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "gtest/gtest.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/remote_rendezvous.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "train/initializers.h"
#include "train/layers.h"
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
  // One step of `step` on batch 0 of 16 examples, traced into `tracer`.
  static absl::Status TracedStep(Session& session, const PipelineStep& step, StepTracer* tracer) {
    Data d = MakeData(16, 0);
    RunOptions ro;
    ro.tracer = tracer;
    return session.Run(ro, {{"x", d.x}, {"y", d.y}}, {}, {step.train_op->name()}, nullptr, nullptr);
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

// In a 2 x 2 mesh each weight crosses to replica 1 once per step, and its
// gradient back once (summed over replica 1's micro-batches on replica 1's
// devices), whatever the micro-batch count: with 4 micro-batches, replica 0's
// devices send replica 1 its 4 micro-batches of inputs and of labels and the
// 8 weights, nothing else (they sent each weight once per micro-batch, and
// each micro-batch's loss weight: 44), and receive the 8 gradient sums and
// nothing else (each micro-batch's gradients and 2 schedule signals: 34).
TEST(PipelineTest, AMeshReplicaGetsEachWeightOncePerStep) {
  constexpr int kMicroBatches = 4, kWeights = 8;
  Model m(16, kFeatures, {16, 16, 16}, kClasses, 0.3);
  PipelineOptions o = Options(2, {0, 2}, kMicroBatches, PipelineSchedule::kOneForwardOneBackward);
  o.replica_stage_devices = {{Device(2), Device(3)}};
  auto step = m.Pipeline(o);
  ASSERT_TRUE(step.ok()) << step.status();
  std::unique_ptr<Session> session = m.Start(4);
  ASSERT_NE(session, nullptr);
  StepTracer tracer;
  ASSERT_TRUE(Model::TracedStep(*session, *step, &tracer).ok());
  auto replica_of = [](const std::string& device) {
    return device == Device(2) || device == Device(3) ? 1 : 0;
  };
  int to_replica_1 = 0, from_replica_1 = 0;
  for (const TraceEvent& e : tracer.events()) {
    if (e.op != "_Send") continue;
    const bool to_1 =
        absl::StrContains(e.name, "_to_CPU_2") || absl::StrContains(e.name, "_to_CPU_3");
    if (replica_of(e.device) == 0 && to_1) ++to_replica_1;
    if (replica_of(e.device) == 1 && !to_1) ++from_replica_1;
  }
  EXPECT_EQ(to_replica_1, 2 * kMicroBatches + kWeights);
  EXPECT_EQ(from_replica_1, kWeights);
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
  // two from run to run); 1F1B's not at all but for that noise. (A fresh
  // clone's run measured 1F1B's M=16 peak exactly 2 units above M=4's, so
  // the bound allows 4: still a third of what 12 kept activations add.)
  EXPECT_GT(gpipe[16] - gpipe[4], 6 * 64 * 1024);
  EXPECT_LT(one_f_one_b[16] - one_f_one_b[4], 4 * 64 * 1024);
  EXPECT_LT(one_f_one_b[16], gpipe[16]);
}

// A traced step: each stage's items ran in its schedule's order, one after
// the other, and the trace shows them on the stage's track; in a mesh of 2
// stages x 2 replicas, each replica's stages on devices of their own.
// A backward item holds only what the weights' gradients need: the first
// layer's gradient with respect to the batch (the MatMul gradient's other
// output) is in no item, so the step never computes it.
TEST(PipelineTest, NoItemComputesTheGradientOfTheBatch) {
  Model m(16, kFeatures, {16, 16, 16}, kClasses, 0.1);
  auto step = m.Pipeline(Options(2, {0, 2}, 4, PipelineSchedule::kOneForwardOneBackward));
  ASSERT_TRUE(step.ok()) << step.status();
  int weight_gradients = 0;
  for (const auto& [name, item] : step->item_of_node) {
    EXPECT_FALSE(absl::EndsWith(name, "gradients/dense/MatMul_grad/MatMul") ||
                 absl::EndsWith(name, "/dense/MatMul_grad/MatMul"))
        << name << " (" << item << ")";
    weight_gradients += absl::EndsWith(name, "dense/MatMul_grad/MatMul_1");
  }
  EXPECT_EQ(weight_gradients, 4);  // the first layer's kernel, once per micro-batch
}

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
      StepTracer tracer;
      ASSERT_TRUE(Model::TracedStep(*session, *step, &tracer).ok());
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

// A model written as code rather than a Sequential: two inputs (x
// [batch, 12] and z [batch, 4]), residual blocks whose skip tensors and z
// cross the stage boundaries beside the main one:
//   block 0: h = d0(x)                                -> {h, h, z}
//   block 1, 2: h' = d1(h) + skip (d2)                -> {h', h, z}
//   block 3: logits = d3(h) + e3(skip) + f3(z)        -> {logits}
// Stage s runs blocks [starts[s], starts[s + 1]).
struct ResidualNet {
  static constexpr int kExtra = 4;
  absl::StatusOr<OutputList> Block(int b, const Scope& s, const OutputList& in) {
    if (b == 0) {
      STRATA_ASSIGN_OR_RETURN(Output h, d0.Apply(s, in[0]));
      return OutputList{h, h, in[1]};
    }
    if (b < 3) {
      STRATA_ASSIGN_OR_RETURN(Output h, (b == 1 ? d1 : d2).Apply(s, in[0]));
      return OutputList{ops::Add(s, h, in[1]), in[0], in[2]};
    }
    STRATA_ASSIGN_OR_RETURN(Output a, d3.Apply(s, in[0]));
    STRATA_ASSIGN_OR_RETURN(Output b2, e3.Apply(s, in[1]));
    STRATA_ASSIGN_OR_RETURN(Output c, f3.Apply(s, in[2]));
    return OutputList{ops::Add(s, ops::Add(s, a, b2), c)};
  }
  std::vector<PipelineStageFn> Stages(const std::vector<int>& starts) {
    std::vector<PipelineStageFn> fns;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : 4;
      fns.push_back([this, begin, end](const Scope& s, const OutputList& in) {
        absl::StatusOr<OutputList> h = in;
        for (int b = begin; b < end && h.ok(); ++b) h = Block(b, s, *h);
        return h;
      });
    }
    return fns;
  }
  train::Dense d0{"d0", 16, train::Activation::kRelu, 11};
  train::Dense d1{"d1", 16, train::Activation::kRelu, 12};
  train::Dense d2{"d2", 16, train::Activation::kRelu, 13};
  train::Dense d3{"d3", kClasses, train::Activation::kNone, 14};
  train::Dense e3{"e3", kClasses, train::Activation::kNone, 15};
  train::Dense f3{"f3", kClasses, train::Activation::kNone, 16};
};

// Trains ResidualNet 100 steps (batch 16, SGD) split at `starts` (empty: no
// pipeline, Minimize on one device) and returns every weight, by name.
std::vector<std::pair<std::string, Tensor>> TrainResidual(std::vector<int> starts,
                                                          int micro_batches,
                                                          PipelineSchedule schedule,
                                                          int replicas = 1) {
  Model m(16, kFeatures, {16}, kClasses, 0.2);
  ResidualNet net;
  Output z = ops::Placeholder(m.root.WithOpName("z"), DT_FLOAT,
                              PartialTensorShape({16, ResidualNet::kExtra}));
  Node* train_op = nullptr;
  if (starts.empty()) {
    const Scope on = m.root.WithDevice(Device(0));
    auto logits = net.Stages({0})[0](on, {m.x, z});
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return {};
    auto op = train::Minimize(on, CrossEntropy(on, m.y, (*logits)[0]), &m.sgd);
    EXPECT_TRUE(op.ok()) << op.status();
    if (!op.ok()) return {};
    train_op = *op;
  } else {
    const int stages = static_cast<int>(starts.size());
    PipelineOptions o = Options(stages, {}, micro_batches, schedule);
    for (int r = 1; r < replicas; ++r) {
      o.replica_stage_devices.emplace_back();
      for (int s = 0; s < stages; ++s)
        o.replica_stage_devices.back().push_back(Device(r * stages + s));
    }
    auto step =
        BuildPipelineTrainStep(m.root, net.Stages(starts), {m.x, z}, m.y, CrossEntropy, &m.sgd, o);
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    train_op = step->train_op;
  }
  const std::vector<train::Variable*> weights = train::TrainableVariables(m.root);
  std::vector<std::string> reads;
  for (train::Variable* v : weights) reads.push_back(v->Read(m.root.WithDevice(Device(0))).name());
  std::unique_ptr<Session> session = m.Start(4);
  if (session == nullptr) return {};
  for (int i = 0; i < 100; ++i) {
    Data d = MakeData(16, i);
    Tensor zs(DT_FLOAT, TensorShape{16, ResidualNet::kExtra});
    for (int k = 0; k < zs.NumElements(); ++k) zs.data<float>()[k] = 0.3f * std::cos(0.37f * k + i);
    absl::Status s =
        session->Run({{"x", d.x}, {"y", d.y}, {"z", zs}}, {}, {train_op->name()}, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return {};
  }
  std::vector<Tensor> values;
  EXPECT_TRUE(session->Run({}, reads, {}, &values).ok());
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back({weights[i]->name(), values[i]});
  return out;
}

// Stage functions: several tensors cross each boundary (a skip connection,
// a second input passed along), and every split, schedule and mesh ends on
// the unsplit model's weights.
TEST(PipelineTest, StageFunctionsOfAModelWithSkipConnectionsEndOnOneDevicesWeights) {
  const auto want = TrainResidual({}, 1, PipelineSchedule::kGPipe);
  ASSERT_EQ(want.size(), 12u);
  struct Case {
    std::vector<int> starts;
    int micro_batches, replicas;
    PipelineSchedule schedule;
  };
  for (const Case& c :
       {Case{{0}, 1, 1, PipelineSchedule::kGPipe}, Case{{0, 2}, 4, 1, PipelineSchedule::kGPipe},
        Case{{0, 1, 2, 3}, 8, 1, PipelineSchedule::kOneForwardOneBackward},
        Case{{0, 3}, 2, 2, PipelineSchedule::kOneForwardOneBackward}}) {
    SCOPED_TRACE(absl::StrCat(c.starts.size(), " stages x ", c.replicas, " replicas, ",
                              c.micro_batches, " micro-batches"));
    EXPECT_LT(
        WorstDifference(TrainResidual(c.starts, c.micro_batches, c.schedule, c.replicas), want),
        1e-5);
  }
}

// Layers for stage functions that misuse them, made anew for each graph.
struct TwoStageNet {
  absl::StatusOr<OutputList> Stage0(const Scope& s, const OutputList& in) {
    STRATA_ASSIGN_OR_RETURN(Output h, a.Apply(s, in[0]));
    leaked = h;  // for a stage 1 that reads what it was not passed
    STRATA_ASSIGN_OR_RETURN(Output h2, b.Apply(s, h));
    return OutputList{h2};
  }
  absl::StatusOr<OutputList> Head(const Scope& s, Output h) {
    STRATA_ASSIGN_OR_RETURN(Output logits, c.Apply(s, h));
    return OutputList{logits};
  }
  train::Dense a{"a", 16, train::Activation::kRelu, 1}, b{"b", 16, train::Activation::kRelu, 2},
      c{"c", kClasses, train::Activation::kNone, 3};
  Output leaked;
  std::vector<std::unique_ptr<train::Dense>> fresh;
};

// A stage that reads what it was not passed fails naming the tensor and
// the stages; so do other misuses of stage functions.
TEST(PipelineTest, StageFunctionsThatCrossUndeclaredAreNamed) {
  // Stage 0 is TwoStageNet::Stage0; stage 1 is `last`, or only stage 0 if null.
  using StageFn = std::function<absl::StatusOr<OutputList>(Model&, TwoStageNet&, const Scope&,
                                                           const OutputList&)>;
  auto build = [](const StageFn& last, PipelineOptions o) {
    Model m(16, kFeatures, {16}, kClasses, 0.1);
    TwoStageNet net;
    std::vector<PipelineStageFn> fns = {
        [&](const Scope& s, const OutputList& in) { return net.Stage0(s, in); }};
    if (last)
      fns.push_back([&](const Scope& s, const OutputList& in) { return last(m, net, s, in); });
    return BuildPipelineTrainStep(m.root, fns, {m.x}, m.y, CrossEntropy, &m.sgd, o).status();
  };
  auto expect = [&](const StageFn& last, const std::string& says, PipelineOptions o) {
    absl::Status s = build(last, o);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), says)) << s;
  };
  const PipelineOptions two = Options(2, {}, 4, PipelineSchedule::kOneForwardOneBackward);
  const StageFn good = [](Model&, TwoStageNet& net, const Scope& s, const OutputList& in) {
    return net.Head(s, in[0]);
  };
  EXPECT_TRUE(build(good, two).ok());
  // Stage 1 uses a tensor of stage 0 that stage 0 kept to itself.
  expect([](Model&, TwoStageNet& net, const Scope& s,
            const OutputList& in) { return net.Head(s, ops::Add(s, in[0], net.leaked)); },
         "stage 1 reads 'a/Relu:0', made by stage 0, which was not passed to it", two);
  // Stage 1 reads the batch instead of its micro-batch.
  expect(
      [](Model& m, TwoStageNet& net, const Scope& s, const OutputList& in) {
        return net.Head(s, ops::Add(s, in[0], ops::Mean(s, m.x, ops::Const(s, {0, 1}))));
      },
      "stage 1 reads 'x:0', the whole batch", two);
  // Stage 1 applies layer b, whose weights stage 0 made.
  expect(
      [](Model&, TwoStageNet& net, const Scope& s,
         const OutputList& in) -> absl::StatusOr<OutputList> {
        STRATA_ASSIGN_OR_RETURN(Output h, net.b.Apply(s, in[0]));
        return net.Head(s, h);
      },
      "stage 1 reads weight 'b/", two);
  // A stage that makes a new layer on every call.
  expect(
      [](Model&, TwoStageNet& net, const Scope& s,
         const OutputList& in) -> absl::StatusOr<OutputList> {
        net.fresh.push_back(std::make_unique<train::Dense>(kClasses));
        STRATA_ASSIGN_OR_RETURN(Output logits, net.fresh.back()->Apply(s, in[0]));
        return OutputList{logits};
      },
      "again for micro-batch 1", two);
  expect(
      [](Model&, TwoStageNet& net, const Scope& s,
         const OutputList& in) -> absl::StatusOr<OutputList> {
        STRATA_ASSIGN_OR_RETURN(OutputList out, net.Head(s, in[0]));
        out.push_back(in[0]);
        return out;
      },
      "stage 1 returned 2 tensors; the last stage returns the model's output", two);
  expect(nullptr, "1 stage functions for 2 stage_devices", two);
  PipelineOptions with_starts = two;
  with_starts.stage_starts = {0, 1};
  expect(good, "stage_starts splits a Sequential", with_starts);
  PipelineOptions three = two;
  three.micro_batches = 3;
  expect(good, "micro_batches = 3 does not divide the batch of 16", three);
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
