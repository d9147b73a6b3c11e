#include "runtime/executor.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/call_frame.h"
#include "kernels/cancellation.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "runtime/device.h"
#include "runtime/local_rendezvous.h"

namespace strata {
namespace {

// ---- Test ops and kernels ----

STRATA_REGISTER_OP("_TestAddOne").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestAdd").Input("x: float").Input("y: float").Output("z: float").SetShapeFn(
    UnchangedShape);
STRATA_REGISTER_OP("_TestFail").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestNoOutput").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestAsyncAddOne").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestSyncAsyncAddOne").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestWaitForCancel").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestExpensive").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestForwardInput")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(UnchangedShape);
STRATA_REGISTER_OP("_TestNoKernel").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape);

std::atomic<int> g_add_one_runs{0};

class AddOneOp : public OpKernel {
 public:
  explicit AddOneOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    g_add_one_runs.fetch_add(1, std::memory_order_relaxed);
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, ctx.input(0).shape(), &y));
    const float* x = ctx.input(0).IsInitialized() ? ctx.input(0).data<float>() : y->data<float>();
    for (int64_t i = 0; i < y->NumElements(); ++i) y->data<float>()[i] = x[i] + 1;
    return absl::OkStatus();
  }
};

// y = 1 where forward_input(0) took the input over (nobody else held it,
// as a collective kernel needs to run in place), else 0.
class ForwardInputOp : public OpKernel {
 public:
  explicit ForwardInputOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const void* data = ctx.input(0).raw_data();
    Tensor x = ctx.forward_input(0);
    if (x.raw_data() != data) return absl::InternalError("forward_input changed the buffer");
    const bool owned = x.RefCountIsOne();
    if (owned == ctx.input(0).IsInitialized()) {
      return absl::InternalError("the context keeps an input it gave away, or lost a shared one");
    }
    ctx.set_output(0, Tensor::Scalar<float>(owned ? 1.0f : 0.0f));
    return absl::OkStatus();
  }
};

class AddOp : public OpKernel {
 public:
  explicit AddOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* z;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &z));
    *z->data<float>() = *ctx.input(0).data<float>() + *ctx.input(1).data<float>();
    return absl::OkStatus();
  }
};

class FailOp : public OpKernel {
 public:
  explicit FailOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext&) override { return absl::InvalidArgumentError("boom"); }
};

class NoOutputOp : public OpKernel {
 public:
  explicit NoOutputOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
};

// Finishes later, on another thread.
class AsyncAddOneOp : public AsyncOpKernel {
 public:
  explicit AsyncAddOneOp(OpKernelConstruction& c) : AsyncOpKernel(c) {}
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    std::thread([&ctx, done = std::move(done)] {
      absl::SleepFor(absl::Milliseconds(5));
      Tensor* y;
      absl::Status s = ctx.allocate_output(0, ctx.input(0).shape(), &y);
      if (s.ok()) *y->data<float>() = *ctx.input(0).data<float>() + 1;
      done(s);
    }).detach();
  }
};

// An async kernel that calls `done` before returning (like a Recv whose value
// was already sent).
class SyncAsyncAddOneOp : public AsyncOpKernel {
 public:
  explicit SyncAsyncAddOneOp(OpKernelConstruction& c) : AsyncOpKernel(c) {}
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Tensor* y;
    absl::Status s = ctx.allocate_output(0, ctx.input(0).shape(), &y);
    if (s.ok()) *y->data<float>() = *ctx.input(0).data<float>() + 1;
    done(s);
  }
};

// Finishes only when the step is cancelled (like a Recv whose peer never sends).
class WaitForCancelOp : public AsyncOpKernel {
 public:
  explicit WaitForCancelOp(OpKernelConstruction& c) : AsyncOpKernel(c) {}
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    CancellationManager* cm = ctx.params().cancellation;
    auto shared_done = std::make_shared<DoneCallback>(std::move(done));
    CancellationToken t = cm->RegisterCallback([shared_done](const absl::Status& s) {
      (*shared_done)(absl::CancelledError(absl::StrCat("woken by cancellation: ", s.message())));
    });
    if (t == kInvalidCancellationToken) (*shared_done)(cm->status());
  }
};

std::atomic<int> g_expensive_off_caller{0};
thread_local bool t_is_caller = false;

class ExpensiveOp : public OpKernel {
 public:
  explicit ExpensiveOp(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsExpensive() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    if (!t_is_caller) g_expensive_off_caller.fetch_add(1);
    absl::SleepFor(absl::Milliseconds(2));
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &y));
    *y->data<float>() = *ctx.input(0).data<float>() * 2;
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("_TestAddOne").Device(kDeviceCpu), AddOneOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestAdd").Device(kDeviceCpu), AddOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestForwardInput").Device(kDeviceCpu), ForwardInputOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestFail").Device(kDeviceCpu), FailOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestNoOutput").Device(kDeviceCpu), NoOutputOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestAsyncAddOne").Device(kDeviceCpu), AsyncAddOneOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestSyncAsyncAddOne").Device(kDeviceCpu), SyncAsyncAddOneOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestWaitForCancel").Device(kDeviceCpu), WaitForCancelOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_TestExpensive").Device(kDeviceCpu), ExpensiveOp);

Output Unary(const Scope& s, const char* op, Output x, const std::string& name = "") {
  Node* n = NodeBuilder(name.empty() ? s : s.WithOpName(name), op).Input(x).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}
Output Add(const Scope& s, Output x, Output y) {
  Node* n = NodeBuilder(s, "_TestAdd").Input(x).Input(y).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions opts;
    opts.intra_op_threads_per_device = 1;
    devices_ = std::move(CreateCpuDeviceMgr(opts)).value();
    device_ = devices_->devices()[0];
    pool_ = std::make_unique<Eigen::ThreadPool>(2);
    t_is_caller = true;
  }

  std::unique_ptr<Executor> MakeExecutor(const Scope& root) {
    EXPECT_TRUE(root.ok()) << root.status();
    auto ex = Executor::Create(*root.graph(), device_);
    EXPECT_TRUE(ex.ok()) << ex.status();
    return ex.ok() ? *std::move(ex) : nullptr;
  }

  // Runs with one float scalar argument; returns the retvals.
  absl::StatusOr<std::vector<Tensor>> RunWith(Executor* ex, float x, int num_retvals,
                                              CancellationManager* cm = nullptr) {
    VectorCallFrame frame({Tensor::Scalar<float>(x)}, num_retvals);
    Executor::Args args;
    args.call_frame = &frame;
    args.cancellation = cm;
    args.inter_op_pool = pool_.get();
    absl::Status s = ex->Run(args);
    if (!s.ok()) return s;
    return frame.retvals();
  }

  std::unique_ptr<DeviceMgr> devices_;
  Device* device_ = nullptr;
  std::unique_ptr<Eigen::ThreadPool> pool_;
};

TEST_F(ExecutorTest, ChainForwardsOneBufferThroughout) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  Output y = x;
  for (int i = 0; i < 100; ++i) y = Unary(root, "_TestAddOne", y);
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->num_nodes(), 102);
  const int64_t allocs_before = device_->allocator()->GetStats().num_allocs;
  auto out = RunWith(ex.get(), 1.0f, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 101.0f);
  // The call frame holds the argument, so the first node allocates; every
  // later node is the sole holder of its input and reuses it in place.
  EXPECT_EQ(device_->allocator()->GetStats().num_allocs - allocs_before, 1);
  // A second step gives the same result (the step state is reused).
  out = RunWith(ex.get(), 5.0f, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*(*out)[0].data<float>(), 105.0f);
}

TEST_F(ExecutorTest, ForwardInputTakesOverOnlyAnInputNobodyElseHolds) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  Output a = Unary(root, "_TestAddOne", x);
  Output b = Unary(root, "_TestAddOne", x);
  // `a` has one consumer; `b` is also a result, so the call frame holds it.
  ops::Retval(root, Unary(root, "_TestForwardInput", a), 0);
  ops::Retval(root, Unary(root, "_TestForwardInput", b), 1);
  ops::Retval(root, b, 2);
  // The argument itself: the call frame holds it too.
  ops::Retval(root, Unary(root, "_TestForwardInput", x), 3);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  auto out = RunWith(ex.get(), 3.0f, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 1.0f);
  EXPECT_EQ(*(*out)[1].data<float>(), 0.0f);
  EXPECT_EQ(*(*out)[2].data<float>(), 4.0f);
  EXPECT_EQ(*(*out)[3].data<float>(), 0.0f);
}

TEST_F(ExecutorTest, Diamond) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  Output a = Unary(root, "_TestAddOne", x);
  Output b = Unary(root, "_TestAddOne", x);
  Output c = Add(root, a, b);
  ops::Retval(root, c, 0);
  ops::Retval(root, a, 1);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  auto out = RunWith(ex.get(), 3.0f, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 8.0f);
  EXPECT_EQ(*(*out)[1].data<float>(), 4.0f);
}

TEST_F(ExecutorTest, ControlEdgesOrderNodes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  Output first = Unary(root, "_TestAsyncAddOne", x);  // finishes later, elsewhere
  Node* after = ops::NoOp(root.WithControlDependencies({first.node()}));
  Output y = Unary(root.WithControlDependencies({after}), "_TestAddOne", x);
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  auto out = RunWith(ex.get(), 1.0f, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 2.0f);
}

TEST_F(ExecutorTest, ErrorInTheMiddleNamesTheNodeAndStopsTheStep) {
  Scope root = Scope::NewRootScope();
  Output y = ops::Arg(root, DT_FLOAT, 0);
  for (int i = 0; i < 5; ++i) y = Unary(root, "_TestAddOne", y);
  y = Unary(root, "_TestFail", y, "broken");
  for (int i = 0; i < 5; ++i) y = Unary(root, "_TestAddOne", y);
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  g_add_one_runs = 0;
  auto out = RunWith(ex.get(), 0.0f, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "node 'broken' (op _TestFail): boom");
  EXPECT_EQ(g_add_one_runs.load(), 5);  // nothing after the failure ran
  // The executor stays usable after a failed step.
  out = RunWith(ex.get(), 0.0f, 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExecutorTest, UnsetOutputIsAnInternalErrorNamingTheNode) {
  Scope root = Scope::NewRootScope();
  Output y = Unary(root, "_TestNoOutput", ops::Arg(root, DT_FLOAT, 0), "lazy");
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  auto out = RunWith(ex.get(), 0.0f, 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(out.status().message().find("node 'lazy' (op _TestNoOutput)"), std::string::npos)
      << out.status();
}

TEST_F(ExecutorTest, AsyncKernelsContinueTheStep) {
  Scope root = Scope::NewRootScope();
  Output y = ops::Arg(root, DT_FLOAT, 0);
  for (int i = 0; i < 3; ++i) {
    y = Unary(root, "_TestAsyncAddOne", y);
    y = Unary(root, "_TestAddOne", y);
  }
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  auto out = RunWith(ex.get(), 10.0f, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 16.0f);
}

TEST_F(ExecutorTest, AsyncKernelsThatFinishAtOnceStayInTheLoop) {
  Scope root = Scope::NewRootScope();
  Output y = ops::Arg(root, DT_FLOAT, 0);
  // Deep enough to overflow the stack if each completion nested a loop.
  for (int i = 0; i < 20000; ++i) y = Unary(root, "_TestSyncAsyncAddOne", y);
  ops::Retval(root, y, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  // No pool: nothing could move a nested continuation off this thread.
  VectorCallFrame frame({Tensor::Scalar<float>(0)}, 1);
  Executor::Args args;
  args.call_frame = &frame;
  ASSERT_TRUE(ex->Run(args).ok());
  EXPECT_EQ(*frame.retvals()[0].data<float>(), 20000.0f);
}

TEST_F(ExecutorTest, CancellingFromOutsideWakesAsyncKernelsAndEndsTheStep) {
  Scope root = Scope::NewRootScope();
  Output w = Unary(root, "_TestWaitForCancel", ops::Arg(root, DT_FLOAT, 0), "waiter");
  ops::Retval(root, Unary(root, "_TestAddOne", w), 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  CancellationManager cm;
  VectorCallFrame frame({Tensor::Scalar<float>(1)}, 1);
  Executor::Args args;
  args.call_frame = &frame;
  args.cancellation = &cm;
  Notification done;
  absl::Status status;
  g_add_one_runs = 0;
  ex->RunAsync(args, [&](absl::Status s) {
    status = s;
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  cm.StartCancel(absl::CancelledError("user pressed ^C"));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_NE(status.message().find("user pressed ^C"), std::string::npos) << status;
  EXPECT_EQ(g_add_one_runs.load(), 0);
}

TEST_F(ExecutorTest, AlreadyCancelledStepRunsNothing) {
  Scope root = Scope::NewRootScope();
  ops::Retval(root, Unary(root, "_TestAddOne", ops::Arg(root, DT_FLOAT, 0)), 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  CancellationManager cm;
  cm.StartCancel(absl::CancelledError("too late"));
  g_add_one_runs = 0;
  auto out = RunWith(ex.get(), 1.0f, 1, &cm);
  EXPECT_EQ(out.status().message(), "too late");
  EXPECT_EQ(g_add_one_runs.load(), 0);
}

TEST_F(ExecutorTest, ExpensiveNodesRunOnThePool) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  OutputList parts;
  for (int i = 0; i < 4; ++i) parts.push_back(Unary(root, "_TestExpensive", x));
  Output sum = Add(root, Add(root, parts[0], parts[1]), Add(root, parts[2], parts[3]));
  ops::Retval(root, sum, 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  g_expensive_off_caller = 0;
  auto out = RunWith(ex.get(), 1.5f, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].data<float>(), 12.0f);
  // The caller keeps one expensive node; the other three go to the pool.
  EXPECT_EQ(g_expensive_off_caller.load(), 3);
}

TEST_F(ExecutorTest, ConcurrentStepsOnOneExecutor) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Arg(root, DT_FLOAT, 0);
  Output a = x, b = x;
  for (int i = 0; i < 20; ++i) {
    a = Unary(root, "_TestAddOne", a);
    b = Unary(root, "_TestAddOne", b);
  }
  ops::Retval(root, Add(root, a, b), 0);
  auto ex = MakeExecutor(root);
  ASSERT_NE(ex, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const float x = static_cast<float>(t * 1000 + i);
        auto out = RunWith(ex.get(), x, 1);
        if (!out.ok() || *(*out)[0].data<float>() != 2 * x + 40) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ExecutorTest, SendAndRecvAcrossTwoExecutors) {
  DeviceOptions opts;
  opts.num_cpu_devices = 2;
  opts.intra_op_threads_per_device = 1;
  auto mgr = std::move(CreateCpuDeviceMgr(opts)).value();
  Device* d0 = mgr->devices()[0];
  Device* d1 = mgr->devices()[1];
  ops::SendRecvAttrs attrs;
  attrs.tensor_name = "x:0";
  attrs.send_device = d0->name();
  attrs.send_device_incarnation = static_cast<int64_t>(d0->incarnation());
  attrs.recv_device = d1->name();

  Scope s0 = Scope::NewRootScope();
  ops::Send(s0, Unary(s0, "_TestAddOne", ops::Arg(s0, DT_FLOAT, 0)), attrs);
  Scope s1 = Scope::NewRootScope();
  ops::Retval(s1, Unary(s1, "_TestAddOne", ops::Recv(s1, DT_FLOAT, attrs)), 0);
  ASSERT_TRUE(s0.ok() && s1.ok()) << s0.status() << s1.status();
  auto ex0 = std::move(Executor::Create(*s0.graph(), d0)).value();
  auto ex1 = std::move(Executor::Create(*s1.graph(), d1)).value();

  LocalRendezvous rendezvous;
  VectorCallFrame frame({Tensor::Scalar<float>(40)}, 1);
  Executor::Args args;
  args.call_frame = &frame;
  args.rendezvous = &rendezvous;
  Notification n1;
  absl::Status s1_status;
  // The receiver starts first and waits without holding a thread.
  ex1->RunAsync(args, [&](absl::Status s) {
    s1_status = s;
    n1.Notify();
  });
  EXPECT_FALSE(n1.HasBeenNotified());
  ASSERT_TRUE(ex0->Run(args).ok());
  n1.WaitForNotification();
  ASSERT_TRUE(s1_status.ok()) << s1_status;
  EXPECT_EQ(*frame.retvals()[0].data<float>(), 42.0f);
}

TEST_F(ExecutorTest, CreateErrorsNameTheNode) {
  Scope root = Scope::NewRootScope();
  Unary(root, "_TestNoKernel", ops::Arg(root, DT_FLOAT, 0), "orphan");
  ASSERT_TRUE(root.ok());
  auto ex = Executor::Create(*root.graph(), device_);
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ex.status().message().find("'orphan'"), std::string::npos) << ex.status();

  Graph g;
  tensorflow::NodeDef d;
  d.set_name("dangling");
  d.set_op("_TestAddOne");
  ASSERT_TRUE(g.AddNode(d).ok());
  ex = Executor::Create(g, device_);
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ex.status().message().find("'dangling'"), std::string::npos) << ex.status();
}

TEST_F(ExecutorTest, EmptyGraphFinishesAtOnce) {
  Graph g;
  auto ex = Executor::Create(g, device_);
  ASSERT_TRUE(ex.ok());
  EXPECT_TRUE((*ex)->Run(Executor::Args()).ok());
}

}  // namespace
}  // namespace strata
