#include "runtime/local_rendezvous.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(LocalRendezvousTest, SendThenRecv) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send("k", Tensor::Scalar<float>(2.5f)).ok());
  bool got = false;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor& t) {
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(*t.data<float>(), 2.5f);
    got = true;
  });
  EXPECT_TRUE(got);
}

TEST(LocalRendezvousTest, RecvWaitsForSendOnAnotherThread) {
  LocalRendezvous r;
  Notification n;
  int32_t value = 0;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor& t) {
    EXPECT_TRUE(s.ok());
    value = *t.data<int32_t>();
    n.Notify();
  });
  EXPECT_FALSE(n.HasBeenNotified());
  std::thread sender([&] { EXPECT_TRUE(r.Send("k", Tensor::Scalar<int32_t>(7)).ok()); });
  n.WaitForNotification();
  sender.join();
  EXPECT_EQ(value, 7);
}

TEST(LocalRendezvousTest, KeysAreIndependentAndSentOnce) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send("a", Tensor::Scalar<float>(1)).ok());
  ASSERT_TRUE(r.Send("b", Tensor::Scalar<float>(2)).ok());
  absl::Status dup = r.Send("a", Tensor::Scalar<float>(3));
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("'a'"), std::string::npos);
  float b = 0;
  r.RecvAsync("b", [&](const absl::Status& s, const Tensor& t) { b = *t.data<float>(); });
  EXPECT_EQ(b, 2);
  absl::Status second;
  r.RecvAsync("b", [&](const absl::Status& s, const Tensor&) { second = s; });
  EXPECT_EQ(second.code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalRendezvousTest, AbortFailsPendingAndLaterOperations) {
  LocalRendezvous r;
  absl::Status pending;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor&) { pending = s; });
  r.StartAbort(absl::AbortedError("worker 3 died"));
  EXPECT_EQ(pending.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(r.Send("x", Tensor::Scalar<float>(1)).code(), absl::StatusCode::kAborted);
  absl::Status later;
  r.RecvAsync("y", [&](const absl::Status& s, const Tensor&) { later = s; });
  EXPECT_EQ(later.message(), "worker 3 died");
}

TEST(LocalRendezvousTest, KeyFormat) {
  EXPECT_EQ(Rendezvous::CreateKey("/job:a/replica:0/task:0/device:CPU:0", 0x1f,
                                  "/job:a/replica:0/task:0/device:CPU:1", "x:0"),
            "/job:a/replica:0/task:0/device:CPU:0;1f;/job:a/replica:0/task:0/device:CPU:1;x:0");
}


// A device with "memory of its own" (a separate host allocator) whose copies
// finish on a thread of their own, as a GPU's do; it can fail them or hold
// them until released.
class FakeGpu : public Device {
 public:
  explicit FakeGpu(int id)
      : Device(DeviceName::Full("localhost", 0, 0, kDeviceGpu, id)),
        mem_(NewPersistentCpuAllocator("fake_gpu_mem")),
        host_(NewPersistentCpuAllocator("fake_gpu_host")) {}
  ~FakeGpu() override {
    for (auto& t : threads_) t.join();
    DestroyResources();
  }
  Allocator* allocator() const override { return mem_; }
  Allocator* host_allocator() const override { return host_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  void CopyDeviceTensorToHost(const Tensor& src, Tensor* dst, StatusCallback done) override {
    Copy(src, dst, std::move(done));
  }
  void CopyHostTensorToDevice(const Tensor& src, Tensor* dst, StatusCallback done) override {
    Copy(src, dst, std::move(done));
  }

  absl::Status fail_with;        // set before a copy to fail it
  Notification* gate = nullptr;  // copies wait for it when set
  std::atomic<int> copies{0};

 private:
  void Copy(const Tensor& src, Tensor* dst, StatusCallback done) {
    MutexLock l(&mu_);
    threads_.emplace_back([this, src, dst, done = std::move(done)] {
      if (gate != nullptr) gate->WaitForNotification();
      if (fail_with.ok()) std::memcpy(dst->raw_data(), src.raw_data(), src.TotalBytes());
      ++copies;
      done(fail_with);
    });
  }
  Allocator* const mem_;
  Allocator* const host_;
  Mutex mu_;
  std::vector<std::thread> threads_;
};

struct TwoDevices {
  std::unique_ptr<DeviceMgr> mgr;
  Device* cpu;
  FakeGpu* gpu0;
  FakeGpu* gpu1;
};

TwoDevices MakeDevices() {
  std::vector<std::unique_ptr<Device>> devs;
  devs.push_back(*CpuDevice::Create(DeviceName::Full("localhost", 0, 0, kDeviceCpu, 0), 1));
  auto g0 = std::make_unique<FakeGpu>(0);
  auto g1 = std::make_unique<FakeGpu>(1);
  TwoDevices out{nullptr, devs[0].get(), g0.get(), g1.get()};
  devs.push_back(std::move(g0));
  devs.push_back(std::move(g1));
  out.mgr = *DeviceMgr::Create(std::move(devs));
  return out;
}

std::string Key(const Device* from, const Device* to) {
  return Rendezvous::CreateKey(from->name(), from->incarnation(), to->name(), "x:0");
}

absl::StatusOr<Tensor> SendAndReceive(LocalRendezvous& r, const std::string& key, const Tensor& v) {
  Notification n;
  absl::Status status;
  Tensor got;
  r.RecvAsync(key, [&](const absl::Status& s, const Tensor& t) {
    status = s;
    got = t;
    n.Notify();
  });
  absl::Status sent = r.Send(key, v);
  if (!sent.ok()) return sent;
  n.WaitForNotification();
  if (!status.ok()) return status;
  return got;
}

TEST(LocalRendezvousDevicesTest, FloatsAreCopiedIntoAndOutOfDeviceMemory) {
  TwoDevices d = MakeDevices();
  LocalRendezvous r(d.mgr.get(), nullptr);
  Tensor x = Tensor::FromVector<float>({1, 2, 3});
  auto on_gpu = SendAndReceive(r, Key(d.cpu, d.gpu0), x);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->allocator(), d.gpu0->allocator());
  EXPECT_FALSE(on_gpu->SharesBufferWith(x));
  EXPECT_EQ(on_gpu->data<float>()[2], 3.0f);
  auto back = SendAndReceive(r, Key(d.gpu0, d.cpu), *on_gpu);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->allocator(), d.gpu0->host_allocator()) << "device to host lands in host memory";
  EXPECT_EQ(back->data<float>()[1], 2.0f);
  EXPECT_EQ(d.gpu0->copies, 2);
}

TEST(LocalRendezvousDevicesTest, HostMemoryDtypesAndCpuToCpuAreNotCopied) {
  TwoDevices d = MakeDevices();
  LocalRendezvous r(d.mgr.get(), nullptr);
  Tensor shape = Tensor::FromVector<int32_t>({2, 3});
  auto got = SendAndReceive(r, Key(d.cpu, d.gpu0), shape);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->SharesBufferWith(shape)) << "int32 lives in host memory on a GPU";
  EXPECT_EQ(d.gpu0->copies, 0);
}

TEST(LocalRendezvousDevicesTest, GpuToGpuGoesThroughHostMemory) {
  TwoDevices d = MakeDevices();
  std::vector<std::thread> pool;
  Mutex pool_mu;
  LocalRendezvous r(d.mgr.get(), [&](std::function<void()> fn) {
    MutexLock l(&pool_mu);
    pool.emplace_back(std::move(fn));
  });
  Tensor x(d.gpu0->allocator(), DT_FLOAT, TensorShape{4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = i * 1.5f;
  auto got = SendAndReceive(r, Key(d.gpu0, d.gpu1), x);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->allocator(), d.gpu1->allocator());
  EXPECT_EQ(got->data<float>()[3], 4.5f);
  EXPECT_EQ(d.gpu0->copies, 1);
  EXPECT_EQ(d.gpu1->copies, 1);
  MutexLock l(&pool_mu);
  for (auto& t : pool) t.join();
}

TEST(LocalRendezvousDevicesTest, AFailedCopyFailsTheReceiverNamingBothDevices) {
  TwoDevices d = MakeDevices();
  d.gpu0->fail_with = absl::InternalError("DMA engine on fire");
  LocalRendezvous r(d.mgr.get(), nullptr);
  auto got = SendAndReceive(r, Key(d.cpu, d.gpu0), Tensor::FromVector<float>({1}));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(got.status().message().find("DMA engine on fire"), std::string::npos) << got.status();
  EXPECT_NE(got.status().message().find(d.gpu0->name()), std::string::npos) << got.status();
  EXPECT_NE(got.status().message().find(d.cpu->name()), std::string::npos) << got.status();
}

TEST(LocalRendezvousDevicesTest, SendingTwiceWhileCopyingIsAnError) {
  TwoDevices d = MakeDevices();
  Notification gate;
  d.gpu0->gate = &gate;
  LocalRendezvous r(d.mgr.get(), nullptr);
  const std::string key = Key(d.cpu, d.gpu0);
  ASSERT_TRUE(r.Send(key, Tensor::FromVector<float>({1})).ok());
  EXPECT_EQ(r.Send(key, Tensor::FromVector<float>({1})).code(),
            absl::StatusCode::kInvalidArgument);
  gate.Notify();
}

TEST(LocalRendezvousDevicesTest, DestructionWaitsForCopiesInFlight) {
  TwoDevices d = MakeDevices();
  Notification gate;
  d.gpu0->gate = &gate;
  auto r = std::make_unique<LocalRendezvous>(d.mgr.get(), nullptr);
  ASSERT_TRUE(r->Send(Key(d.cpu, d.gpu0), Tensor::FromVector<float>({1, 2})).ok());
  std::thread destroyer([&] { r.reset(); });
  gate.Notify();
  destroyer.join();
  EXPECT_EQ(d.gpu0->copies, 1) << "the copy finished before the rendezvous went";
}

}  // namespace
}  // namespace strata
