#include "runtime/collective/local_collective_executor.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "graph/allocator.h"
#include "gtest/gtest.h"
#include "kernels/cancellation.h"

namespace strata {
namespace {

std::string Dev(int i) { return absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", i); }

CollectiveParams Params(CollectiveType type, int n, int instance, int device, const TensorShape& shape,
                        DataType dtype = DT_FLOAT) {
  CollectiveParams p;
  p.type = type;
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = instance;
  p.device = Dev(device);
  p.dtype = dtype;
  p.shape = shape;
  return p;
}

// Runs fn(rank) on n threads and joins them.
template <typename F>
void OnRanks(int n, F fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

TEST(LocalCollectiveExecutorTest, AllReduceWithEveryHint) {
  LocalCollectiveExecutor ce;
  int instance = 0;
  for (const char* hint : {"auto", "ring", "reduce_to_one", "local", "direct", "nccl"}) {
    for (int n : {1, 2, 3, 4, 8}) {
      ++instance;
      std::vector<absl::StatusOr<Tensor>> out(n);
      OnRanks(n, [&](int r) {
        CollectiveParams p = Params(CollectiveType::kAllReduce, n, instance, r, TensorShape{2, 3});
        p.group_key = 100 + n;
        p.communication_hint = hint;
        p.final_op = FinalOp::kDiv;
        Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, float(r)}, TensorShape{2, 3});
        out[r] = ce.Execute(p, x, CpuAllocator(), nullptr);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(out[r].ok()) << hint << " n=" << n << ": " << out[r].status();
        EXPECT_EQ(out[r]->shape(), TensorShape({2, 3}));
        EXPECT_FLOAT_EQ(out[r]->data<float>()[0], 1.0f);
        EXPECT_FLOAT_EQ(out[r]->data<float>()[5], (n - 1) / 2.0f);
      }
    }
  }
}

TEST(LocalCollectiveExecutorTest, LargeAutoAllReduceIsBitwiseTheRankOrderSumOnEveryRank) {
  // Many chunks, reduced by the last arriver and helper threads in whatever
  // split: every element is still summed in rank order (float addition is
  // not associative, so another order would show), and every rank gets the
  // same bits, step after step.
  LocalCollectiveExecutor ce;
  constexpr int n = 3;
  constexpr int64_t count = (1 << 20) + 3;
  std::vector<Tensor> in;
  for (int r = 0; r < n; ++r) {
    std::vector<float> v(count);
    for (int64_t i = 0; i < count; ++i) v[i] = (r == 1 ? 1e8f : 1.0f) / float(1 + (i + r) % 7);
    in.push_back(Tensor::FromVector<float>(v, TensorShape{count}));
  }
  for (int step = 1; step <= 3; ++step) {
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnRanks(n, [&](int r) {
      CollectiveParams p = Params(CollectiveType::kAllReduce, n, 1, r, TensorShape{count});
      p.step_id = step;
      p.final_op = FinalOp::kDiv;
      out[r] = ce.Execute(p, in[r], CpuAllocator(), nullptr);
    });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(out[r].ok()) << out[r].status();
    for (int64_t i = 0; i < count; ++i) {
      const float want = ((in[0].data<float>()[i] + in[1].data<float>()[i]) + in[2].data<float>()[i]) /
                         float(n);
      ASSERT_EQ(out[0]->data<float>()[i], want) << i;
      for (int r = 1; r < n; ++r) ASSERT_EQ(out[r]->data<float>()[i], out[0]->data<float>()[i]);
    }
  }
}

TEST(LocalCollectiveExecutorTest, WaitersThatHelpWithTheReductionKeepItBitwiseTheRankOrderSum) {
  // More participants than cores: callers of Execute poll while they wait
  // and take chunks of the reduction that helper threads have not (a few
  // hundred KiB and back-to-back steps keep the waits short enough to
  // poll). However the chunks are split between threads, each element is
  // summed in rank order.
  LocalCollectiveExecutor ce;
  const int n = static_cast<int>(std::min(std::thread::hardware_concurrency(), 15u)) + 1;
  constexpr int64_t count = (96 << 10) + 5;  // 384 KiB: several chunks
  std::vector<Tensor> in;
  for (int r = 0; r < n; ++r) {
    std::vector<float> v(count);
    for (int64_t i = 0; i < count; ++i) v[i] = (r % 3 == 1 ? 1e7f : 0.5f) / float(1 + (i + r) % 11);
    in.push_back(Tensor::FromVector<float>(v, TensorShape{count}));
  }
  std::vector<float> want(count);
  for (int64_t i = 0; i < count; ++i) {
    float acc = in[0].data<float>()[i];
    for (int r = 1; r < n; ++r) acc += in[r].data<float>()[i];
    want[i] = acc;
  }
  for (int step = 1; step <= 40; ++step) {
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnRanks(n, [&](int r) {
      CollectiveParams p = Params(CollectiveType::kAllReduce, n, 1, r, TensorShape{count});
      p.step_id = step;
      out[r] = ce.Execute(p, in[r], CpuAllocator(), nullptr);
    });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(out[r].ok()) << out[r].status();
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[0]->data<float>()[i], want[i]) << "step " << step << " element " << i;
    }
  }
}

TEST(LocalCollectiveExecutorTest, AutoAllReduceSharesOneOutputBufferThatKernelsCannotOverwrite) {
  // Direct all-reduce: every rank's output is the same host buffer, so its
  // refcount is above one while two ranks hold it and
  // forward_input_or_allocate_output never writes into it in place.
  LocalCollectiveExecutor ce;
  constexpr int n = 4;
  std::vector<absl::StatusOr<Tensor>> out(n);
  OnRanks(n, [&](int r) {
    CollectiveParams p = Params(CollectiveType::kAllReduce, n, 1, r, TensorShape{1000});
    Tensor x(DT_FLOAT, TensorShape{1000});
    for (int i = 0; i < 1000; ++i) x.data<float>()[i] = float(r * i);
    out[r] = ce.Execute(p, x, CpuAllocator(), nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    EXPECT_EQ(out[r]->raw_data(), out[0]->raw_data());
    EXPECT_FALSE(out[r]->RefCountIsOne());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[r]->data<float>()[i], float(6 * i));
  }
}

TEST(LocalCollectiveExecutorTest, AllGatherConcatenatesInDeviceNameOrder) {
  LocalCollectiveExecutor ce;
  constexpr int n = 3;
  std::vector<absl::StatusOr<Tensor>> out(n);
  // Ranks come from the sorted device names, not from arrival order.
  OnRanks(n, [&](int r) {
    const int device = n - 1 - r;
    Tensor x = Tensor::FromVector<int32_t>({device, device * 10}, TensorShape{1, 2});
    out[r] = ce.Execute(Params(CollectiveType::kAllGather, n, 1, device, TensorShape{1, 2}, DT_INT32), x,
                        CpuAllocator(), nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    EXPECT_EQ(out[r]->shape(), TensorShape({3, 2}));
    EXPECT_EQ(std::vector<int32_t>(out[r]->data<int32_t>(), out[r]->data<int32_t>() + 6),
              std::vector<int32_t>({0, 0, 1, 10, 2, 20}));
  }
}

TEST(LocalCollectiveExecutorTest, ReduceScatterGivesEachDeviceItsBlockWithEveryHint) {
  for (const char* hint : {"auto", "ring", "direct"}) {
    SCOPED_TRACE(hint);
    LocalCollectiveExecutor ce;
    constexpr int n = 3;
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnRanks(n, [&](int r) {
      // Input r: [6, 1] of r * 10 + i.
      std::vector<int64_t> x(6);
      for (int i = 0; i < 6; ++i) x[i] = r * 10 + i;
      CollectiveParams p = Params(CollectiveType::kReduceScatter, n, 1, r, TensorShape{6, 1}, DT_INT64);
      p.merge_op = MergeOp::kAdd;
      p.communication_hint = hint;
      out[r] = ce.Execute(p, Tensor::FromVector(x, TensorShape{6, 1}), CpuAllocator(), nullptr);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(out[r].ok()) << out[r].status();
      EXPECT_EQ(out[r]->shape(), TensorShape({2, 1}));
      // Sum over ranks of rank * 10 + i, for i = 2r, 2r + 1: 30 + 3i.
      EXPECT_EQ(std::vector<int64_t>(out[r]->data<int64_t>(), out[r]->data<int64_t>() + 2),
                std::vector<int64_t>({30 + 6 * r, 33 + 6 * r}));
    }
  }
  LocalCollectiveExecutor ce;
  auto bad = ce.Execute(Params(CollectiveType::kReduceScatter, 4, 2, 0, TensorShape{6}, DT_FLOAT),
                        Tensor(DT_FLOAT, TensorShape{6}), CpuAllocator(), nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("4 equal blocks"), std::string::npos) << bad.status();
}

TEST(LocalCollectiveExecutorTest, LargeReduceScatterAndAllGatherAreExactWithEveryHint) {
  // Many chunks per block (the direct job's chunks stay within a block):
  // every rank's block of the sum, then every block gathered back, for the
  // auto (direct) and ring algorithms; all-gather of half too.
  constexpr int n = 4;
  constexpr int64_t kBlock = 100003;
  for (const char* hint : {"auto", "ring"}) {
    SCOPED_TRACE(hint);
    LocalCollectiveExecutor ce;
    std::vector<absl::StatusOr<Tensor>> rs(n), ag(n), ag_half(n);
    OnRanks(n, [&](int r) {
      Tensor x(DT_FLOAT, TensorShape{n * kBlock});
      for (int64_t i = 0; i < n * kBlock; ++i) x.data<float>()[i] = static_cast<float>(r + 1) * (i % 1000);
      CollectiveParams p = Params(CollectiveType::kReduceScatter, n, 1, r, x.shape(), DT_FLOAT);
      p.merge_op = MergeOp::kAdd;
      p.communication_hint = hint;
      rs[r] = ce.Execute(p, x, CpuAllocator(), nullptr);
      if (!rs[r].ok()) return;
      CollectiveParams g = Params(CollectiveType::kAllGather, n, 2, r, TensorShape{kBlock}, DT_FLOAT);
      g.communication_hint = hint;
      ag[r] = ce.Execute(g, *rs[r], CpuAllocator(), nullptr);
      Tensor h(DT_HALF, TensorShape{kBlock});
      for (int64_t i = 0; i < kBlock; ++i) h.data<Eigen::half>()[i] = Eigen::half(static_cast<float>(r * 100 + i % 7));
      CollectiveParams gh = Params(CollectiveType::kAllGather, n, 3, r, TensorShape{kBlock}, DT_HALF);
      gh.communication_hint = hint;
      ag_half[r] = ce.Execute(gh, h, CpuAllocator(), nullptr);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(rs[r].ok()) << rs[r].status();
      ASSERT_TRUE(ag[r].ok()) << ag[r].status();
      ASSERT_TRUE(ag_half[r].ok()) << ag_half[r].status();
      ASSERT_EQ(rs[r]->NumElements(), kBlock);
      for (int64_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(rs[r]->data<float>()[i], 10.0f * ((r * kBlock + i) % 1000)) << r << " " << i;
      }
      ASSERT_EQ(ag[r]->NumElements(), n * kBlock);
      for (int64_t i = 0; i < n * kBlock; ++i) ASSERT_EQ(ag[r]->data<float>()[i], 10.0f * (i % 1000)) << i;
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < kBlock; i += 997) {
          ASSERT_EQ(static_cast<float>(ag_half[r]->data<Eigen::half>()[q * kBlock + i]),
                    static_cast<float>(q * 100 + i % 7));
        }
      }
    }
  }
}

TEST(LocalCollectiveExecutorTest, BroadcastFromAnyDevice) {
  LocalCollectiveExecutor ce;
  constexpr int n = 4;
  for (int sender = 0; sender < n; ++sender) {
    std::vector<absl::StatusOr<Tensor>> out(n);
    OnRanks(n, [&](int r) {
      const bool send = r == sender;
      CollectiveParams p = Params(send ? CollectiveType::kBroadcastSend : CollectiveType::kBroadcastRecv,
                                  n, sender, r, TensorShape{3});
      out[r] = ce.Execute(p, send ? Tensor::FromVector<float>({7, 8, float(sender)}) : Tensor(),
                          CpuAllocator(), nullptr);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(out[r].ok()) << out[r].status();
      EXPECT_EQ(out[r]->data<float>()[2], float(sender));
    }
  }
}

TEST(LocalCollectiveExecutorTest, InterleavedInstancesMeetTheirOwnPeers) {
  LocalCollectiveExecutor ce;
  constexpr int n = 4;
  std::vector<Tensor> got_a(n), got_b(n);
  OnRanks(n, [&](int r) {
    // Even ranks start instance 1 first, odd ranks instance 2: they must not mix.
    Notification done_a, done_b;
    auto run = [&](int instance, Tensor* got, Notification* done) {
      ce.ExecuteAsync(Params(CollectiveType::kAllReduce, n, instance, r, TensorShape{1}),
                      Tensor::FromVector<float>({instance == 1 ? 1.0f : 100.0f}), CpuAllocator(),
                      nullptr, [got, done](absl::Status s, Tensor t) {
                        EXPECT_TRUE(s.ok()) << s;
                        *got = t;
                        done->Notify();
                      });
    };
    if (r % 2 == 0) {
      run(1, &got_a[r], &done_a);
      run(2, &got_b[r], &done_b);
    } else {
      run(2, &got_b[r], &done_b);
      run(1, &got_a[r], &done_a);
    }
    done_a.WaitForNotification();
    done_b.WaitForNotification();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got_a[r].data<float>()[0], 4.0f);
    EXPECT_EQ(got_b[r].data<float>()[0], 400.0f);
  }
}

TEST(LocalCollectiveExecutorTest, InstanceKeysAreReusedStepAfterStep) {
  LocalCollectiveExecutor ce;
  constexpr int n = 3;
  OnRanks(n, [&](int r) {
    for (int step = 1; step <= 100; ++step) {
      CollectiveParams p = Params(CollectiveType::kAllReduce, n, 5, r, TensorShape{1});
      p.step_id = step;
      auto out = ce.Execute(p, Tensor::FromVector<float>({float(step)}), CpuAllocator(), nullptr);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->data<float>()[0], 3.0f * step);
    }
  });
  // Threads are reused, not one per collective (that would be 200). A
  // thread that has just run its rank's part may not be idle yet when the
  // next step schedules, so the pool may grow past n; it stays far below.
  EXPECT_LT(ce.num_worker_threads(), 40);
}

TEST(LocalCollectiveExecutorTest, TimeoutNamesTheMissingRank) {
  LocalCollectiveExecutor ce;
  constexpr int n = 4;
  // One full round resolves the group's members.
  OnRanks(n, [&](int r) {
    ASSERT_TRUE(ce.Execute(Params(CollectiveType::kAllReduce, n, 1, r, TensorShape{1}),
                           Tensor::FromVector<float>({1}), CpuAllocator(), nullptr).ok());
  });
  std::vector<absl::Status> status(n - 1);
  OnRanks(n - 1, [&](int r) {  // CPU:3 never comes
    CollectiveParams p = Params(CollectiveType::kAllReduce, n, 2, r, TensorShape{1});
    p.timeout_seconds = 0.2f;
    status[r] = ce.Execute(p, Tensor::FromVector<float>({1}), CpuAllocator(), nullptr).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("missing " + Dev(3) + " (rank 3)"), std::string::npos) << s;
    EXPECT_NE(s.message().find("instance 2"), std::string::npos) << s;
  }
}

TEST(LocalCollectiveExecutorTest, AShortTimeoutFiresWhileALongerOneIsPending) {
  // One deadline check serves every instance: an instance with a short
  // timeout, created after one with a long timeout, and another after the
  // first check has fired, both time out on their own deadlines.
  LocalCollectiveExecutor ce;
  CancellationManager cm;
  Notification long_done;
  absl::Status long_status;
  CollectiveParams slow = Params(CollectiveType::kAllReduce, 2, 1, 0, TensorShape{1});
  slow.timeout_seconds = 600;
  ce.ExecuteAsync(slow, Tensor::FromVector<float>({1}), CpuAllocator(), &cm,
                  [&](absl::Status s, Tensor) {
                    long_status = s;
                    long_done.Notify();
                  });
  for (int instance : {2, 3}) {
    CollectiveParams p = Params(CollectiveType::kAllReduce, 2, instance, 0, TensorShape{1});
    p.timeout_seconds = 0.1f;
    auto out = ce.Execute(p, Tensor::FromVector<float>({1}), CpuAllocator(), nullptr);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    EXPECT_NE(out.status().message().find(absl::StrCat("instance ", instance)), std::string::npos)
        << out.status();
  }
  cm.StartCancel(absl::CancelledError("test over"));
  long_done.WaitForNotification();
  EXPECT_EQ(long_status.code(), absl::StatusCode::kCancelled) << long_status;
}

TEST(LocalCollectiveExecutorTest, TimeoutBeforeTheGroupIsKnownSaysSo) {
  LocalCollectiveExecutorOptions opts;
  opts.default_timeout = absl::Milliseconds(200);
  LocalCollectiveExecutor ce(opts);
  auto out = ce.Execute(Params(CollectiveType::kAllReduce, 2, 1, 0, TensorShape{1}),
                        Tensor::FromVector<float>({1}), CpuAllocator(), nullptr);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.status().message().find("1 of 2 participants never arrived"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("arrived: " + Dev(0)), std::string::npos) << out.status();
}

TEST(LocalCollectiveExecutorTest, CancellingOneStepFailsTheWaitingParticipants) {
  LocalCollectiveExecutor ce;
  CancellationManager cm;
  std::vector<absl::Status> status(2);
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(50));
    cm.StartCancel(absl::CancelledError("step 9 cancelled"));
  });
  OnRanks(2, [&](int r) {  // 2 of 3 arrive
    status[r] = ce.Execute(Params(CollectiveType::kAllReduce, 3, 1, r, TensorShape{1}),
                           Tensor::FromVector<float>({1}), CpuAllocator(), r == 0 ? &cm : nullptr)
                    .status();
  });
  canceller.join();
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    EXPECT_NE(s.message().find("step 9 cancelled"), std::string::npos) << s;
  }
  // An already-cancelled step fails at once.
  auto late = ce.Execute(Params(CollectiveType::kAllReduce, 3, 2, 0, TensorShape{1}),
                         Tensor::FromVector<float>({1}), CpuAllocator(), &cm);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kCancelled);
}

TEST(LocalCollectiveExecutorTest, MismatchedShapesOrDtypesNameTheDevices) {
  LocalCollectiveExecutor ce;
  std::vector<absl::Status> status(2);
  OnRanks(2, [&](int r) {
    TensorShape shape = r == 0 ? TensorShape{3} : TensorShape{4};
    Tensor x(DT_FLOAT, shape);
    status[r] = ce.Execute(Params(CollectiveType::kAllReduce, 2, 1, r, shape), x, CpuAllocator(), nullptr)
                    .status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(Dev(0)), std::string::npos) << s;
    EXPECT_NE(s.message().find(Dev(1)), std::string::npos) << s;
  }
  OnRanks(2, [&](int r) {
    DataType dt = r == 0 ? DT_FLOAT : DT_DOUBLE;
    Tensor x(dt, TensorShape{2});
    status[r] = ce.Execute(Params(CollectiveType::kAllReduce, 2, 2, r, TensorShape{2}, dt), x,
                           CpuAllocator(), nullptr).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("double"), std::string::npos) << s;
  }
}

TEST(LocalCollectiveExecutorTest, GroupErrorsAreInvalidArgument) {
  LocalCollectiveExecutor ce;
  OnRanks(2, [&](int r) {
    ASSERT_TRUE(ce.Execute(Params(CollectiveType::kAllReduce, 2, 1, r, TensorShape{1}),
                           Tensor::FromVector<float>({1}), CpuAllocator(), nullptr).ok());
  });
  // Another size for the same group.
  auto s1 = ce.Execute(Params(CollectiveType::kAllReduce, 3, 2, 0, TensorShape{1}),
                       Tensor::FromVector<float>({1}), CpuAllocator(), nullptr);
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kInvalidArgument) << s1.status();
  // A device that is not a member.
  auto s2 = ce.Execute(Params(CollectiveType::kAllReduce, 2, 2, 5, TensorShape{1}),
                       Tensor::FromVector<float>({1}), CpuAllocator(), nullptr);
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument) << s2.status();
  EXPECT_NE(s2.status().message().find("not a member"), std::string::npos) << s2.status();
}

TEST(LocalCollectiveExecutorTest, BroadcastNeedsExactlyOneSender) {
  LocalCollectiveExecutor ce;
  std::vector<absl::Status> status(2);
  OnRanks(2, [&](int r) {
    status[r] = ce.Execute(Params(CollectiveType::kBroadcastRecv, 2, 1, r, TensorShape{1}), Tensor(),
                           CpuAllocator(), nullptr).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("exactly one sender"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace strata
