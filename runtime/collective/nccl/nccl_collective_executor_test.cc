// NcclCollectiveExecutor without a GPU: option checks, the matching of
// participants it shares with LocalCollectiveExecutor (timeouts naming the
// missing devices, disagreements), input checks, and what a machine without
// GPUs gives once a collective is ready to run -- for one worker and for two
// workers exchanging the NCCL unique id through a key-value store.
#include "runtime/collective/nccl/nccl_collective_executor.h"

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/allocator.h"
#include "gtest/gtest.h"
#include "runtime/collective/nccl/nccl_unique_id.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

bool HaveGpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

// A "GPU" device as the executor sees it; its buffers are host memory, which
// is enough for everything that happens before NCCL runs.
class FakeGpuDevice : public DeviceBase {
 public:
  FakeGpuDevice(std::string name, int ordinal, std::string type = kDeviceGpu)
      : name_(std::move(name)), type_(std::move(type)), allocator_(name_) {
    ctx_.ordinal = ordinal;
  }
  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  Allocator* allocator() const override { return &allocator_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  const GpuDeviceContext* gpu_context() const override {
    return type_ == kDeviceGpu ? &ctx_ : nullptr;
  }

 private:
  std::string name_;
  std::string type_;
  mutable TrackingCpuAllocator allocator_;
  GpuDeviceContext ctx_;
};

std::string GpuName(int task, int i) {
  return absl::StrCat("/job:worker/replica:0/task:", task, "/device:GPU:", i);
}

CollectiveParams AllReduce(const std::string& device, int group_size, int group_key = 1) {
  CollectiveParams p;
  p.type = CollectiveType::kAllReduce;
  p.group_size = group_size;
  p.group_key = group_key;
  p.instance_key = 1;
  p.device = device;
  p.dtype = DT_FLOAT;
  p.shape = TensorShape({4});
  return p;
}

TEST(NcclCollectiveExecutorTest, OptionsAreChecked) {
  FakeGpuDevice g0(GpuName(0, 0), 0), g0again(GpuName(0, 1), 0);
  FakeGpuDevice cpu("/job:worker/replica:0/task:0/device:CPU:0", -1, kDeviceCpu);
  auto make = [](std::vector<const DeviceBase*> devices, int rank = 0, int workers = 1,
                 KeyValueStore* store = nullptr) {
    NcclCollectiveExecutorOptions o;
    o.devices = std::move(devices);
    o.worker_rank = rank;
    o.num_workers = workers;
    o.store = store;
    return NcclCollectiveExecutor::Create(std::move(o)).status();
  };
  InMemoryKeyValueStore kv;
  EXPECT_TRUE(make({&g0}).ok());
  EXPECT_TRUE(make({&g0}, 1, 2, &kv).ok());
  EXPECT_EQ(make({}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = make({&cpu});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "CPU:0")) << s;
  s = make({&g0, &g0again});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "GPU 0")) << s;
  EXPECT_EQ(make({&g0}, 2, 2, &kv).code(), absl::StatusCode::kInvalidArgument);
  s = make({&g0}, 0, 2, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "key-value store")) << s;
}

class NcclExecutorFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    NcclCollectiveExecutorOptions o;
    o.devices = {&g0_, &g1_};
    o.on_fatal_error = [this](const absl::Status&) { ++fatal_calls_; };
    auto e = NcclCollectiveExecutor::Create(std::move(o));
    ASSERT_TRUE(e.ok()) << e.status();
    ce_ = std::move(*e);
  }
  Tensor Input(const FakeGpuDevice& d) { return Tensor(d.allocator(), DT_FLOAT, TensorShape({4})); }

  FakeGpuDevice g0_{GpuName(0, 0), 0}, g1_{GpuName(0, 1), 1};
  std::atomic<int> fatal_calls_{0};
  std::unique_ptr<NcclCollectiveExecutor> ce_;
};

TEST_F(NcclExecutorFixture, BadInputFailsOnlyThatCollective) {
  FakeGpuDevice other(GpuName(0, 7), 7);
  auto r = ce_->Execute(AllReduce(other.name(), 2), Input(other), other.allocator(), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "GPU:7")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not a GPU device of this NCCL executor"))
      << r.status();

  CollectiveParams p = AllReduce(g0_.name(), 2);
  p.dtype = DT_BOOL;
  r = ce_->Execute(p, Tensor(g0_.allocator(), DT_BOOL, TensorShape({4})), g0_.allocator(), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "bool")) << r.status();

  p = AllReduce(g0_.name(), 2);
  p.merge_op = MergeOp::kMax;
  p.final_op = FinalOp::kDiv;
  r = ce_->Execute(p, Input(g0_), g0_.allocator(), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();

  EXPECT_TRUE(ce_->fatal_error().ok());
  EXPECT_EQ(fatal_calls_.load(), 0);
}

TEST_F(NcclExecutorFixture, MissingParticipantTimesOutNamingItWithoutBreakingTheExecutor) {
  CollectiveParams p = AllReduce(g0_.name(), 2);
  p.timeout_seconds = 0.2f;
  auto r = ce_->Execute(p, Input(g0_), g0_.allocator(), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "never arrived")) << r.status();
  EXPECT_TRUE(ce_->fatal_error().ok());
  EXPECT_EQ(fatal_calls_.load(), 0);
}

TEST_F(NcclExecutorFixture, DisagreeingParticipantsAreInvalidArgument) {
  absl::StatusOr<Tensor> r1;
  std::thread t([&] { r1 = ce_->Execute(AllReduce(g1_.name(), 2), Input(g1_), g1_.allocator(), nullptr); });
  CollectiveParams p = AllReduce(g0_.name(), 2);
  p.shape = TensorShape({2, 2});
  auto r0 = ce_->Execute(p, Tensor(g0_.allocator(), DT_FLOAT, p.shape), g0_.allocator(), nullptr);
  t.join();
  for (const auto* r : {&r0, &r1}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().code(), absl::StatusCode::kInvalidArgument) << r->status();
    EXPECT_TRUE(absl::StrContains(r->status().message(), "disagree")) << r->status();
  }
  EXPECT_TRUE(ce_->fatal_error().ok());
}

TEST_F(NcclExecutorFixture, WithoutAGpuEveryParticipantGetsTheSameClearErrorAndTheClusterHears) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a GPU: the gpu-tagged tests cover running";
  absl::StatusOr<Tensor> r1;
  std::thread t([&] { r1 = ce_->Execute(AllReduce(g1_.name(), 2), Input(g1_), g1_.allocator(), nullptr); });
  auto r0 = ce_->Execute(AllReduce(g0_.name(), 2), Input(g0_), g0_.allocator(), nullptr);
  t.join();
  for (const auto* r : {&r0, &r1}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().code(), absl::StatusCode::kFailedPrecondition) << r->status();
    EXPECT_TRUE(absl::StrContains(r->status().message(), "making the NCCL clique of group 1"))
        << r->status();
    EXPECT_TRUE(absl::StrContains(r->status().message(), "cudaGetDeviceCount")) << r->status();
  }
  EXPECT_EQ(fatal_calls_.load(), 1);
  EXPECT_EQ(ce_->fatal_error().code(), absl::StatusCode::kFailedPrecondition);
  // Every later collective fails at once, with the same error.
  CollectiveParams p = AllReduce(g0_.name(), 2, /*group_key=*/2);
  auto later = ce_->Execute(p, Input(g0_), g0_.allocator(), nullptr);
  ASSERT_FALSE(later.ok());
  EXPECT_TRUE(absl::StrContains(later.status().message(), "broke earlier")) << later.status();
  ce_->Abort(absl::UnavailableError("again"));
  EXPECT_EQ(fatal_calls_.load(), 1);
}

TEST(NcclCollectiveExecutorMultiWorkerTest, GroupSizeMustSplitEvenlyOverWorkers) {
  FakeGpuDevice g(GpuName(0, 0), 0);
  InMemoryKeyValueStore kv;
  NcclCollectiveExecutorOptions o;
  o.devices = {&g};
  o.num_workers = 2;
  o.store = &kv;
  auto ce = NcclCollectiveExecutor::Create(std::move(o));
  ASSERT_TRUE(ce.ok());
  auto r = (*ce)->Execute(AllReduce(g.name(), 3), Tensor(g.allocator(), DT_FLOAT, TensorShape({4})),
                          g.allocator(), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not a multiple of the 2 workers")) << r.status();
}

// Two workers (threads here, processes in a cluster): worker 0's executor
// publishes a real NCCL unique id under "<prefix>/group/<group_key>" and
// worker 1's reads it; each then finds no GPU.
TEST(NcclCollectiveExecutorMultiWorkerTest, WorkerZeroPublishesTheGroupsIdForTheOthers) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a GPU: the gpu-tagged tests cover running";
  InMemoryKeyValueStore kv;
  FakeGpuDevice d0(GpuName(0, 0), 0), d1(GpuName(1, 0), 0);
  std::vector<std::unique_ptr<NcclCollectiveExecutor>> ces;
  for (int w = 0; w < 2; ++w) {
    NcclCollectiveExecutorOptions o;
    o.devices = {w == 0 ? &d0 : &d1};
    o.worker_rank = w;
    o.num_workers = 2;
    o.store = &kv;
    o.key_prefix = "nccl/test-run";
    auto ce = NcclCollectiveExecutor::Create(std::move(o));
    ASSERT_TRUE(ce.ok()) << ce.status();
    ces.push_back(std::move(*ce));
  }
  absl::StatusOr<Tensor> r1;
  std::thread t([&] {
    r1 = ces[1]->Execute(AllReduce(d1.name(), 2, 9), Tensor(d1.allocator(), DT_FLOAT, TensorShape({4})),
                         d1.allocator(), nullptr);
  });
  auto r0 = ces[0]->Execute(AllReduce(d0.name(), 2, 9), Tensor(d0.allocator(), DT_FLOAT, TensorShape({4})),
                            d0.allocator(), nullptr);
  t.join();
  for (const auto* r : {&r0, &r1}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().code(), absl::StatusCode::kFailedPrecondition) << r->status();
    EXPECT_TRUE(absl::StrContains(r->status().message(), "/job:worker/replica:0/task:")) << r->status();
  }
  absl::StatusOr<std::string> id = kv.Get("nccl/test-run/group/9", absl::Seconds(1));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(DecodeNcclUniqueId(*id, "nccl/test-run/group/9").ok());
}

// A worker whose peer (holding rank 0) never starts: DeadlineExceeded naming
// the key, reported to the cluster.
TEST(NcclCollectiveExecutorMultiWorkerTest, MissingWorkerZeroTimesOutNamingTheKey) {
  InMemoryKeyValueStore kv;
  FakeGpuDevice d1(GpuName(1, 0), 0);
  std::atomic<int> fatal{0};
  NcclCollectiveExecutorOptions o;
  o.devices = {&d1};
  o.worker_rank = 1;
  o.num_workers = 2;
  o.store = &kv;
  o.on_fatal_error = [&](const absl::Status&) { ++fatal; };
  auto ce = NcclCollectiveExecutor::Create(std::move(o));
  ASSERT_TRUE(ce.ok());
  CollectiveParams p = AllReduce(d1.name(), 2, 4);
  p.timeout_seconds = 0.3f;
  auto r = (*ce)->Execute(p, Tensor(d1.allocator(), DT_FLOAT, TensorShape({4})), d1.allocator(), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "nccl/group/4")) << r.status();
  EXPECT_EQ(fatal.load(), 1);
}

}  // namespace
}  // namespace strata
