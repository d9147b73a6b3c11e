#include "runtime/session.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "graph/attr_value.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/cancellation.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "runtime/inline_pool.h"
#include "runtime/trace.h"

namespace strata {
namespace {

// Counts its runs, passes its input through; a side effect to target.
STRATA_REGISTER_OP("_SessTestCount").Input("x: float").Output("y: float").SetIsStateful().SetShapeFn(
    UnchangedShape);
STRATA_REGISTER_OP("_SessTestFail").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_SessTestWaitForCancel").Input("x: float").Output("y: float").SetShapeFn(
    UnchangedShape);
std::atomic<int> g_count_runs{0};

// Finishes only when the step is cancelled.
class WaitForCancelOp : public AsyncOpKernel {
 public:
  explicit WaitForCancelOp(OpKernelConstruction& c) : AsyncOpKernel(c) {}
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    CancellationManager* cm = ctx.params().cancellation;
    auto shared = std::make_shared<DoneCallback>(std::move(done));
    if (cm->RegisterCallback([shared](const absl::Status& s) { (*shared)(s); }) ==
        kInvalidCancellationToken) {
      (*shared)(cm->status());
    }
  }
};
STRATA_REGISTER_KERNEL(KernelBuilder("_SessTestWaitForCancel").Device(kDeviceCpu), WaitForCancelOp);

class CountOp : public OpKernel {
 public:
  explicit CountOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    g_count_runs.fetch_add(1);
    ctx.set_output(0, ctx.input(0));
    return absl::OkStatus();
  }
};
class FailOp : public OpKernel {
 public:
  explicit FailOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext&) override { return absl::FailedPreconditionError("kaput"); }
};
STRATA_REGISTER_KERNEL(KernelBuilder("_SessTestCount").Device(kDeviceCpu), CountOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_SessTestFail").Device(kDeviceCpu), FailOp);

Output Count(const Scope& s, Output x) {
  return Output(NodeBuilder(s, "_SessTestCount").Input(x).Finalize(), 0);
}

SessionOptions Options(int num_devices = 1) {
  SessionOptions o;
  o.devices.num_cpu_devices = num_devices;
  o.devices.intra_op_threads_per_device = 1;
  o.inter_op_threads = 2;
  return o;
}

float Scalar(const Tensor& t) { return *t.data<float>(); }

TEST(SessionTest, FeedsFetchesAndTargets) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({}));
  Output c = ops::Const(root.WithOpName("c"), 2.0f);
  Output y = ops::AddV2(root.WithOpName("y"), x, c);
  ops::Mul(root.WithOpName("z"), y, y);
  Output counted = Count(root.WithOpName("counted"), c);
  ops::NoOp(root.WithOpName("side_effect").WithControlDependencies({counted.node()}));
  auto session = Session::Create(root, Options());
  ASSERT_TRUE(session.ok()) << session.status();

  std::vector<Tensor> out;
  g_count_runs = 0;
  ASSERT_TRUE((*session)->Run({{"x", Tensor::Scalar<float>(1)}}, {"y", "z:0", "c"}, {}, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Scalar(out[0]), 3.0f);
  EXPECT_EQ(Scalar(out[1]), 9.0f);
  EXPECT_EQ(Scalar(out[2]), 2.0f);
  EXPECT_EQ(g_count_runs.load(), 0);  // not needed, pruned

  ASSERT_TRUE((*session)->Run({}, {}, {"side_effect"}, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(g_count_runs.load(), 1);
}

TEST(SessionTest, OutputsOutliveTheSession) {
  std::vector<Tensor> out;
  {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({}));
    ops::AddV2(root.WithOpName("y"), x, ops::Const(root, 2.0f));
    auto session = Session::Create(root, Options());
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->Run({{"x", Tensor::Scalar<float>(1)}}, {"y"}, {}, &out).ok());
  }
  // The session and its devices are gone; the output is still readable and
  // gives its buffer back cleanly (ASan checks the latter).
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Scalar(out[0]), 3.0f);
  out.clear();
}

TEST(SessionTest, PruningLeavesUnneededPlaceholdersAlone) {
  Scope root = Scope::NewRootScope();
  ops::Placeholder(root.WithOpName("unused"), DT_FLOAT);
  Output needed = ops::Placeholder(root.WithOpName("needed"), DT_FLOAT);
  ops::Identity(root.WithOpName("a"), ops::Const(root, 5.0f));
  ops::Identity(root.WithOpName("b"), needed);
  auto session = std::move(Session::Create(root, Options())).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"a"}, {}, &out).ok());
  EXPECT_EQ(Scalar(out[0]), 5.0f);

  absl::Status s = session->Run({}, {"b"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("You must feed a value for placeholder 'needed'"), std::string::npos)
      << s;
}

TEST(SessionTest, FeedingAnIntermediateTensorCutsTheGraph) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output broken = Output(NodeBuilder(root.WithOpName("broken"), "_SessTestFail").Input(x).Finalize(), 0);
  ops::AddV2(root.WithOpName("y"), broken, broken);
  auto session = std::move(Session::Create(root, Options())).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"broken:0", Tensor::Scalar<float>(4)}}, {"y", "broken"}, {}, &out).ok());
  EXPECT_EQ(Scalar(out[0]), 8.0f);
  EXPECT_EQ(Scalar(out[1]), 4.0f);  // a fetched feed is returned as fed
  // Not fed, the failing node runs and its error names it.
  absl::Status s = session->Run({{"x", Tensor::Scalar<float>(4)}}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "node 'broken' (op _SessTestFail): kaput");
}

TEST(SessionTest, TwoVirtualCpuDevicesWithSendRecv) {
  Scope root = Scope::NewRootScope();
  Scope d0 = root.WithDevice("/cpu:0");
  Scope d1 = root.WithDevice("/device:CPU:1");
  Output x = ops::Placeholder(d0.WithOpName("x"), DT_FLOAT, PartialTensorShape({3}));
  Output a = ops::Mul(d0.WithOpName("a"), x, x);                       // CPU:0
  Output b = ops::AddV2(d1.WithOpName("b"), a, ops::Const<float>(d1, {1, 1, 1}));  // CPU:1
  Output c = ops::AddV2(d1.WithOpName("c"), a, b);                     // a sent once to CPU:1
  Output d = ops::Mul(d0.WithOpName("d"), c, x);                       // back to CPU:0
  Output counted = Count(d1.WithOpName("counted"), b);
  ops::Identity(d0.WithOpName("e").WithControlDependencies({counted.node()}), d);
  auto session = Session::Create(root, Options(2));
  ASSERT_TRUE(session.ok()) << session.status();

  RunOptions ro;
  ro.output_partition_graphs = true;
  RunMetadata md;
  std::vector<Tensor> out;
  g_count_runs = 0;
  absl::Status s = (*session)->Run(ro, {{"x", Tensor::FromVector<float>({1, 2, 3})}}, {"e", "b"},
                                   {}, &out, &md);
  ASSERT_TRUE(s.ok()) << s;
  // a = x^2 = [1,4,9]; b = [2,5,10]; c = [3,9,19]; d = c*x = [3,18,57]
  EXPECT_EQ(std::vector<float>(out[0].data<float>(), out[0].data<float>() + 3),
            (std::vector<float>{3, 18, 57}));
  EXPECT_EQ(std::vector<float>(out[1].data<float>(), out[1].data<float>() + 3),
            (std::vector<float>{2, 5, 10}));
  EXPECT_EQ(g_count_runs.load(), 1);  // the control edge crossed devices too

  ASSERT_EQ(md.partition_graphs.size(), 2u);
  EXPECT_EQ(md.partition_devices[0], "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(md.partition_devices[1], "/job:localhost/replica:0/task:0/device:CPU:1");
  auto count_op = [](const tensorflow::GraphDef& g, const std::string& op) {
    int n = 0;
    for (const auto& node : g.node()) n += node.op() == op;
    return n;
  };
  // CPU:0 sends a (once, though b and c both use it) and receives c and the
  // control signal; CPU:1 receives a and sends c and the control signal (the
  // _Retval of b is colocated with b, so b is not sent).
  EXPECT_EQ(count_op(md.partition_graphs[0], "_Send"), 1);
  EXPECT_EQ(count_op(md.partition_graphs[0], "_Recv"), 2);
  EXPECT_EQ(count_op(md.partition_graphs[1], "_Recv"), 1);
  EXPECT_EQ(count_op(md.partition_graphs[1], "_Send"), 2);

  // Again with other values: the cached plan, a fresh rendezvous.
  ASSERT_TRUE((*session)->Run({{"x", Tensor::FromVector<float>({0, 1, 0})}}, {"e", "b"}, {}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[1], 3.0f);  // a=1, b=2, c=3, d=3
  EXPECT_EQ((*session)->num_plans_built(), 1);
}

// Switch and Merge (runtime/executor.h): only the branch taken runs; its
// side effects happen only then; deadness crosses partitions (data and
// control edges) and reaches the Merge on another device.
TEST(SessionTest, ConditionalsRunOnlyTheBranchTaken) {
  Scope root = Scope::NewRootScope();
  Scope d0 = root.WithDevice("/cpu:0");
  Scope d1 = root.WithDevice("/cpu:1");
  Output x = ops::Placeholder(d0.WithOpName("x"), DT_FLOAT, PartialTensorShape({}));
  Output p = ops::Placeholder(d0.WithOpName("p"), DT_BOOL, PartialTensorShape({}));
  ops::SwitchOutputs sw = ops::Switch(d0.WithOpName("sw"), x, p);
  // True branch on CPU:1 (counted: a side effect), false branch on CPU:0.
  Output t = ops::Mul(d1.WithOpName("t"), Count(d1.WithOpName("counted"), sw.output_true),
                      ops::Const(d1, 10.0f));
  Output f = ops::Neg(d0.WithOpName("f"), sw.output_false);
  // A node fed by the true branch only through a control edge, across devices.
  Output after = ops::Identity(d0.WithOpName("after").WithControlDependencies({t.node()}),
                               ops::Const(d0, 7.0f));
  ops::Merge(d0.WithOpName("m"), {f, t});
  ops::Merge(d1.WithOpName("m2"), {after, f});
  auto session = Session::Create(root, Options(2));
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  for (int step = 0; step < 3; ++step) {
    g_count_runs = 0;
    absl::Status s = (*session)->Run(
        {{"x", Tensor::Scalar<float>(3)}, {"p", Tensor::Scalar<bool>(true)}}, {"m", "m:1", "m2"},
        {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Scalar(out[0]), 30.0f);
    EXPECT_EQ(*out[1].data<int32_t>(), 1);
    EXPECT_EQ(Scalar(out[2]), 7.0f);  // `after` ran: its control input was live
    EXPECT_EQ(g_count_runs.load(), 1);

    g_count_runs = 0;
    s = (*session)->Run({{"x", Tensor::Scalar<float>(3)}, {"p", Tensor::Scalar<bool>(false)}},
                        {"m", "m:1", "m2"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Scalar(out[0]), -3.0f);
    EXPECT_EQ(*out[1].data<int32_t>(), 0);
    EXPECT_EQ(Scalar(out[2]), -3.0f);  // `after` was dead (control edge from CPU:1)
    EXPECT_EQ(g_count_runs.load(), 0);  // the branch not taken did not run
  }
  // A target on the branch not taken just does not run.
  g_count_runs = 0;
  ASSERT_TRUE((*session)->Run({{"x", Tensor::Scalar<float>(3)}, {"p", Tensor::Scalar<bool>(false)}},
                              {}, {"counted"}, &out)
                  .ok());
  EXPECT_EQ(g_count_runs.load(), 0);
  // A dead fetch is an error that says so.
  absl::Status dead = (*session)->Run(
      {{"x", Tensor::Scalar<float>(3)}, {"p", Tensor::Scalar<bool>(false)}}, {"t"}, {}, &out);
  EXPECT_EQ(dead.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(dead.message()).find("dead"), std::string::npos) << dead;
  // A predicate that is not a bool scalar names the Switch.
  Scope r2 = Scope::NewRootScope();
  Output v = ops::Placeholder(r2.WithOpName("v"), DT_FLOAT, PartialTensorShape({}));
  Output q = ops::Placeholder(r2.WithOpName("q"), DT_BOOL);
  ops::Switch(r2.WithOpName("s2"), v, q);
  auto s2 = std::move(Session::Create(r2, Options())).value();
  absl::Status bad = s2->Run({{"v", Tensor::Scalar<float>(1)},
                              {"q", Tensor::FromVector<bool>({true, false})}},
                             {"s2:1"}, {}, &out);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("'s2'"), std::string::npos) << bad;
}

TEST(SessionTest, UnspecifiedNodesFollowTheirInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root.WithOpName("x").WithDevice("/cpu:1"), 1.0f);
  ops::Identity(root.WithOpName("y"), x);
  auto session = std::move(Session::Create(root, Options(2))).value();
  RunOptions ro;
  ro.output_partition_graphs = true;
  RunMetadata md;
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run(ro, {}, {"y"}, {}, &out, &md).ok());
  ASSERT_EQ(md.partition_devices.size(), 1u);
  EXPECT_EQ(md.partition_devices[0], "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(Scalar(out[0]), 1.0f);
}

TEST(SessionTest, ErrorInOnePartitionCancelsTheOther) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x").WithDevice("/cpu:0"), DT_FLOAT);
  Output bad = Output(
      NodeBuilder(root.WithOpName("bad").WithDevice("/cpu:1"), "_SessTestFail").Input(x).Finalize(), 0);
  // CPU:0 waits for `bad` through a Recv that will never be sent.
  ops::AddV2(root.WithOpName("y").WithDevice("/cpu:0"), x, bad);
  auto session = std::move(Session::Create(root, Options(2))).value();
  std::vector<Tensor> out;
  for (int i = 0; i < 20; ++i) {
    absl::Status s = session->Run({{"x", Tensor::Scalar<float>(1)}}, {"y"}, {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "node 'bad' (op _SessTestFail): kaput");
  }
}

TEST(SessionTest, RunCanBeCancelledFromOutside) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  NodeBuilder(root.WithOpName("stuck"), "_SessTestWaitForCancel").Input(x).Finalize();
  auto session = std::move(Session::Create(root, Options())).value();
  CancellationManager cm;
  RunOptions ro;
  ro.cancellation = &cm;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(30));
    cm.StartCancel(absl::CancelledError("user gave up"));
  });
  std::vector<Tensor> out;
  absl::Status s = session->Run(ro, {{"x", Tensor::Scalar<float>(1)}}, {"stuck"}, {}, &out, nullptr);
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_NE(s.message().find("user gave up"), std::string::npos) << s;
  // Already cancelled: the step does not start.
  s = session->Run(ro, {{"x", Tensor::Scalar<float>(1)}}, {"x"}, {}, &out, nullptr);
  EXPECT_EQ(s.message(), "user gave up");
  // Other runs are unaffected.
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(1)}}, {"x"}, {}, &out).ok());
}

TEST(SessionTest, PlansAreCachedPerSignature) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Identity(root.WithOpName("y"), x);
  ops::Identity(root.WithOpName("z"), x);
  auto session = std::move(Session::Create(root, Options())).value();
  std::vector<Tensor> out;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(i)}}, {"y"}, {}, &out).ok());
    EXPECT_EQ(Scalar(out[0]), i);
  }
  EXPECT_EQ(session->num_plans_built(), 1);
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(1)}}, {"z"}, {}, &out).ok());
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(1)}}, {"y", "z"}, {}, &out).ok());
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(1)}}, {"z", "y"}, {}, &out).ok());
  EXPECT_EQ(session->num_plans_built(), 4);
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(1)}}, {"y"}, {}, &out).ok());
  EXPECT_EQ(session->num_plans_built(), 4);
}

TEST(SessionTest, ConcurrentRunsFromFourThreads) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x").WithDevice("/cpu:0"), DT_FLOAT);
  Output y = x;
  for (int i = 0; i < 10; ++i) {
    y = ops::AddV2(root.WithDevice(i % 2 == 0 ? "/cpu:0" : "/cpu:1"), y, ops::Const(root, 1.0f));
  }
  ops::Identity(root.WithOpName("y"), y);
  ops::Mul(root.WithOpName("sq"), x, x);
  auto session = std::move(Session::Create(root, Options(2))).value();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Tensor> out;
      for (int i = 0; i < 100; ++i) {
        const float v = static_cast<float>(t * 1000 + i);
        // Two signatures, so plans are built concurrently too.
        std::vector<std::string> fetches = (i % 2 == 0) ? std::vector<std::string>{"y"}
                                                        : std::vector<std::string>{"sq", "y"};
        absl::Status s = session->Run({{"x", Tensor::Scalar<float>(v)}}, fetches, {}, &out);
        if (!s.ok() || Scalar(out.back()) != v + 10) ++wrong;
        if (s.ok() && i % 2 == 1 && Scalar(out[0]) != v * v) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(session->num_plans_built(), 2);
}

TEST(SessionTest, NameAndFeedErrors) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 2}));
  ops::Identity(root.WithOpName("y"), x);
  auto session = std::move(Session::Create(root, Options())).value();
  std::vector<Tensor> out;
  Tensor good(DT_FLOAT, TensorShape{5, 2});
  auto expect_invalid = [&](absl::Status s, const std::string& needle) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  ASSERT_TRUE(session->Run({{"x", good}}, {"y"}, {}, &out).ok());
  expect_invalid(session->Run({{"x", good}}, {"nope:0"}, {}, &out), "'nope:0'");
  expect_invalid(session->Run({{"x", good}}, {"y:1"}, {}, &out), "'y:1'");
  expect_invalid(session->Run({{"x", good}}, {"y:z"}, {}, &out), "'y:z'");
  expect_invalid(session->Run({{"q", good}}, {"y"}, {}, &out), "feed 'q'");
  expect_invalid(session->Run({{"x", good}}, {}, {"ghost"}, &out), "target 'ghost'");
  expect_invalid(session->Run({{"x", good}, {"x:0", good}}, {"y"}, {}, &out), "twice");
  expect_invalid(session->Run({{"x", Tensor(DT_INT32, TensorShape{5, 2})}}, {"y"}, {}, &out),
                 "feed 'x': expected a float tensor, got int32");
  expect_invalid(session->Run({{"x", Tensor(DT_FLOAT, TensorShape{5, 3})}}, {"y"}, {}, &out),
                 "feed 'x': shape [5,3] is not compatible with the tensor's shape [?,2]");
}

TEST(SessionTest, DeviceRequestErrors) {
  {
    Scope root = Scope::NewRootScope();
    ops::Const(root.WithOpName("far").WithDevice("/cpu:7"), 1.0f);
    auto session = std::move(Session::Create(root, Options(2))).value();
    std::vector<Tensor> out;
    absl::Status s = session->Run({}, {"far"}, {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("'far'"), std::string::npos) << s;
    EXPECT_NE(s.message().find("/cpu:7"), std::string::npos) << s;
  }
  {
    Scope root = Scope::NewRootScope();
    ops::Const(root.WithOpName("garbled").WithDevice("cpu zero"), 1.0f);
    auto session = std::move(Session::Create(root, Options())).value();
    std::vector<Tensor> out;
    absl::Status s = session->Run({}, {"garbled"}, {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("'garbled'"), std::string::npos) << s;
  }
  {
    Scope root = Scope::NewRootScope();
    ops::Const(root.WithOpName("on_gpu").WithDevice("/gpu:0"), 1.0f);
    SessionOptions o = Options();
    o.allow_soft_placement = true;
    auto session = std::move(Session::Create(root, o)).value();
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, {"on_gpu"}, {}, &out).ok());
    EXPECT_EQ(Scalar(out[0]), 1.0f);
  }
}

TEST(SessionTest, CreateFromGraphDef) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Mul(root.WithOpName("y"), x, ops::Const(root, 3.0f));
  tensorflow::GraphDef def;
  ASSERT_TRUE(root.ToGraphDef(&def).ok());
  auto session = Session::Create(def, Options());
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({{"x:0", Tensor::Scalar<float>(2)}}, {"y:0"}, {}, &out).ok());
  EXPECT_EQ(Scalar(out[0]), 6.0f);

  def.mutable_node(0)->set_op("NoSuchOp");
  EXPECT_FALSE(Session::Create(def, Options()).ok());
}

TEST(SessionTest, OptimizationPassesRunOncePerPlan) {
  Scope root = Scope::NewRootScope();
  ops::Identity(root.WithOpName("y"), ops::Const(root, 1.0f));
  int calls = 0;
  int nodes_seen = 0;
  SessionOptions o = Options();
  o.optimization_passes.push_back([&](Graph* g) {
    ++calls;
    nodes_seen = g->num_nodes();
    return absl::OkStatus();
  });
  auto session = std::move(Session::Create(root, o)).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"y"}, {}, &out).ok());
  ASSERT_TRUE(session->Run({}, {"y"}, {}, &out).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(nodes_seen, 3);  // Const, y and the _Retval

  SessionOptions failing = Options();
  failing.optimization_passes.push_back(
      [](Graph*) { return absl::InternalError("pass exploded"); });
  auto s2 = std::move(Session::Create(root, failing)).value();
  EXPECT_EQ(s2->Run({}, {"y"}, {}, &out).message(), "pass exploded");
}

TEST(SessionTest, SharedDevicesAndPoolAndAnOwnedGraph) {
  DeviceOptions dopts;
  dopts.num_cpu_devices = 2;
  dopts.intra_op_threads_per_device = 1;
  auto devices = std::move(CreateCpuDeviceMgr(dopts)).value();
  Eigen::ThreadPool pool(2);
  SessionOptions o;
  o.device_mgr = devices.get();
  o.inter_op_pool = &pool;
  o.default_device = "/cpu:1";
  auto g = std::make_unique<Graph>();
  tensorflow::NodeDef c;
  c.set_name("c");
  c.set_op("Const");
  (*c.mutable_attr())["value"] = MakeAttr(Tensor::Scalar<float>(7));
  (*c.mutable_attr())["dtype"] = MakeAttr(DT_FLOAT);
  ASSERT_TRUE(g->AddNode(c).ok());
  auto session = Session::Create(std::move(g), o);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(&(*session)->device_mgr(), devices.get());
  RunOptions ro;
  ro.output_partition_graphs = true;
  RunMetadata md;
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run(ro, {}, {"c"}, {}, &out, &md).ok());
  EXPECT_EQ(Scalar(out[0]), 7.0f);
  ASSERT_EQ(md.partition_devices.size(), 1u);
  EXPECT_EQ(md.partition_devices[0], devices->devices()[1]->name());

  o.default_device = "/gpu:0";
  EXPECT_EQ(Session::Create(Scope::NewRootScope(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A value another partition waits for leaves as soon as it is made: with
// the inline pool (one op at a time), the _Send of `a` to CPU:1 runs before
// the chain of ops on CPU:0 that `a` also feeds (before, the chain, pushed
// on top of it, ran first; a pipeline's stage ran all its forwards before
// its first activation left for the next stage).
TEST(SessionTest, ASendRunsBeforeTheRestOfItsPartition) {
  Scope root = Scope::NewRootScope();
  const Scope d0 = root.WithDevice("/cpu:0"), d1 = root.WithDevice("/cpu:1");
  Output a = ops::Const(d0.WithOpName("a"), 1.0f);
  Output far = ops::Neg(d1.WithOpName("far"), a);
  Output chain = ops::AddV2(d0.WithOpName("c0"), a, a);
  for (int i = 1; i < 6; ++i) chain = ops::AddV2(d0.WithOpName(absl::StrCat("c", i)), chain, a);
  SessionOptions o = Options();
  o.devices.num_cpu_devices = 2;
  InlinePool pool;
  o.inter_op_pool = &pool;
  auto session = Session::Create(root, o);
  ASSERT_TRUE(session.ok()) << session.status();
  StepTracer tracer;
  RunOptions ro;
  ro.tracer = &tracer;
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run(ro, {}, {"far", "c5"}, {}, &out, nullptr).ok());
  EXPECT_EQ(Scalar(out[0]), -1.0f);
  EXPECT_EQ(Scalar(out[1]), 7.0f);
  int64_t send = -1, chain_start = -1;
  for (const TraceEvent& e : tracer.events()) {
    if (e.op == "_Send") send = e.start_ns;
    if (e.name == "c0") chain_start = e.start_ns;
  }
  ASSERT_GE(send, 0);
  ASSERT_GE(chain_start, 0);
  EXPECT_LT(send, chain_start);
}

TEST(SessionTest, ScopeErrorsAreReportedAtCreate) {
  Scope root = Scope::NewRootScope();
  ops::AddV2(root, ops::Const(root, 1.0f), ops::Const(root, 1));  // float + int32
  EXPECT_FALSE(Session::Create(root, Options()).ok());
}

}  // namespace
}  // namespace strata
