#include "runtime/collective/distributed_collective_executor.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "graph/allocator.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/cancellation.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/collective/transport/shm_transport.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/session.h"

namespace strata {
namespace {

std::string Task(int w) { return absl::StrCat("/job:worker/replica:0/task:", w); }
std::string Dev(int w, int d) { return absl::StrCat(Task(w), "/device:CPU:", d); }

bool Contains(const absl::Status& s, const std::string& what) {
  return s.message().find(what) != absl::string_view::npos;
}

// W workers, each with its own executor, connected by one in-process
// communicator, as W processes would be by TCP.
struct Cluster {
  // With `tcp`, the workers are connected by TcpTransport on loopback.
  explicit Cluster(int w, absl::Duration timeout = absl::Seconds(60), bool tcp = false)
      : fatal_calls(w) {
    auto mailbox = std::make_shared<InProcessMailbox>(w);
    std::vector<std::unique_ptr<Transport>> transports(w);
    if (tcp) {
      InMemoryKeyValueStore kv;
      TcpTransportOptions to;
      to.host = "127.0.0.1";
      std::vector<std::thread> threads;
      for (int r = 0; r < w; ++r) {
        threads.emplace_back([&, r] {
          auto t = ConnectTcpTransport(r, w, kv, to);
          EXPECT_TRUE(t.ok()) << t.status();
          if (t.ok()) transports[r] = std::move(*t);
        });
      }
      for (auto& t : threads) t.join();
    }
    for (int r = 0; r < w; ++r) {
      DistributedCollectiveExecutorOptions o;
      o.worker_rank = r;
      o.num_workers = w;
      o.transport = tcp ? std::move(transports[r]) : mailbox->Connect(r);
      o.default_timeout = timeout;
      o.on_fatal_error = [this, r](const absl::Status&) { ++fatal_calls[r]; };
      auto ce = DistributedCollectiveExecutor::Create(std::move(o));
      EXPECT_TRUE(ce.ok()) << ce.status();
      workers.push_back(std::move(*ce));
    }
  }
  std::vector<std::unique_ptr<DistributedCollectiveExecutor>> workers;
  std::vector<std::atomic<int>> fatal_calls;
};

CollectiveParams Params(CollectiveType type, int group_size, int instance, int worker, int device,
                        const TensorShape& shape, DataType dtype = DT_FLOAT) {
  CollectiveParams p;
  p.type = type;
  p.group_size = group_size;
  p.group_key = 1;
  p.instance_key = instance;
  p.device = Dev(worker, device);
  p.dtype = dtype;
  p.shape = shape;
  return p;
}

// Runs fn(worker, device) on w * l threads and joins them.
template <typename F>
void OnDevices(int w, int l, F fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    for (int d = 0; d < l; ++d) threads.emplace_back([&fn, r, d] { fn(r, d); });
  }
  for (auto& t : threads) t.join();
}

class ShapesTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ShapesTest, AllReduceSumAndMeanMatchTheReference) {
  const auto [w, l] = GetParam();
  const int n = w * l;
  Cluster c(w);
  constexpr int kElems = 1001;  // not a multiple of any ring's chunk count
  int instance = 0;
  for (FinalOp final_op : {FinalOp::kId, FinalOp::kDiv}) {
    ++instance;
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnDevices(w, l, [&](int r, int d) {
      const int g = r * l + d;
      CollectiveParams p = Params(CollectiveType::kAllReduce, n, instance, r, d, TensorShape{kElems});
      p.final_op = final_op;
      Tensor x(DT_FLOAT, TensorShape{kElems});
      for (int i = 0; i < kElems; ++i) x.data<float>()[i] = float(g * 3 + i % 7);
      out[g] = c.workers[r]->Execute(p, x, CpuAllocator(), nullptr);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(out[g].ok()) << "w=" << w << " l=" << l << ": " << out[g].status();
      ASSERT_EQ(out[g]->shape(), TensorShape({kElems}));
      for (int i = 0; i < kElems; ++i) {
        float sum = 0;
        for (int h = 0; h < n; ++h) sum += float(h * 3 + i % 7);
        ASSERT_FLOAT_EQ(out[g]->data<float>()[i], final_op == FinalOp::kDiv ? sum / n : sum)
            << "element " << i << " of global rank " << g;
      }
    }
  }
  // Integer mean truncates the global sum, as TensorFlow's does.
  ++instance;
  std::vector<absl::StatusOr<Tensor>> out(n);
  OnDevices(w, l, [&](int r, int d) {
    CollectiveParams p = Params(CollectiveType::kAllReduce, n, instance, r, d, TensorShape{1}, DT_INT64);
    p.final_op = FinalOp::kDiv;
    out[r * l + d] = c.workers[r]->Execute(p, Tensor::FromVector<int64_t>({1}, TensorShape{1}),
                                            CpuAllocator(), nullptr);
  });
  for (int g = 0; g < n; ++g) {
    ASSERT_TRUE(out[g].ok()) << out[g].status();
    EXPECT_EQ(out[g]->data<int64_t>()[0], 1);
  }
  for (int r = 0; r < w; ++r) EXPECT_EQ(c.fatal_calls[r], 0);
}

TEST_P(ShapesTest, AllGatherIsWorkerMajorThenDeviceOrder) {
  const auto [w, l] = GetParam();
  const int n = w * l;
  Cluster c(w);
  std::vector<absl::StatusOr<Tensor>> out(n);
  OnDevices(w, l, [&](int r, int d) {
    const int g = r * l + d;
    out[g] = c.workers[r]->Execute(
        Params(CollectiveType::kAllGather, n, 1, r, d, TensorShape{1, 2}, DT_INT32),
        Tensor::FromVector<int32_t>({g, 100 + g}, TensorShape{1, 2}), CpuAllocator(), nullptr);
  });
  std::vector<int32_t> want;
  for (int g = 0; g < n; ++g) want.insert(want.end(), {g, 100 + g});
  for (int g = 0; g < n; ++g) {
    ASSERT_TRUE(out[g].ok()) << out[g].status();
    ASSERT_EQ(out[g]->shape(), TensorShape({n, 2}));
    EXPECT_EQ(std::vector<int32_t>(out[g]->data<int32_t>(), out[g]->data<int32_t>() + 2 * n), want);
  }
}

// Rank g (worker-major, then device) gets block g of the mean: every
// device's input holds n blocks of 3 rows, element i of input g being
// g * 1000 + i.
TEST_P(ShapesTest, ReduceScatterGivesEachDeviceItsBlockOfTheMean) {
  const auto [w, l] = GetParam();
  const int n = w * l;
  for (bool tcp : {false, true}) {
    if (tcp && w == 1) continue;
    SCOPED_TRACE(tcp ? "tcp" : "in-process");
    Cluster c(w, absl::Seconds(60), tcp);
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnDevices(w, l, [&](int r, int d) {
      const int g = r * l + d;
      std::vector<float> x(3 * n * 2);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(g * 1000 + i);
      CollectiveParams p = Params(CollectiveType::kReduceScatter, n, 1, r, d, TensorShape{3 * n, 2});
      p.final_op = FinalOp::kDiv;
      out[g] = c.workers[r]->Execute(p, Tensor::FromVector(x, TensorShape{3 * n, 2}), CpuAllocator(),
                                     nullptr);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(out[g].ok()) << out[g].status();
      ASSERT_EQ(out[g]->shape(), TensorShape({3, 2}));
      for (int i = 0; i < 6; ++i) {
        // mean over ranks q of q * 1000 + (6 g + i)
        const float want = 1000.0f * (n - 1) / 2 + float(6 * g + i);
        EXPECT_FLOAT_EQ(out[g]->data<float>()[i], want) << "rank " << g << " element " << i;
      }
    }
  }
  // A dimension 0 that does not split is refused before anyone waits.
  Cluster c(w);
  auto bad = c.workers[0]->Execute(Params(CollectiveType::kReduceScatter, n, 2, 0, 0, TensorShape{3 * n + 1}),
                                   Tensor(DT_FLOAT, TensorShape{3 * n + 1}), CpuAllocator(), nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status(), "equal blocks")) << bad.status();
}

TEST_P(ShapesTest, BroadcastFromADeviceOfWorkerOneReachesEveryDevice) {
  const auto [w, l] = GetParam();
  const int n = w * l;
  Cluster c(w);
  for (int step = 0; step < 3; ++step) {
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnDevices(w, l, [&](int r, int d) {
      const bool sender = r == 1 && d == l - 1;
      CollectiveParams p = Params(sender ? CollectiveType::kBroadcastSend : CollectiveType::kBroadcastRecv,
                                  n, 1, r, d, TensorShape{3});
      p.step_id = step;
      Tensor x = sender ? Tensor::FromVector<float>({3, 1, float(step)}, TensorShape{3}) : Tensor();
      out[r * l + d] = c.workers[r]->Execute(p, x, CpuAllocator(), nullptr);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(out[g].ok()) << out[g].status();
      EXPECT_EQ(std::vector<float>(out[g]->data<float>(), out[g]->data<float>() + 3),
                std::vector<float>({3, 1, float(step)}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersTimesDevices, ShapesTest,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(1, 2)));

TEST(DistributedCollectiveExecutorTest, AllReduceRunsInPlaceOnlyInAnInputNobodyElseHolds) {
  // Over TCP the all-reduce is the pipelined ring, which can run in place.
  constexpr int w = 2, kElems = 100003;
  for (int l : {1, 2}) {
    Cluster c(w, absl::Seconds(60), /*tcp=*/true);
    const int n = w * l;
    for (bool caller_keeps_input : {false, true}) {
      std::vector<absl::StatusOr<Tensor>> out(n);
      std::vector<const void*> input_data(n);
      std::vector<Tensor> kept(n);
      OnDevices(w, l, [&](int r, int d) {
        const int g = r * l + d;
        CollectiveParams p = Params(CollectiveType::kAllReduce, n, caller_keeps_input ? 2 : 1, r, d,
                                    TensorShape{kElems});
        Tensor x(DT_FLOAT, TensorShape{kElems});
        for (int i = 0; i < kElems; ++i) x.data<float>()[i] = float(g + i % 5);
        input_data[g] = x.raw_data();
        if (caller_keeps_input) kept[g] = x;
        out[g] = c.workers[r]->Execute(p, std::move(x), CpuAllocator(), nullptr);
      });
      for (int g = 0; g < n; ++g) {
        SCOPED_TRACE(absl::StrCat(l, " devices per worker, global rank ", g,
                                  caller_keeps_input ? ", input kept" : ", input handed over"));
        ASSERT_TRUE(out[g].ok()) << out[g].status();
        for (int i = 0; i < kElems; ++i) {
          ASSERT_EQ(out[g]->data<float>()[i], float(n * (n - 1) / 2 + n * (i % 5))) << i;
        }
        // One device per worker: the result is written over an input
        // handed over, and never over one its caller still holds.
        EXPECT_EQ(out[g]->raw_data() == input_data[g], l == 1 && !caller_keeps_input);
        if (caller_keeps_input) {
          for (int i = 0; i < kElems; ++i) {
            ASSERT_EQ(kept[g].data<float>()[i], float(g + i % 5)) << i;
          }
        }
      }
    }
  }
}

TEST(DistributedCollectiveExecutorTest, InstanceReuseMatchesByExecutionNotByStepId) {
  constexpr int w = 2, l = 2, n = 4;
  Cluster c(w);
  for (int step = 0; step < 50; ++step) {
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnDevices(w, l, [&](int r, int d) {
      CollectiveParams p = Params(CollectiveType::kAllReduce, n, 7, r, d, TensorShape{2});
      // The chief ran other Session::Run calls: its step ids differ.
      p.step_id = r == 0 ? 1000 + step : step;
      out[r * l + d] = c.workers[r]->Execute(
          p, Tensor::FromVector<float>({float(step), float(r * l + d)}, TensorShape{2}),
          CpuAllocator(), nullptr);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(out[g].ok()) << "step " << step << ": " << out[g].status();
      EXPECT_EQ(out[g]->data<float>()[0], 4.0f * step);
      EXPECT_EQ(out[g]->data<float>()[1], 6.0f);
    }
  }
}

TEST(DistributedCollectiveExecutorTest, ConcurrentInstancesIssuedInOppositeOrders) {
  constexpr int w = 2;
  Cluster c(w);
  for (int round = 0; round < 10; ++round) {
    // Shared with the callbacks, which may still be unlocking when the
    // last of them has let this thread go on.
    struct State {
      Mutex mu;
      std::vector<absl::Status> statuses;
      std::vector<float> results;
      Notification all_done;
      int remaining = 4;
    };
    auto st = std::make_shared<State>();
    for (int r = 0; r < w; ++r) {
      // Worker 0 issues instance 1 then 2; worker 1 issues 2 then 1.
      for (int k = 0; k < 2; ++k) {
        const int instance = r == 0 ? 1 + k : 2 - k;
        CollectiveParams p = Params(CollectiveType::kAllReduce, w, instance, r, 0, TensorShape{1});
        p.step_id = round;
        c.workers[r]->ExecuteAsync(
            p, Tensor::FromVector<float>({float(instance * 10 + r)}, TensorShape{1}), CpuAllocator(),
            nullptr, [st, instance](absl::Status s, Tensor t) {
              bool last;
              {
                MutexLock lock(&st->mu);
                st->statuses.push_back(s);
                if (s.ok()) st->results.push_back(t.data<float>()[0] - instance * 20);
                last = --st->remaining == 0;
              }
              if (last) st->all_done.Notify();
            });
      }
    }
    st->all_done.WaitForNotification();
    MutexLock lock(&st->mu);
    ASSERT_EQ(st->statuses.size(), 4u);
    for (const absl::Status& s : st->statuses) ASSERT_TRUE(s.ok()) << s;
    for (float v : st->results) EXPECT_EQ(v, 1.0f);  // 10i + 0 + 10i + 1 - 20i
  }
}

// Over shared memory (with AllReduceShm linked in, as wherever shm carries
// collectives), equal-sized instances started in opposite orders on the two
// workers, concurrently, each get their own sum: nothing pairs one worker's
// instance with another instance of the peer.
// W workers as threads over one shared-memory communicator, as W processes
// on one host would be.
std::vector<std::unique_ptr<DistributedCollectiveExecutor>> ShmWorkers(int w,
                                                                        absl::Duration timeout) {
  static std::atomic<int> clusters{0};
  InMemoryKeyValueStore kv;
  std::vector<std::unique_ptr<Transport>> transports(w);
  const std::string prefix = absl::StrCat("dce-test-", getpid(), "-", clusters++);
  std::vector<std::thread> connect;
  for (int r = 0; r < w; ++r) {
    connect.emplace_back([&, r] {
      ShmTransportOptions o;
      o.key_prefix = prefix;
      auto t = ConnectShmTransport(r, w, kv, o);
      EXPECT_TRUE(t.ok()) << t.status();
      if (t.ok()) transports[r] = std::move(*t);
    });
  }
  for (std::thread& t : connect) t.join();
  std::vector<std::unique_ptr<DistributedCollectiveExecutor>> workers;
  for (int r = 0; r < w; ++r) {
    if (transports[r] == nullptr) return {};
    DistributedCollectiveExecutorOptions o;
    o.worker_rank = r;
    o.num_workers = w;
    o.transport = std::move(transports[r]);
    o.default_timeout = timeout;
    auto ce = DistributedCollectiveExecutor::Create(std::move(o));
    EXPECT_TRUE(ce.ok()) << ce.status();
    if (!ce.ok()) return {};
    workers.push_back(std::move(*ce));
  }
  return workers;
}

// Over shared memory (AllReduceShm, one workspace, linked in as wherever shm
// carries collectives), equal-sized instances started in opposite orders on
// the two workers, concurrently, each get their own sum: the workers run
// them in worker 0's order, never pairing one worker's instance with
// another instance of the peer.
TEST(DistributedCollectiveExecutorTest, ShmConcurrentEqualSizedInstancesInOppositeOrders) {
  constexpr int w = 2, kInstances = 4;
  constexpr int64_t kElements = 70000;  // several of AllReduceShm's chunks
  auto workers = ShmWorkers(w, absl::Seconds(20));
  ASSERT_EQ(workers.size(), size_t{w});
  for (int round = 0; round < 5; ++round) {
    struct State {
      Mutex mu;
      std::vector<std::string> errors;
      Notification all_done;
      int remaining = w * kInstances;
    };
    auto st = std::make_shared<State>();
    for (int r = 0; r < w; ++r) {
      for (int k = 0; k < kInstances; ++k) {
        const int instance = r == 0 ? 1 + k : kInstances - k;
        CollectiveParams p =
            Params(CollectiveType::kAllReduce, w, instance, r, 0, TensorShape{kElements});
        p.step_id = round;
        std::vector<float> v(kElements, float(instance * 10 + r));
        workers[r]->ExecuteAsync(
            p, Tensor::FromVector<float>(v, TensorShape{kElements}), CpuAllocator(), nullptr,
            [st, instance, r](absl::Status s, Tensor t) {
              std::string error;
              if (!s.ok()) {
                error = s.ToString();
              } else {
                const float want = float(instance * 20 + 1);  // 10i + 0 + 10i + 1
                for (int64_t i = 0; i < t.NumElements() && error.empty(); ++i) {
                  if (t.data<float>()[i] != want) {
                    error = absl::StrCat("worker ", r, " instance ", instance, " element ", i, ": ",
                                         t.data<float>()[i], ", want ", want);
                  }
                }
              }
              bool last;
              {
                MutexLock lock(&st->mu);
                if (!error.empty()) st->errors.push_back(error);
                last = --st->remaining == 0;
              }
              if (last) st->all_done.Notify();
            });
      }
    }
    st->all_done.WaitForNotification();
    MutexLock lock(&st->mu);
    for (const std::string& e : st->errors) ADD_FAILURE() << e;
    if (!st->errors.empty()) return;
  }
}

// Over shared memory, equal-sized all-gathers and reduce-scatters (in the
// workspace too) started in opposite orders on the two workers each meet
// their own peer.
TEST(DistributedCollectiveExecutorTest, ShmGathersAndScattersInOppositeOrdersMeetTheirPeers) {
  constexpr int w = 2, kInstances = 4;
  constexpr int64_t kBlock = 50001;
  auto workers = ShmWorkers(w, absl::Seconds(20));
  ASSERT_EQ(workers.size(), size_t{w});
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<absl::StatusOr<Tensor>>> out(w, std::vector<absl::StatusOr<Tensor>>(kInstances));
    std::vector<std::thread> threads;
    for (int r = 0; r < w; ++r) {
      threads.emplace_back([&, r] {
        // Instances 1..4 on worker 0, 4..1 on worker 1, concurrently: odd
        // ones gather, even ones reduce-scatter.
        std::vector<Notification> done(kInstances);
        for (int k = 0; k < kInstances; ++k) {
          const int instance = r == 0 ? 1 + k : kInstances - k;
          const bool gather = instance % 2 == 1;
          const int64_t elements = gather ? kBlock : w * kBlock;
          CollectiveParams p = Params(gather ? CollectiveType::kAllGather : CollectiveType::kReduceScatter,
                                      w, instance, r, 0, TensorShape{elements});
          p.merge_op = MergeOp::kAdd;
          std::vector<float> v(elements);
          for (int64_t i = 0; i < elements; ++i) v[i] = float(instance * 100 + r * 10 + i % 5);
          Notification* n = &done[k];
          absl::StatusOr<Tensor>* slot = &out[r][instance - 1];
          workers[r]->ExecuteAsync(p, Tensor::FromVector<float>(v, TensorShape{elements}), CpuAllocator(),
                                   nullptr, [n, slot](absl::Status s, Tensor t) {
                                     if (s.ok()) {
                                       *slot = std::move(t);
                                     } else {
                                       *slot = s;
                                     }
                                     n->Notify();
                                   });
        }
        for (Notification& n : done) n.WaitForNotification();
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < w; ++r) {
      for (int instance = 1; instance <= kInstances; ++instance) {
        const absl::StatusOr<Tensor>& t = out[r][instance - 1];
        ASSERT_TRUE(t.ok()) << "worker " << r << " instance " << instance << ": " << t.status();
        if (instance % 2 == 1) {
          ASSERT_EQ(t->NumElements(), w * kBlock);
          for (int64_t i = 0; i < w * kBlock; i += 7) {
            const int q = static_cast<int>(i / kBlock);
            ASSERT_EQ(t->data<float>()[i], float(instance * 100 + q * 10 + (i % kBlock) % 5)) << i;
          }
        } else {
          ASSERT_EQ(t->NumElements(), kBlock);
          for (int64_t i = 0; i < kBlock; i += 7) {
            const int64_t global = r * kBlock + i;
            ASSERT_EQ(t->data<float>()[i], float(2 * instance * 100 + 10 + 2 * (global % 5))) << i;
          }
        }
      }
    }
  }
  for (int r = 0; r < w; ++r) EXPECT_TRUE(workers[r]->fatal_error().ok()) << workers[r]->fatal_error();
}

// Over shared memory with several devices per worker: the ordered
// all-reduces (sum and mean, local sum first) and an all-gather between
// them, which also runs in the workspace, in the same order.
TEST(DistributedCollectiveExecutorTest, ShmSeveralDevicesPerWorkerAndMixedCollectives) {
  for (int w : {2, 3}) {
    constexpr int l = 2;
    const int n = w * l;
    auto workers = ShmWorkers(w, absl::Seconds(20));
    ASSERT_EQ(workers.size(), size_t(w));
    constexpr int kElems = 100003;  // several workspace chunks, odd length
    for (int round = 0; round < 3; ++round) {
      std::vector<absl::StatusOr<Tensor>> sum(n), mean(n), gathered(n);
      OnDevices(w, l, [&](int r, int d) {
        const int g = r * l + d;
        Tensor x(DT_FLOAT, TensorShape{kElems});
        for (int i = 0; i < kElems; ++i) x.data<float>()[i] = float(g * 3 + i % 7 + round);
        CollectiveParams ps = Params(CollectiveType::kAllReduce, n, 1, r, d, TensorShape{kElems});
        sum[g] = workers[r]->Execute(ps, x, CpuAllocator(), nullptr);
        CollectiveParams pg = Params(CollectiveType::kAllGather, n, 2, r, d, TensorShape{1});
        gathered[g] = workers[r]->Execute(pg, Tensor::FromVector<float>({float(g)}, TensorShape{1}),
                                          CpuAllocator(), nullptr);
        CollectiveParams pm = Params(CollectiveType::kAllReduce, n, 3, r, d, TensorShape{kElems});
        pm.final_op = FinalOp::kDiv;
        mean[g] = workers[r]->Execute(pm, x, CpuAllocator(), nullptr);
      });
      for (int g = 0; g < n; ++g) {
        ASSERT_TRUE(sum[g].ok()) << "w=" << w << ": " << sum[g].status();
        ASSERT_TRUE(mean[g].ok()) << "w=" << w << ": " << mean[g].status();
        ASSERT_TRUE(gathered[g].ok()) << "w=" << w << ": " << gathered[g].status();
        for (int h = 0; h < n; ++h) ASSERT_EQ(gathered[g]->data<float>()[h], float(h));
        for (int i = 0; i < kElems; i += 97) {
          float want = 0;
          for (int h = 0; h < n; ++h) want += float(h * 3 + i % 7 + round);
          ASSERT_FLOAT_EQ(sum[g]->data<float>()[i], want) << "element " << i << " of rank " << g;
          ASSERT_FLOAT_EQ(mean[g]->data<float>()[i], want / n) << "element " << i << " of rank " << g;
        }
      }
    }
    for (int r = 0; r < w; ++r) EXPECT_TRUE(workers[r]->fatal_error().ok()) << workers[r]->fatal_error();
  }
}

// Worker 0 runs instance 1 while worker 1 runs only instance 2: worker 1
// times out saying where the order stands, and the communicator breaks.
TEST(DistributedCollectiveExecutorTest, ShmOrderedInstanceMissingOnAPeerTimesOutSayingSo) {
  constexpr int w = 2;
  auto workers = ShmWorkers(w, absl::Seconds(30));
  ASSERT_EQ(workers.size(), size_t{w});
  auto run = [&](int r, int instance) {
    return workers[r]
        ->Execute(Params(CollectiveType::kAllReduce, w, instance, r, 0, TensorShape{64}),
                  Tensor(DT_FLOAT, TensorShape{64}), CpuAllocator(), nullptr)
        .status();
  };
  // Both instances once everywhere (the workers agree on their descriptions).
  for (int instance : {1, 2}) {
    std::vector<absl::Status> first(w);
    OnDevices(w, 1, [&](int r, int) { first[r] = run(r, instance); });
    for (const absl::Status& s : first) ASSERT_TRUE(s.ok()) << s;
  }
  // Worker 1 times out first (1 s against worker 0's 30 s), so its message is
  // the one every worker reports; worker 0's announcement has long arrived.
  std::vector<absl::Status> out(w);
  OnDevices(w, 1, [&](int r, int) {
    CollectiveParams p = Params(CollectiveType::kAllReduce, w, r == 0 ? 1 : 2, r, 0, TensorShape{64});
    p.timeout_seconds = r == 0 ? 30 : 1;
    out[r] = workers[r]->Execute(p, Tensor(DT_FLOAT, TensorShape{64}), CpuAllocator(), nullptr)
                 .status();
  });
  EXPECT_EQ(out[0].code(), absl::StatusCode::kDeadlineExceeded) << out[0];
  EXPECT_EQ(out[1].code(), absl::StatusCode::kDeadlineExceeded) << out[1];
  EXPECT_TRUE(Contains(out[1], Task(0) + " runs group 1 instance 1 (execution 1 mod 2^14) first, "
                                         "which has not started on this worker"))
      << out[1];
  for (int r = 0; r < w; ++r) EXPECT_FALSE(workers[r]->fatal_error().ok());
}

TEST(DistributedCollectiveExecutorTest, ShapeMismatchIsInvalidArgumentOnEveryWorkerNamingIt) {
  constexpr int w = 3;
  Cluster c(w);
  std::vector<absl::Status> out(w);
  OnDevices(w, 1, [&](int r, int) {
    const int64_t len = r == 1 ? 512 : 1024;
    CollectiveParams p = Params(CollectiveType::kAllReduce, w, 4, r, 0, TensorShape{len});
    p.final_op = FinalOp::kDiv;
    out[r] = c.workers[r]->Execute(p, Tensor(DT_FLOAT, TensorShape{len}), CpuAllocator(), nullptr)
                 .status();
  });
  for (int r = 0; r < w; ++r) {
    EXPECT_EQ(out[r].code(), absl::StatusCode::kInvalidArgument) << out[r];
    EXPECT_TRUE(Contains(out[r], "worker " + Task(1) + " has float[512] all-reduce Add/Div")) << out[r];
    EXPECT_TRUE(Contains(out[r], Task(0) + ", " + Task(2) + " have float[1024] all-reduce Add/Div"))
        << out[r];
  }
  // A disagreement is seen alike everywhere: the communicator still works.
  std::vector<absl::StatusOr<Tensor>> again(w);
  OnDevices(w, 1, [&](int r, int) {
    again[r] = c.workers[r]->Execute(Params(CollectiveType::kAllReduce, w, 4, r, 0, TensorShape{1}),
                                     Tensor::FromVector<float>({1}, TensorShape{1}), CpuAllocator(),
                                     nullptr);
  });
  for (int r = 0; r < w; ++r) {
    ASSERT_TRUE(again[r].ok()) << again[r].status();
    EXPECT_EQ(again[r]->data<float>()[0], 3.0f);
    EXPECT_EQ(c.fatal_calls[r], 0);
  }
}

// Waits (at most a minute, a hang guard) until worker r reported its fatal error.
void WaitForFatalCall(Cluster& c, int r) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (c.fatal_calls[r] == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
}

TEST(DistributedCollectiveExecutorTest, MissingWorkerTimesOutNamingItAndBreaksTheCommunicator) {
  constexpr int w = 3;
  Cluster c(w, absl::Milliseconds(500));
  std::vector<absl::Status> out(2);
  OnDevices(2, 1, [&](int r, int) {  // worker 2 never calls
    out[r] = c.workers[r]->Execute(Params(CollectiveType::kAllReduce, w, 1, r, 0, TensorShape{4}),
                                   Tensor(DT_FLOAT, TensorShape{4}), CpuAllocator(), nullptr)
                 .status();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].code(), absl::StatusCode::kDeadlineExceeded) << out[r];
    EXPECT_TRUE(Contains(out[r], "still waiting for " + Task(2))) << out[r];
    // The report follows the transport's abort, which is what ended the
    // collective: it may come just after.
    WaitForFatalCall(c, r);
    EXPECT_EQ(c.fatal_calls[r], 1);
    EXPECT_EQ(c.workers[r]->fatal_error().code(), absl::StatusCode::kDeadlineExceeded);
  }
  // Every later collective fails at once with the original error, on the
  // survivors and on the late worker (its transport was aborted too).
  for (int r = 0; r < w; ++r) {
    CollectiveParams p = Params(CollectiveType::kAllReduce, w, 2, r, 0, TensorShape{4});
    p.timeout_seconds = 600;  // would hang the test if it waited
    absl::Status s =
        c.workers[r]->Execute(p, Tensor(DT_FLOAT, TensorShape{4}), CpuAllocator(), nullptr).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << "worker " << r << ": " << s;
    EXPECT_TRUE(Contains(s, Task(2))) << s;
    EXPECT_EQ(c.fatal_calls[r], 1);
  }
}

TEST(DistributedCollectiveExecutorTest, CancelledStepWhileWaitingForAPeerBreaksTheCommunicator) {
  Cluster c(2);
  CancellationManager cm;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cm.StartCancel(absl::CancelledError("step 3 cancelled"));
  });
  absl::Status s = c.workers[0]
                       ->Execute(Params(CollectiveType::kAllReduce, 2, 1, 0, 0, TensorShape{1}),
                                 Tensor(DT_FLOAT, TensorShape{1}), CpuAllocator(), &cm)
                       .status();
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(Contains(s, "step 3 cancelled")) << s;
  EXPECT_EQ(c.fatal_calls[0], 1);
}

TEST(DistributedCollectiveExecutorTest, GroupSizeMustBeAMultipleOfTheWorkers) {
  Cluster c(2);
  absl::Status s = c.workers[0]
                       ->Execute(Params(CollectiveType::kAllReduce, 3, 1, 0, 0, TensorShape{1}),
                                 Tensor(DT_FLOAT, TensorShape{1}), CpuAllocator(), nullptr)
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "group_size 3 is not a multiple of the 2 workers")) << s;
  EXPECT_EQ(c.fatal_calls[0], 0);
}

TEST(DistributedCollectiveExecutorTest, OneWorkerIsTheLocalExecutor) {
  DistributedCollectiveExecutorOptions o;  // one worker, no transport
  auto ce = DistributedCollectiveExecutor::Create(std::move(o));
  ASSERT_TRUE(ce.ok()) << ce.status();
  std::vector<absl::StatusOr<Tensor>> out(3);
  OnDevices(1, 3, [&](int, int d) {
    out[d] = (*ce)->Execute(Params(CollectiveType::kAllReduce, 3, 1, 0, d, TensorShape{1}),
                            Tensor::FromVector<float>({float(d)}, TensorShape{1}), CpuAllocator(),
                            nullptr);
  });
  for (int d = 0; d < 3; ++d) {
    ASSERT_TRUE(out[d].ok()) << out[d].status();
    EXPECT_EQ(out[d]->data<float>()[0], 3.0f);
    EXPECT_EQ(out[d]->raw_data(), out[0]->raw_data());  // direct: one shared buffer
  }
  // A broadcast without a sender is still an error with one worker.
  absl::Status s = (*ce)->Execute(Params(CollectiveType::kBroadcastRecv, 1, 2, 0, 0, TensorShape{1}),
                                  Tensor(), CpuAllocator(), nullptr)
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(DistributedCollectiveExecutorTest, BadOptionsAreInvalidArgument) {
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  DistributedCollectiveExecutorOptions o;
  o.num_workers = 2;
  o.worker_rank = 0;
  o.transport = mailbox->Connect(1);
  EXPECT_EQ(DistributedCollectiveExecutor::Create(std::move(o)).status().code(),
            absl::StatusCode::kInvalidArgument);
  DistributedCollectiveExecutorOptions no_transport;
  no_transport.num_workers = 2;
  EXPECT_EQ(DistributedCollectiveExecutor::Create(std::move(no_transport)).status().code(),
            absl::StatusCode::kInvalidArgument);
  DistributedCollectiveExecutorOptions bad_rank;
  bad_rank.worker_rank = 1;
  EXPECT_EQ(DistributedCollectiveExecutor::Create(std::move(bad_rank)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two Sessions, one per "worker", each over two virtual CPU devices: the
// CollectiveReduceV2 ops of both meet in their executors and sum globally.
TEST(DistributedCollectiveExecutorTest, TwoSessionsAllReduceAcrossWorkers) {
  constexpr int w = 2, l = 2, n = 4;
  Cluster c(w);
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::vector<std::string>> fetches(w);
  for (int r = 0; r < w; ++r) {
    Scope root = Scope::NewRootScope();
    for (int d = 0; d < l; ++d) {
      Scope s = root.WithDevice(absl::StrCat("/device:CPU:", d));
      Output x = ops::Const<float>(s, {float(r * l + d), 1});
      fetches[r].push_back(ops::CollectiveReduce(s, ops::Identity(s, x), n, 1, 1).name());
      fetches[r].push_back(ops::CollectiveReduce(s, ops::Identity(s, x), n, 1, 2,
                                                 ops::CollectiveAttrs().FinalOp("Div"))
                               .name());
    }
    ASSERT_TRUE(root.ok()) << root.status();
    SessionOptions opts;
    opts.devices.num_cpu_devices = l;
    opts.collective_executor = c.workers[r].get();
    auto session = Session::Create(root, opts);
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(std::move(*session));
  }
  for (int step = 0; step < 5; ++step) {
    std::vector<absl::Status> statuses(w);
    std::vector<std::vector<Tensor>> outs(w);
    OnDevices(w, 1, [&](int r, int) { statuses[r] = sessions[r]->Run({}, fetches[r], {}, &outs[r]); });
    for (int r = 0; r < w; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      for (int d = 0; d < l; ++d) {
        const Tensor& sum = outs[r][2 * d];
        const Tensor& mean = outs[r][2 * d + 1];
        EXPECT_EQ(std::vector<float>(sum.data<float>(), sum.data<float>() + 2),
                  std::vector<float>({6, 4}));
        EXPECT_EQ(std::vector<float>(mean.data<float>(), mean.data<float>() + 2),
                  std::vector<float>({1.5f, 1}));
      }
    }
  }
}

}  // namespace
}  // namespace strata
