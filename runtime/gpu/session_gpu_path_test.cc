// The session's CPU<->GPU path without a GPU: a stand-in GPU device (its own
// "device memory" allocator, a pinned-host stand-in, copies finishing on
// another thread) and GPU kernels registered for it in this test. Checks that
// feeds reach GPU kernels in device memory, fetches come back in host memory,
// int32 outputs of GPU kernels are host-allocated and not copied, and the
// session synchronizes each GPU once per step.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "runtime/session.h"
#include "runtime/trace.h"

namespace strata {
namespace {

class FakeGpu : public Device {
 public:
  FakeGpu()
      : Device(DeviceName::Full("localhost", 0, 0, kDeviceGpu, 0)),
        mem_(NewPersistentCpuAllocator("fake_gpu_mem")),
        host_(NewPersistentCpuAllocator("fake_gpu_pinned")) {
    ctx_.ordinal = 0;
  }
  ~FakeGpu() override {
    MutexLock l(&mu_);
    for (auto& t : threads_) t.join();
    DestroyResources();
  }
  Allocator* allocator() const override { return mem_; }
  Allocator* host_allocator() const override { return host_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }
  void CopyDeviceTensorToHost(const Tensor& src, Tensor* dst, StatusCallback done) override {
    Copy(src, dst, std::move(done));
  }
  void CopyHostTensorToDevice(const Tensor& src, Tensor* dst, StatusCallback done) override {
    Copy(src, dst, std::move(done));
  }
  absl::Status Sync() override {
    ++syncs;
    return sync_error;
  }

  std::atomic<int> copies{0};
  std::atomic<int> syncs{0};
  absl::Status sync_error;

 private:
  void Copy(const Tensor& src, Tensor* dst, StatusCallback done) {
    MutexLock l(&mu_);
    threads_.emplace_back([this, src, dst, done = std::move(done)] {
      std::memcpy(dst->raw_data(), src.raw_data(), src.TotalBytes());
      ++copies;
      done(absl::OkStatus());
    });
  }
  GpuDeviceContext ctx_;
  Allocator* const mem_;
  Allocator* const host_;
  Mutex mu_;
  std::vector<std::thread> threads_;
};

// "GPU" kernels for the stand-in: they insist on the memory rule.
class FakeGpuSquare : public OpKernel {
 public:
  explicit FakeGpuSquare(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.allocator() != ctx.device()->allocator()) {
      return absl::InternalError("input is not in device memory");
    }
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    if (y->allocator() != ctx.device()->allocator()) {
      return absl::InternalError("float output is not in device memory");
    }
    for (int64_t i = 0; i < x.NumElements(); ++i) y->data<float>()[i] = x.data<float>()[i] * x.data<float>()[i];
    return absl::OkStatus();
  }
};

class FakeGpuShape : public OpKernel {
 public:
  explicit FakeGpuShape(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor* s;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{x.dims()}, &s));
    if (s->allocator() != ctx.device()->host_allocator()) {
      return absl::InternalError("int32 output is not in host memory");
    }
    for (int d = 0; d < x.dims(); ++d) s->data<int32_t>()[d] = static_cast<int32_t>(x.dim_size(d));
    return absl::OkStatus();
  }
};

// Only the int32 scalars the partitioner sends as control signals.
class FakeGpuInt32Const : public OpKernel {
 public:
  explicit FakeGpuInt32Const(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{}, &out));
    if (out->allocator() != ctx.device()->host_allocator()) {
      return absl::InternalError("int32 output is not in host memory");
    }
    *out->data<int32_t>() = 0;
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Const").Device(kDeviceGpu).TypeConstraint<int32_t>("dtype"),
                       FakeGpuInt32Const);
STRATA_REGISTER_KERNEL(KernelBuilder("Square").Device(kDeviceGpu).TypeConstraint<float>("T"),
                       FakeGpuSquare);
STRATA_REGISTER_KERNEL(KernelBuilder("Shape").Device(kDeviceGpu).TypeConstraint<float>("T"),
                       FakeGpuShape);

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

TEST(SessionGpuPathTest, FeedsAndFetchesCrossToAndFromDeviceMemory) {
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  ops::Shape(root.WithOpName("s").WithDevice("/gpu:0"), y);
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  opts.inter_op_threads = 2;
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 1; step <= 3; ++step) {
    std::vector<Tensor> out;
    absl::Status st = (*session)->Run({{"x", Tensor::FromVector<float>({1, 2, 3})}},
                                      {"y:0", "s:0"}, {}, &out);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].allocator(), f.gpu->host_allocator()) << "fetched through pinned memory";
    EXPECT_EQ(out[0].data<float>()[2], 9.0f);
    EXPECT_EQ(out[1].data<int32_t>()[0], 3);
    EXPECT_EQ(f.gpu->copies, 2 * step) << "x in, y out; the int32 shape is not copied";
    EXPECT_EQ(f.gpu->syncs, step) << "one synchronization per step";
  }
}

TEST(SessionGpuPathTest, AGpuTargetSignalsTheHostWithoutACopy) {
  // A target on the GPU reaches the CPU partition's step end as a control
  // signal: an int32 scalar, host memory on a GPU, so it never waits for a
  // device-to-host copy (which would wait for every kernel before it).
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  opts.inter_op_threads = 2;
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 1; step <= 2; ++step) {
    std::vector<Tensor> out;
    absl::Status st = (*session)->Run({{"x", Tensor::FromVector<float>({1, 2})}}, {}, {"y"}, &out);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(f.gpu->copies, step) << "x in; nothing out";
    EXPECT_EQ(f.gpu->syncs, step);
  }
}

TEST(SessionGpuPathTest, ATracerThatWaitsForTheDeviceSyncsAfterEachKernel) {
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  ops::Square(root.WithOpName("z").WithDevice("/gpu:0"), y);
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  StepTracer tracer;
  tracer.set_wait_for_device(true);
  RunOptions ro;
  ro.tracer = &tracer;
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run(ro, {{"x", Tensor::FromVector<float>({2})}}, {"z:0"}, {}, &out, nullptr).ok());
  EXPECT_EQ(out[0].data<float>()[0], 16.0f);
  int gpu_sync_kernels = 0;
  for (const TraceEvent& e : tracer.events()) {
    if (e.device == f.gpu->name() && !e.async) ++gpu_sync_kernels;
  }
  EXPECT_GE(gpu_sync_kernels, 2) << "y and z at least";
  EXPECT_EQ(f.gpu->syncs, gpu_sync_kernels + 1) << "one per kernel, and the step's";
}

TEST(SessionGpuPathTest, AnAsynchronousDeviceErrorFailsTheStep) {
  Fixture f = MakeDevices();
  f.gpu->sync_error = absl::InternalError("GPU 0: cudaErrorIllegalAddress");
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Square(root.WithOpName("y").WithDevice("/gpu:0"), x);
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  absl::Status st = (*session)->Run({{"x", Tensor::FromVector<float>({1})}}, {"y:0"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("cudaErrorIllegalAddress"), std::string::npos) << st;
}

TEST(SessionGpuPathTest, CpuOnlyPlansNeverSynchronizeTheGpu) {
  Fixture f = MakeDevices();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Square(root.WithOpName("y").WithDevice("/cpu:0"), x);
  SessionOptions opts;
  opts.device_mgr = f.mgr.get();
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({{"x", Tensor::FromVector<float>({2})}}, {"y:0"}, {}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[0], 4.0f);
  EXPECT_EQ(f.gpu->syncs, 0);
  EXPECT_EQ(f.gpu->copies, 0);
}

}  // namespace
}  // namespace strata
