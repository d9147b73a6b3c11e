// Recorded GPU partitions (whole-step CUDA graphs) without a GPU: a stand-in
// GPU device whose "stream" either runs work at once or, while recording,
// keeps it on a tape that Replay runs again, as a CUDA graph does. Its
// kernels enqueue closures over raw buffer addresses (not tensors), so a
// replay that used a buffer after it was given back would read freed or
// reused memory (asan sees it). Checks what the session records, when it
// replays, re-records and refuses, and that every step's values are right.
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/state_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/call_frame_kernels.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"
#include "runtime/recording_arena.h"
#include "runtime/session.h"

namespace strata {
namespace {

// The stand-in stream: gpu_context()->stream points at one.
struct FakeStream {
  bool recording = false;
  std::vector<std::function<void()>> tape;
  void Enqueue(std::function<void()> fn) {
    if (recording) {
      tape.push_back(std::move(fn));
    } else {
      fn();
    }
  }
};

FakeStream* StreamOf(const OpKernelContext& ctx) {
  return static_cast<FakeStream*>(ctx.device()->gpu_context()->stream);
}

class FakeGpu;

class RecordingDeviceView : public DeviceBase {
 public:
  RecordingDeviceView(Device* gpu, FakeStream* stream, Allocator* mem, Allocator* host)
      : gpu_(gpu), mem_(mem), host_(host) {
    ctx_.ordinal = 0;
    ctx_.stream = stream;
  }
  const std::string& name() const override { return gpu_->name(); }
  const std::string& device_type() const override { return gpu_->device_type(); }
  Allocator* allocator() const override { return mem_; }
  Allocator* host_allocator() const override { return host_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  ResourceMgr* resource_manager() const override { return gpu_->resource_manager(); }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }

 private:
  Device* const gpu_;
  GpuDeviceContext ctx_;
  Allocator* const mem_;
  Allocator* const host_;
};

class FakeRecording : public StepRecording {
 public:
  FakeRecording(Device* gpu, const absl::Status& end_error)
      : gpu_(gpu),
        end_error_(end_error),
        mem_(RecordingArena::New(gpu->allocator(), "fake recording", /*reuse=*/true)),
        host_(RecordingArena::New(gpu->host_allocator(), "fake recording (host)", /*reuse=*/false)),
        view_(gpu, &stream_, mem_, host_) {}
  ~FakeRecording() override {
    mem_->Release();
    host_->Release();
  }
  DeviceBase* device() override { return &view_; }
  absl::Status Begin() override {
    stream_.recording = true;
    return absl::OkStatus();
  }
  absl::Status End() override {
    stream_.recording = false;
    return end_error_;
  }
  absl::Status CopyIn(const Tensor& value, Tensor* buffer) override {
    std::memcpy(buffer->raw_data(), value.raw_data(), value.TotalBytes());
    return absl::OkStatus();
  }
  absl::Status Replay() override {
    for (auto& fn : stream_.tape) fn();
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> CopyOut(const Tensor& buffer) override {
    STRATA_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(gpu_->allocator(), buffer.dtype(), buffer.shape()));
    std::memcpy(out.raw_data(), buffer.raw_data(), buffer.TotalBytes());
    return out;
  }

 private:
  Device* const gpu_;
  const absl::Status end_error_;
  FakeStream stream_;
  RecordingArena* const mem_;
  RecordingArena* const host_;
  RecordingDeviceView view_;
};

class FakeGpu : public Device {
 public:
  FakeGpu()
      : Device(DeviceName::Full("localhost", 0, 0, kDeviceGpu, 0)),
        mem_(NewPersistentCpuAllocator("fake_gpu_mem")),
        host_(NewPersistentCpuAllocator("fake_gpu_pinned")) {
    ctx_.ordinal = 0;
    ctx_.stream = &stream_;
  }
  ~FakeGpu() override { DestroyResources(); }
  Allocator* allocator() const override { return mem_; }
  Allocator* host_allocator() const override { return host_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }
  void CopyDeviceTensorToHost(const Tensor& src, Tensor* dst, StatusCallback done) override {
    std::memcpy(dst->raw_data(), src.raw_data(), src.TotalBytes());
    done(absl::OkStatus());
  }
  void CopyHostTensorToDevice(const Tensor& src, Tensor* dst, StatusCallback done) override {
    std::memcpy(dst->raw_data(), src.raw_data(), src.TotalBytes());
    done(absl::OkStatus());
  }
  bool CanRecordSteps() const override { return true; }
  absl::StatusOr<std::unique_ptr<StepRecording>> NewStepRecording() override {
    return std::unique_ptr<StepRecording>(new FakeRecording(this, end_error));
  }

  absl::Status end_error;  // what every recording's End returns

 private:
  FakeStream stream_;  // runs everything at once
  GpuDeviceContext ctx_;
  Allocator* const mem_;
  Allocator* const host_;
};

// y = x * x, enqueued.
class FakeSquare : public OpKernel {
 public:
  explicit FakeSquare(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    const float* xp = x.data<float>();
    float* yp = y->data<float>();
    const int64_t n = x.NumElements();
    StreamOf(ctx)->Enqueue([xp, yp, n] {
      for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] * xp[i];
    });
    return absl::OkStatus();
  }
};

// y = -x, computed on the host at once: not capture-safe.
class FakeHostNeg : public OpKernel {
 public:
  explicit FakeHostNeg(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    for (int64_t i = 0; i < x.NumElements(); ++i) y->data<float>()[i] = -x.data<float>()[i];
    return absl::OkStatus();
  }
};

class FakeVarHandle : public OpKernel {
 public:
  explicit FakeVarHandle(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    uint64_t id = 0;
    STRATA_RETURN_IF_ERROR(ctx.device()
                               ->resource_manager()
                               ->LookupOrCreate<Var>(
                                   "", name(),
                                   [this]() -> absl::StatusOr<std::shared_ptr<Var>> {
                                     return std::make_shared<Var>(name(), DT_FLOAT, PartialTensorShape());
                                   },
                                   &id)
                               .status());
    STRATA_ASSIGN_OR_RETURN(Tensor h, MakeResourceHandle(ctx.device()->host_allocator(), id));
    ctx.set_output(0, h);
    return absl::OkStatus();
  }
};

class FakeReadVariable : public OpKernel {
 public:
  explicit FakeReadVariable(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, LookupResource<Var>(ctx, 0));
    ReaderMutexLock l(v->mu());
    STRATA_RETURN_IF_ERROR(v->CheckInitialized());
    ctx.set_output(0, v->value());
    return absl::OkStatus();
  }
};

// v = value (a new buffer each time): not capture-safe.
class FakeAssignVariable : public OpKernel {
 public:
  explicit FakeAssignVariable(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, LookupResource<Var>(ctx, 0));
    STRATA_ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(ctx.device()->allocator(), DT_FLOAT, ctx.input(1).shape()));
    std::memcpy(copy.raw_data(), ctx.input(1).raw_data(), copy.TotalBytes());
    MutexLock l(v->mu());
    v->set_value(copy);
    return absl::OkStatus();
  }
};

// v += delta in place, enqueued; refuses to copy a shared value (as the GPU
// kernels refuse while recording).
class FakeAssignAdd : public OpKernel {
 public:
  explicit FakeAssignAdd(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, LookupResource<Var>(ctx, 0));
    MutexLock l(v->mu());
    STRATA_RETURN_IF_ERROR(v->CheckInitialized());
    if (!v->mutable_value()->RefCountIsOne()) {
      return absl::FailedPreconditionError("variable still read when updated");
    }
    float* vp = v->mutable_value()->data<float>();
    const float* dp = ctx.input(1).data<float>();
    const int64_t n = ctx.input(1).NumElements();
    StreamOf(ctx)->Enqueue([vp, dp, n] {
      for (int64_t i = 0; i < n; ++i) vp[i] += dp[i];
    });
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Square").Device(kDeviceGpu).TypeConstraint<float>("T"), FakeSquare);
STRATA_REGISTER_KERNEL(KernelBuilder("Neg").Device(kDeviceGpu).TypeConstraint<float>("T"), FakeHostNeg);
STRATA_REGISTER_KERNEL(KernelBuilder("VarHandleOp").Device(kDeviceGpu), FakeVarHandle);
STRATA_REGISTER_KERNEL(KernelBuilder("ReadVariableOp").Device(kDeviceGpu), FakeReadVariable);
STRATA_REGISTER_KERNEL(KernelBuilder("AssignVariableOp").Device(kDeviceGpu), FakeAssignVariable);
STRATA_REGISTER_KERNEL(KernelBuilder("AssignAddVariableOp").Device(kDeviceGpu), FakeAssignAdd);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceArg").Device(kDeviceGpu), ArgOp);
STRATA_REGISTER_KERNEL(KernelBuilder("_DeviceRetval").Device(kDeviceGpu), RetvalOp);

struct Fixture {
  std::unique_ptr<DeviceMgr> mgr;
  FakeGpu* gpu;
};

Fixture MakeDevices() {
  std::vector<std::unique_ptr<Device>> devs;
  devs.push_back(*CpuDevice::Create(DeviceName::Full("localhost", 0, 0, kDeviceCpu, 0), 1));
  auto g = std::make_unique<FakeGpu>();
  FakeGpu* gpu = g.get();
  devs.push_back(std::move(g));
  return Fixture{*DeviceMgr::Create(std::move(devs)), gpu};
}

std::unique_ptr<Session> MakeSession(const Scope& root, const Fixture& f, bool record = true) {
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  opts.inter_op_threads = 2;
  opts.record_gpu_steps = record;
  auto s = Session::Create(root, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements()); }

float RunSquareSum(Session* s, std::vector<float> x) {
  std::vector<Tensor> out;
  absl::Status st = s->Run({{"x", Tensor::FromVector<float>(x)}}, {"z:0"}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return -1;
  float sum = 0;
  for (float v : Values(out[0])) sum += v;
  return sum;
}

// x (fed on the CPU) -> Square -> Square on the GPU -> z (fetched).
Scope SquareTwice() {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  ops::Square(root.WithOpName("z").WithDevice("/gpu:0"), y);
  return root;
}

TEST(RecordedPartitionTest, RecordsOnTheSecondStepAndReplaysWithEachStepsValues) {
  Fixture f = MakeDevices();
  Scope root = SquareTwice();
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int step = 1; step <= 6; ++step) {
    const float a = static_cast<float>(step);
    EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {a, 2 * a}), a * a * a * a + 16 * a * a * a * a) << "step " << step;
  }
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.eager, 1) << "the first step runs kernel by kernel";
  EXPECT_EQ(st.recorded, 1);
  EXPECT_EQ(st.replayed, 5) << "the second step is recorded and replayed, then every step replays";
  EXPECT_EQ(st.not_recorded, "");
}

TEST(RecordedPartitionTest, ANewShapeIsRecordedOfItsOwnAndNeverRunsAnothersRecording) {
  Fixture f = MakeDevices();
  Scope root = SquareTwice();
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2}), 17.0f);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2, 3}), 98.0f);
  EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {2, 2}), 32.0f);
  EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {3}), 81.0f);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 2) << "[2] and [3]; [1] was seen once";
  EXPECT_EQ(st.replayed, 5);
  EXPECT_EQ(st.eager, 3);
}

TEST(RecordedPartitionTest, OffByOptionRunsKernelByKernel) {
  Fixture f = MakeDevices();
  Scope root = SquareTwice();
  auto s = MakeSession(root, f, /*record=*/false);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2}), 17.0f);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded + st.replayed + st.eager, 0);
}

TEST(RecordedPartitionTest, AKernelThatIsNotCaptureSafeKeepsThePartitionUnrecorded) {
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Neg(root.WithOpName("neg").WithDevice("/gpu:0"), x);
  ops::Square(root.WithOpName("z").WithDevice("/gpu:0"), y);
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2}), 5.0f);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 0);
  EXPECT_NE(st.not_recorded.find("node 'neg' (op Neg) cannot be recorded"), std::string::npos)
      << st.not_recorded;
}

TEST(RecordedPartitionTest, ValuesThatLeaveAndComeBackWithinTheStepKeepItUnrecorded) {
  // GPU -> CPU -> GPU in one step: the partition could not receive all its
  // inputs before it runs (recording it so would deadlock).
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  Output n = ops::Neg(root.WithOpName("n").WithDevice("/cpu:0"), y);
  ops::Square(root.WithOpName("z").WithDevice("/gpu:0"), n);
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2}), 17.0f);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 0);
  EXPECT_NE(st.not_recorded.find("come back"), std::string::npos) << st.not_recorded;
}

TEST(RecordedPartitionTest, AFailedRecordingIsNamedAndTheStepRunsKernelByKernel) {
  Fixture f = MakeDevices();
  f.gpu->end_error = absl::InternalError("cudaStreamEndCapture: operation not permitted when stream is capturing");
  Scope root = SquareTwice();
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {1, 2}), 17.0f);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 0);
  EXPECT_EQ(st.replayed, 0);
  EXPECT_EQ(st.eager, 4);
  EXPECT_NE(st.not_recorded.find("operation not permitted"), std::string::npos) << st.not_recorded;
}

// y = Reshape(Square(x), Shape(x)): the shape is int32 in host memory and
// read on the host, but it depends on x's shape only, which a recording fixes.
class FakeShape : public OpKernel {
 public:
  explicit FakeShape(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor* s;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{x.dims()}, &s));
    for (int d = 0; d < x.dims(); ++d) s->data<int32_t>()[d] = static_cast<int32_t>(x.dim_size(d));
    return absl::OkStatus();
  }
};

// Reads its int32 shape on the host (and forwards the buffer).
class FakeReshape : public OpKernel {
 public:
  explicit FakeReshape(OpKernelConstruction& c) : OpKernel(c) {}
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& shape = ctx.input(1);
    TensorShape out;
    for (int64_t i = 0; i < shape.NumElements(); ++i) STRATA_RETURN_IF_ERROR(out.AddDim(shape.data<int32_t>()[i]));
    STRATA_ASSIGN_OR_RETURN(Tensor y, ctx.input(0).Reshaped(out));
    ctx.set_output(0, y);
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Shape").Device(kDeviceGpu).TypeConstraint<float>("T"), FakeShape);
STRATA_REGISTER_KERNEL(KernelBuilder("Reshape").Device(kDeviceGpu).TypeConstraint<float>("T"), FakeReshape);

TEST(RecordedPartitionTest, HostShapesOfTheInputsDoNotKeepAStepUnrecorded) {
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Scope g = root.WithDevice("/gpu:0");
  Output y = ops::Square(g.WithOpName("y"), x);
  ops::Reshape(g.WithOpName("z"), y, ops::Shape(g.WithOpName("shape"), x));
  auto s = MakeSession(root, f);
  ASSERT_NE(s, nullptr);
  for (int i = 1; i <= 4; ++i) {
    const float a = static_cast<float>(i);
    EXPECT_FLOAT_EQ(RunSquareSum(s.get(), {a, a}), 2 * a * a);
  }
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 1) << st.not_recorded;
  EXPECT_EQ(st.replayed, 3);
}

// v on the GPU: each step fetches (v read)^2 and adds x to v.
struct VarModel {
  Scope root = Scope::NewRootScope();
  VarModel() {
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
    Scope g = root.WithDevice("/gpu:0");
    Output v = ops::VarHandleOp(g.WithOpName("v"), DT_FLOAT, PartialTensorShape({2}));
    Output init = ops::Placeholder(root.WithOpName("init"), DT_FLOAT);
    ops::AssignVariableOp(g.WithOpName("assign"), v, init);
    Output r = ops::ReadVariableOp(g.WithOpName("read"), v, DT_FLOAT);
    ops::Square(g.WithOpName("z"), r);
    ops::AssignAddVariableOp(g.WithOpName("update"), v, x);
  }
};

TEST(RecordedPartitionTest, VariablesUpdateInPlaceOnEveryReplayAfterTheStepsReads) {
  Fixture f = MakeDevices();
  VarModel m;
  auto s = MakeSession(m.root, f);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Run({{"init", Tensor::FromVector<float>({1, 1})}}, {}, {"assign"}, nullptr).ok());
  float v = 1;
  for (int step = 1; step <= 5; ++step) {
    std::vector<Tensor> out;
    absl::Status st =
        s->Run({{"x", Tensor::FromVector<float>({static_cast<float>(step), 0})}}, {"z:0"}, {"update"}, &out);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_FLOAT_EQ(out[0].data<float>()[0], v * v) << "step " << step << " reads v before its update";
    EXPECT_FLOAT_EQ(out[0].data<float>()[1], 1.0f);
    v += static_cast<float>(step);
  }
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 1) << st.not_recorded;
  EXPECT_EQ(st.replayed, 4);
}

TEST(RecordedPartitionTest, AVariableGivenAnotherBufferIsRecordedAgain) {
  Fixture f = MakeDevices();
  VarModel m;
  auto s = MakeSession(m.root, f);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Run({{"init", Tensor::FromVector<float>({1, 1})}}, {}, {"assign"}, nullptr).ok());
  auto step = [&](float x) {
    std::vector<Tensor> out;
    absl::Status st = s->Run({{"x", Tensor::FromVector<float>({x, x})}}, {"z:0"}, {"update"}, &out);
    EXPECT_TRUE(st.ok()) << st;
    return st.ok() ? out[0].data<float>()[0] : -1.0f;
  };
  EXPECT_FLOAT_EQ(step(1), 1);
  EXPECT_FLOAT_EQ(step(1), 4);
  EXPECT_FLOAT_EQ(step(1), 9);
  // A restore: the variable gets a new buffer (AssignVariableOp).
  ASSERT_TRUE(s->Run({{"init", Tensor::FromVector<float>({10, 10})}}, {}, {"assign"}, nullptr).ok());
  EXPECT_FLOAT_EQ(step(1), 100) << "not the old buffer's 16";
  EXPECT_FLOAT_EQ(step(1), 121);
  const RecordingStats st = s->recording_stats();
  EXPECT_EQ(st.recorded, 2) << st.not_recorded;
}

}  // namespace
}  // namespace strata
