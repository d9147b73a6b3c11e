// Sessions spanning tasks (SessionOptions::task_links): two tasks, each a
// session of its own in this process, exchange a step's tensors over an
// in-process transport and over TCP on loopback; a failure on one task
// reaches the other; a peer's tensor that disagrees with the receiver is
// refused before anything is allocated.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/local_rendezvous.h"
#include "runtime/remote_rendezvous.h"
#include "runtime/session.h"

namespace strata {
namespace {

const std::vector<std::string> kTasks = {"/job:worker/replica:0/task:0",
                                         "/job:worker/replica:0/task:1"};
std::string Dev(int task) { return kTasks[task] + "/device:CPU:0"; }

// Task 0 squares x, task 1 adds to it, task 0 multiplies the sum by x again:
// tensors cross both ways, one of them (a) to two consumers on task 1.
void BuildGraph(const Scope& root) {
  Scope t0 = root.WithDevice(Dev(0));
  Scope t1 = root.WithDevice(Dev(1));
  Output x = ops::Placeholder(t0.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1}));
  Output a = ops::Mul(t0.WithOpName("a"), x, x);
  Output b = ops::AddV2(t1.WithOpName("b"), a, ops::Const(t1, 1.0f));
  Output c = ops::AddV2(t1.WithOpName("c"), a, b);
  ops::Mul(t0.WithOpName("d"), c, x);
  Output n = ops::Placeholder(t1.WithOpName("n"), DT_INT32, PartialTensorShape({}));
  ops::AddV2(t0.WithOpName("m"), n, ops::Const(t0, 1));
}

struct Cluster {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<TaskLinks>> links;
  std::vector<std::unique_ptr<Session>> sessions;
};

// One session per task over `transports` (one per task, rank = task).
void MakeSessions(const Scope& root, Cluster* c, absl::Duration timeout = absl::Minutes(1)) {
  for (int task = 0; task < 2; ++task) {
    auto links = TaskLinks::Create(c->transports[task].get(), kTasks);
    ASSERT_TRUE(links.ok()) << links.status();
    c->links.push_back(std::make_unique<TaskLinks>(*std::move(links)));
    SessionOptions opts;
    opts.devices.job = "worker";
    opts.devices.task = task;
    opts.remote_devices = {Dev(1 - task)};
    opts.task_links = c->links.back().get();
    opts.inter_op_threads = 2;
    opts.cross_task_step_timeout = timeout;
    auto s = Session::Create(root, opts);
    ASSERT_TRUE(s.ok()) << s.status();
    c->sessions.push_back(*std::move(s));
  }
}

Cluster InProcessCluster(const Scope& root) {
  Cluster c;
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  for (int r = 0; r < 2; ++r) c.transports.push_back(mailbox->Connect(r));
  MakeSessions(root, &c);
  return c;
}

struct Result {
  absl::Status status;
  std::vector<Tensor> out;
};

// Every task runs the same step at once; `feeds[task]`.
std::vector<Result> RunEverywhere(
    Cluster& c, const std::vector<std::vector<std::pair<std::string, Tensor>>>& feeds,
    const std::vector<std::string>& fetches) {
  std::vector<Result> results(2);
  std::vector<std::thread> threads;
  for (int task = 0; task < 2; ++task) {
    threads.emplace_back([&, task] {
      results[task].status = c.sessions[task]->Run(feeds[task], fetches, {}, &results[task].out);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

Tensor Iota(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * (i % 97) - 3.0f;
  return Tensor::FromVector(v);
}

void ExpectSteps(Cluster& c, const std::vector<int>& sizes) {
  for (size_t step = 0; step < sizes.size(); ++step) {
    const int n = sizes[step];
    Tensor x = Iota(n, 0.25f + step);
    std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x},
                                                         {"n", Tensor::Scalar<int32_t>(n)}};
    std::vector<Result> r = RunEverywhere(c, {feeds, feeds}, {"d:0", "b:0", "m:0"});
    for (int task = 0; task < 2; ++task) {
      ASSERT_TRUE(r[task].status.ok()) << "task " << task << ": " << r[task].status;
      ASSERT_EQ(r[task].out.size(), 3u);
      ASSERT_EQ(r[task].out[0].NumElements(), n);
      for (int i = 0; i < n; ++i) {
        const float xi = x.data<float>()[i];
        const float a = xi * xi;
        EXPECT_FLOAT_EQ(r[task].out[0].data<float>()[i], (a + a + 1.0f) * xi) << "task " << task;
        EXPECT_FLOAT_EQ(r[task].out[1].data<float>()[i], a + 1.0f);
      }
      EXPECT_EQ(r[task].out[2].data<int32_t>()[0], n + 1);
    }
  }
}

TEST(MultiTaskSessionTest, TwoTasksExchangeTensorsEveryStep) {
  Scope root = Scope::NewRootScope();
  BuildGraph(root);
  Cluster c = InProcessCluster(root);
  ASSERT_EQ(c.sessions.size(), 2u);
  // Sizes change from step to step (x's shape is [?]); an empty tensor too.
  ExpectSteps(c, {3, 1000, 0, 17, 17});

  // Each task runs only its own partition.
  for (int task = 0; task < 2; ++task) {
    RunOptions ro;
    ro.output_partition_graphs = true;
    RunMetadata md;
    std::vector<Tensor> out;
    std::vector<std::thread> other;
    Tensor x = Iota(4, 1.0f);
    std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x},
                                                         {"n", Tensor::Scalar<int32_t>(1)}};
    Result r1;
    other.emplace_back([&] {
      r1.status = c.sessions[1 - task]->Run(feeds, {"d:0", "b:0", "m:0"}, {}, &r1.out);
    });
    absl::Status s = c.sessions[task]->Run(ro, feeds, {"d:0", "b:0", "m:0"}, {}, &out, &md);
    other[0].join();
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(r1.status.ok()) << r1.status;
    ASSERT_EQ(md.partition_devices, std::vector<std::string>{Dev(task)});
  }
}

TEST(MultiTaskSessionTest, OverTcpLargeTensorsGoStraightIntoTheirBuffers) {
  Scope root = Scope::NewRootScope();
  BuildGraph(root);
  InMemoryKeyValueStore kv;
  Cluster c;
  c.transports.resize(2);
  std::vector<absl::Status> connected(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TcpTransportOptions o;
      o.host = "127.0.0.1";
      o.key_prefix = "rendezvous_test";
      auto t = ConnectTcpTransport(r, 2, kv, o);
      connected[r] = t.status();
      if (t.ok()) c.transports[r] = *std::move(t);
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(connected[0].ok()) << connected[0];
  ASSERT_TRUE(connected[1].ok()) << connected[1];
  MakeSessions(root, &c);
  // 1M floats (4 MiB) is far above the transport's eager limit.
  ExpectSteps(c, {5, 1 << 20, 64, 1 << 20});
}

TEST(MultiTaskSessionTest, AFailureOnOneTaskEndsTheStepOnEveryTask) {
  Scope root = Scope::NewRootScope();
  Scope t0 = root.WithDevice(Dev(0));
  Scope t1 = root.WithDevice(Dev(1));
  Output x = ops::Placeholder(t0.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1}));
  Output shape = ops::Placeholder(t1.WithOpName("shape"), DT_INT32, PartialTensorShape({1}));
  Output r = ops::Reshape(t1.WithOpName("reshaped"), ops::Mul(t0.WithOpName("sq"), x, x), shape);
  ops::Identity(t0.WithOpName("back"), r);
  Cluster c = InProcessCluster(root);
  ASSERT_EQ(c.sessions.size(), 2u);
  Tensor x4 = Iota(4, 1.0f);
  // Only task 1 consumes "shape": its value there decides.
  std::vector<std::pair<std::string, Tensor>> good = {{"x", x4},
                                                      {"shape", Tensor::FromVector<int32_t>({4})}};
  std::vector<std::pair<std::string, Tensor>> bad = {{"x", x4},
                                                     {"shape", Tensor::FromVector<int32_t>({5})}};
  std::vector<Result> ok = RunEverywhere(c, {bad, good}, {"back:0"});
  ASSERT_TRUE(ok[0].status.ok()) << ok[0].status;
  ASSERT_TRUE(ok[1].status.ok()) << ok[1].status;

  std::vector<Result> failed = RunEverywhere(c, {good, bad}, {"back:0"});
  ASSERT_FALSE(failed[1].status.ok());
  EXPECT_TRUE(absl::StrContains(failed[1].status.message(), "reshaped")) << failed[1].status;
  ASSERT_FALSE(failed[0].status.ok());
  // Task 0 learns which task failed and why.
  EXPECT_TRUE(absl::StrContains(failed[0].status.message(), kTasks[1])) << failed[0].status;
  EXPECT_TRUE(absl::StrContains(failed[0].status.message(), "reshaped")) << failed[0].status;
  // The job's links are gone: later steps fail at once, naming the cause.
  std::vector<Result> later = RunEverywhere(c, {good, good}, {"back:0"});
  for (int task = 0; task < 2; ++task) {
    EXPECT_TRUE(absl::StrContains(later[task].status.message(), "reshaped")) << later[task].status;
  }
}

TEST(MultiTaskSessionTest, AStepTheOtherTasksNeverRunTimesOutOnEveryTask) {
  Scope root = Scope::NewRootScope();
  BuildGraph(root);
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  Cluster c;
  for (int r = 0; r < 2; ++r) c.transports.push_back(mailbox->Connect(r));
  MakeSessions(root, &c, absl::Milliseconds(300));
  ASSERT_EQ(c.sessions.size(), 2u);
  std::vector<Tensor> out;
  // Only task 0 runs the step: it waits for task 1's b, then gives up.
  absl::Status s = c.sessions[0]->Run({{"x", Iota(3, 1.0f)}, {"n", Tensor::Scalar<int32_t>(1)}},
                                      {"d:0"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "does every task run the same steps")) << s;
  // It names what it waited for: task 1's c.
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "Still waiting: receiving /job:worker/replica:0/task:1/"
                                "device:CPU:0;/job:worker/replica:0/task:0/device:CPU:0;"
                                "c:0 from /job:worker/replica:0/task:1"))
      << s;
  // Task 1's next step fails at once with the same cause.
  s = c.sessions[1]->Run({{"x", Iota(3, 1.0f)}, {"n", Tensor::Scalar<int32_t>(1)}}, {"d:0"}, {},
                         &out);
  EXPECT_TRUE(absl::StrContains(s.message(), "did not finish within 300ms")) << s;
}

TEST(MultiTaskSessionTest, AFeedOneTaskRefusesFailsTheStepOnEveryTask) {
  Scope root = Scope::NewRootScope();
  BuildGraph(root);
  Cluster c = InProcessCluster(root);
  ASSERT_EQ(c.sessions.size(), 2u);
  std::vector<std::pair<std::string, Tensor>> good = {{"x", Iota(3, 1.0f)},
                                                      {"n", Tensor::Scalar<int32_t>(1)}};
  std::vector<std::pair<std::string, Tensor>> bad = {{"x", Iota(3, 1.0f)},
                                                     {"n", Tensor::Scalar<float>(1)}};
  // Plan the step on both tasks first: a task's first run of a signature
  // plans it, and a plan's error ends only that task's call.
  ExpectSteps(c, {3});
  std::vector<Result> r = RunEverywhere(c, {good, bad}, {"d:0", "b:0", "m:0"});
  EXPECT_TRUE(absl::StrContains(r[1].status.message(), "feed 'n': expected a int32 tensor"))
      << r[1].status;
  // Task 0 fails at once (not after the step timeout), naming task 1's error.
  EXPECT_TRUE(absl::StrContains(r[0].status.message(), "task " + kTasks[1] + ": feed 'n'"))
      << r[0].status;
}

// One tensor sent by task 1's rendezvous, received by task 0's with `spec`.
absl::Status SendOneReceiveOne(const Tensor& sent, RemoteRecvSpec spec, uint64_t max_bytes,
                               Tensor* received) {
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  std::unique_ptr<Transport> t0 = mailbox->Connect(0), t1 = mailbox->Connect(1);
  TaskLinks l0 = *TaskLinks::Create(t0.get(), kTasks);
  TaskLinks l1 = *TaskLinks::Create(t1.get(), kTasks);
  const std::string key = Rendezvous::CreateKey(Dev(1), 7, Dev(0), "v:0");
  RemoteRecvSpecs specs = {{*RemoteRendezvous::WireName(key), spec}};
  LocalRendezvous local0, local1;
  RemoteRendezvous r0(&local0, &l0, &specs, 42, nullptr, max_bytes);
  RemoteRendezvous r1(&local1, &l1, &specs, 42, nullptr, max_bytes);
  absl::Status status = absl::UnknownError("not done");
  r0.RecvAsync(key, [&](const absl::Status& s, const Tensor& t) {
    status = s;
    *received = t;
  });
  absl::Status sent_status = r1.Send(key, sent);
  if (!sent_status.ok()) return sent_status;
  return status;
}

TEST(MultiTaskSessionTest, APeersTensorThatDisagreesIsRefusedBeforeAllocation) {
  TrackingCpuAllocator alloc("receiver");
  RemoteRecvSpec spec;
  spec.dtype = DT_FLOAT;
  spec.shape = PartialTensorShape({-1});
  spec.allocator = &alloc;
  Tensor got;
  // Accepted: the bytes land in a tensor of the receiver's allocator.
  ASSERT_TRUE(SendOneReceiveOne(Iota(8, 1.0f), spec, 1 << 20, &got).ok());
  EXPECT_EQ(got.allocator(), &alloc);
  EXPECT_FLOAT_EQ(got.data<float>()[7], Iota(8, 1.0f).data<float>()[7]);
  got = Tensor();
  const int64_t allocs = alloc.GetStats().num_allocs;

  absl::Status s = SendOneReceiveOne(Tensor::FromVector<int32_t>({1, 2}), spec, 1 << 20, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "dtype int32 is not the float")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), kTasks[1])) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "v:0")) << s;

  spec.shape = PartialTensorShape({3});
  s = SendOneReceiveOne(Iota(4, 1.0f), spec, 1 << 20, &got);
  EXPECT_TRUE(absl::StrContains(s.message(), "shape [4] is not the [3]")) << s;

  spec.shape = PartialTensorShape({-1});
  s = SendOneReceiveOne(Iota(1000, 1.0f), spec, /*max_bytes=*/100, &got);
  EXPECT_TRUE(absl::StrContains(s.message(), "4000 bytes exceed the bound of 100")) << s;
  EXPECT_EQ(alloc.GetStats().num_allocs, allocs);
}

TEST(MultiTaskSessionTest, BadClusterOptionsAreNamed) {
  Scope root = Scope::NewRootScope();
  BuildGraph(root);
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  std::unique_ptr<Transport> t0 = mailbox->Connect(0);
  EXPECT_FALSE(TaskLinks::Create(t0.get(), {kTasks[0]}).ok());
  EXPECT_FALSE(TaskLinks::Create(t0.get(), {kTasks[0], kTasks[0]}).ok());
  EXPECT_FALSE(TaskLinks::Create(t0.get(), {kTasks[0], Dev(1)}).ok());
  TaskLinks links = *TaskLinks::Create(t0.get(), kTasks);

  SessionOptions opts;
  opts.devices.job = "worker";
  opts.devices.task = 1;  // but the links say this process is task 0
  opts.task_links = &links;
  opts.remote_devices = {Dev(0)};
  absl::Status s = Session::Create(root, opts).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "this process is " + kTasks[0])) << s;

  opts.devices.task = 0;
  opts.remote_devices = {"/job:worker/replica:0/task:7/device:CPU:0"};
  s = Session::Create(root, opts).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "task:7/device:CPU:0' is on none of the tasks")) << s;
  opts.remote_devices = {"/job:worker/task:1"};
  s = Session::Create(root, opts).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "not a full name")) << s;
  opts.task_links = nullptr;
  s = Session::Create(root, opts).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "without task_links")) << s;
}

}  // namespace
}  // namespace strata
