// The N-rank harness: every registered algorithm, with 1, 2, 3, 4 and 8
// ranks in one process (a thread per rank) over InProcessTransport, checked
// against a reference computed directly.
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/types.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/algorithms/all_reduce_direct.h"
#include "runtime/collective/algorithms/all_reduce_recursive_doubling.h"
#include "runtime/collective/reduction.h"
#include "runtime/collective/transport/in_process_transport.h"

namespace strata {
namespace {

constexpr int kRankCounts[] = {1, 2, 3, 4, 6, 8};

// Runs `name` on `n` ranks; rank r reads inputs[r] (empty: no input) and
// writes outputs[r] (pre-sized). Returns each rank's status.
std::vector<absl::Status> RunRanks(CollectiveType type, const std::string& name, AlgorithmParams base,
                                   const std::vector<std::vector<char>>& inputs,
                                   std::vector<std::vector<char>>* outputs) {
  const int n = base.size;
  auto mailbox = std::make_shared<InProcessMailbox>(n);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      AlgorithmParams p = base;
      p.type = type;
      p.rank = r;
      p.same_address_space = true;  // every rank is a thread here
      auto alg = CreateCollectiveAlgorithm(type, name, p);
      if (!alg.ok()) {
        status[r] = alg.status();
        mailbox->Abort(status[r]);
        return;
      }
      auto t = mailbox->Connect(r);
      status[r] = (*alg)->Run(*t, inputs[r].empty() ? nullptr : inputs[r].data(), (*outputs)[r].data());
      if (!status[r].ok()) mailbox->Abort(status[r]);
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

// Small integer values keep every merge exact in floating point, so every
// algorithm's result must equal the reference exactly whatever its order.
template <typename T>
T InputValue(int rank, int64_t i, MergeOp op) {
  if (op == MergeOp::kMul) return static_cast<T>(1 + (rank + i) % 3);
  return static_cast<T>(((rank * 7 + i * 13) % 41) - 20);
}

// Every rank's input of `count` elements (InputValue) into *in, and the
// reference all-reduce of them: merged in rank order, then final_op.
template <typename T>
std::vector<T> Inputs(int n, int64_t count, MergeOp op, FinalOp final_op,
                      std::vector<std::vector<char>>* in) {
  in->assign(n, std::vector<char>(count * sizeof(T) + 1));
  std::vector<T> expected(count);
  for (int r = 0; r < n; ++r) {
    T* x = reinterpret_cast<T*>((*in)[r].data());
    for (int64_t i = 0; i < count; ++i) {
      x[i] = InputValue<T>(r, i, op);
      T& e = expected[i];
      if (r == 0) {
        e = x[i];
      } else {
        switch (op) {
          case MergeOp::kAdd: e = e + x[i]; break;
          case MergeOp::kMul: e = e * x[i]; break;
          case MergeOp::kMin: e = std::min(e, x[i]); break;
          case MergeOp::kMax: e = std::max(e, x[i]); break;
        }
      }
    }
  }
  if (final_op == FinalOp::kDiv) {
    for (T& e : expected) e /= static_cast<T>(n);
  }
  return expected;
}

// `dtype` is T's (given for Eigen::half and Eigen::bfloat16, which have no
// DataTypeToEnum).
template <typename T>
void CheckAllReduce(const std::string& alg, int n, int64_t count, MergeOp op, FinalOp final_op,
                    DataType dtype = DataTypeToEnum<T>::value) {
  SCOPED_TRACE(absl::StrCat(alg, " n=", n, " count=", count, " op=", MergeOpName(op),
                            final_op == FinalOp::kDiv ? " Div " : " Id ", DataTypeString(dtype)));
  std::vector<std::vector<char>> in, out(n, std::vector<char>(count * sizeof(T) + 1));
  const std::vector<T> expected = Inputs<T>(n, count, op, final_op, &in);
  AlgorithmParams p;
  p.size = n;
  p.dtype = dtype;
  p.num_elements = count;
  p.merge_op = op;
  p.final_op = final_op;
  auto status = RunRanks(CollectiveType::kAllReduce, alg, p, in, &out);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    const T* y = reinterpret_cast<const T*>(out[r].data());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(static_cast<double>(y[i]), static_cast<double>(expected[i]))
          << "rank " << r << " element " << i;
    }
  }
}

class AllReduceTest : public ::testing::TestWithParam<std::string> {};

// Whether `algorithm` runs on groups of n ranks (the recursive ones: 2^k).
bool RunsOn(const std::string& algorithm, int n) {
  return !absl::StartsWith(algorithm, "recursive_") || (n & (n - 1)) == 0;
}

TEST_P(AllReduceTest, EveryMergeOpFinalOpAndSizeMatchesTheReference) {
  // Sizes: empty, one element, fewer elements than ranks, not divisible by
  // any rank count, and a large one.
  for (int n : kRankCounts) {
    if (!RunsOn(GetParam(), n)) continue;
    for (int64_t count : {0, 1, 5, 1001, 65537}) {
      for (MergeOp op : {MergeOp::kAdd, MergeOp::kMul, MergeOp::kMin, MergeOp::kMax}) {
        for (FinalOp f : {FinalOp::kId, FinalOp::kDiv}) {
          CheckAllReduce<float>(GetParam(), n, count, op, f);
        }
      }
    }
  }
}

TEST_P(AllReduceTest, EveryElementType) {
  for (int n : {3, 4}) {
    if (!RunsOn(GetParam(), n)) continue;
    for (FinalOp f : {FinalOp::kId, FinalOp::kDiv}) {
      CheckAllReduce<double>(GetParam(), n, 777, MergeOp::kAdd, f);
      CheckAllReduce<int32_t>(GetParam(), n, 777, MergeOp::kAdd, f);  // Div truncates
      CheckAllReduce<int64_t>(GetParam(), n, 777, MergeOp::kMax, f);
      CheckAllReduce<int64_t>(GetParam(), n, 777, MergeOp::kMul, f);
      // Small integers are exact in both narrow types, so the result must
      // be too whatever the order of the merges.
      for (MergeOp op : {MergeOp::kAdd, MergeOp::kMul, MergeOp::kMax}) {
        CheckAllReduce<Eigen::half>(GetParam(), n, 5001, op, f, DT_HALF);
        CheckAllReduce<Eigen::bfloat16>(GetParam(), n, 5001, op, f, DT_BFLOAT16);
      }
    }
  }
}

TEST_P(AllReduceTest, UnsupportedDtypeIsUnimplemented) {
  AlgorithmParams p;
  p.dtype = DT_BOOL;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, GetParam(), p);
  EXPECT_EQ(alg.status().code(), absl::StatusCode::kUnimplemented);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AllReduceTest,
                         ::testing::Values("ring", "reduce_to_one", "direct",
                                           "recursive_doubling"));

// Reduce-scatter: the reference all-reduce's block r on rank r.
template <typename T>
void CheckReduceScatter(const std::string& alg, int n, int64_t block, MergeOp op, FinalOp final_op,
                        DataType dtype = DataTypeToEnum<T>::value) {
  SCOPED_TRACE(absl::StrCat(alg, " reduce-scatter n=", n, " block=", block, " op=", MergeOpName(op),
                            final_op == FinalOp::kDiv ? " Div " : " Id ", DataTypeString(dtype)));
  const int64_t count = block * n;
  std::vector<std::vector<char>> in, out(n, std::vector<char>(block * sizeof(T) + 1));
  const std::vector<T> expected = Inputs<T>(n, count, op, final_op, &in);
  AlgorithmParams p;
  p.size = n;
  p.dtype = dtype;
  p.num_elements = count;
  p.merge_op = op;
  p.final_op = final_op;
  auto status = RunRanks(CollectiveType::kReduceScatter, alg, p, in, &out);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    const T* y = reinterpret_cast<const T*>(out[r].data());
    for (int64_t i = 0; i < block; ++i) {
      ASSERT_EQ(static_cast<double>(y[i]), static_cast<double>(expected[r * block + i]))
          << "rank " << r << " element " << i;
    }
  }
}

class ReduceScatterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReduceScatterTest, EveryMergeOpFinalOpAndSizeMatchesTheReference) {
  for (int n : kRankCounts) {
    if (!RunsOn(GetParam(), n)) continue;
    for (int64_t block : {0, 1, 5, 1001, 65537}) {
      for (MergeOp op : {MergeOp::kAdd, MergeOp::kMul, MergeOp::kMin, MergeOp::kMax}) {
        for (FinalOp f : {FinalOp::kId, FinalOp::kDiv}) CheckReduceScatter<float>(GetParam(), n, block, op, f);
      }
    }
  }
}

TEST_P(ReduceScatterTest, EveryElementType) {
  for (int n : {3, 4}) {
    if (!RunsOn(GetParam(), n)) continue;
    for (FinalOp f : {FinalOp::kId, FinalOp::kDiv}) {
      CheckReduceScatter<double>(GetParam(), n, 777, MergeOp::kAdd, f);
      CheckReduceScatter<int32_t>(GetParam(), n, 777, MergeOp::kAdd, f);
      CheckReduceScatter<int64_t>(GetParam(), n, 777, MergeOp::kMax, f);
      for (MergeOp op : {MergeOp::kAdd, MergeOp::kMul, MergeOp::kMax}) {
        CheckReduceScatter<Eigen::half>(GetParam(), n, 1001, op, f, DT_HALF);
        CheckReduceScatter<Eigen::bfloat16>(GetParam(), n, 1001, op, f, DT_BFLOAT16);
      }
    }
  }
}

TEST_P(ReduceScatterTest, AnInputThatDoesNotSplitAndUnsupportedDtypesAreRefused) {
  AlgorithmParams p;
  p.type = CollectiveType::kReduceScatter;
  p.size = 4;
  p.dtype = DT_FLOAT;
  p.num_elements = 10;
  p.same_address_space = true;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kReduceScatter, GetParam(), p);
  EXPECT_EQ(alg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(alg.status().message().find("10 elements do not split into 4 equal blocks"),
            std::string::npos)
      << alg.status();
  p.num_elements = 8;
  p.dtype = DT_BOOL;
  alg = CreateCollectiveAlgorithm(CollectiveType::kReduceScatter, GetParam(), p);
  EXPECT_EQ(alg.status().code(), absl::StatusCode::kUnimplemented);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReduceScatterTest,
                         ::testing::Values("ring", "direct", "recursive_halving"));

TEST(ReduceScatterRecursiveHalvingTest, NeedsAPowerOfTwoRanks) {
  AlgorithmParams p;
  p.size = 6;
  p.dtype = DT_FLOAT;
  p.num_elements = 12;
  auto a = CreateCollectiveAlgorithm(CollectiveType::kReduceScatter, "recursive_halving", p);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
}

TEST(ReduceScatterDirectTest, NeedsOneAddressSpace) {
  AlgorithmParams p;
  p.size = 2;
  p.dtype = DT_FLOAT;
  p.num_elements = 4;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kReduceScatter, "direct", p);
  EXPECT_EQ(alg.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The executor's way of running direct: every rank writes one shared output
// (with the inputs exchanged, and known up front as the executor gives them).
TEST(AllReduceDirectTest, RanksSharingOneOutputBufferAllSeeTheResult) {
  for (bool known_inputs : {false, true}) {
    for (int n : kRankCounts) {
      for (int64_t count : {0, 1, 7, 100003}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " count=", count, " known_inputs=", known_inputs));
        std::vector<std::vector<float>> in(n, std::vector<float>(count));
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < count; ++i) in[r][i] = float(r + i % 5);
        }
        std::vector<float> out(count, -1.0f);
        auto mailbox = std::make_shared<InProcessMailbox>(n);
        std::vector<absl::Status> status(n);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            AlgorithmParams p;
            p.rank = r;
            p.size = n;
            p.dtype = DT_FLOAT;
            p.num_elements = count;
            p.final_op = FinalOp::kDiv;
            p.same_address_space = true;
            if (known_inputs) {
              for (int q = 0; q < n; ++q) p.peer_inputs.push_back(in[q].data());
            }
            auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "direct", p);
            status[r] = alg.ok() ? (*alg)->Run(*mailbox->Connect(r), in[r].data(), out.data())
                                 : alg.status();
          });
        }
        for (auto& t : threads) t.join();
        for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << status[r];
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[i], float(n * (i % 5) + n * (n - 1) / 2) / float(n)) << i;
        }
      }
    }
  }
}

TEST(AllReduceDirectTest, NeedsOneAddressSpace) {
  AlgorithmParams p;
  p.size = 2;
  p.dtype = DT_FLOAT;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "direct", p);
  EXPECT_EQ(alg.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AllReduceDirectTest, AbortReachesRanksWaitingForAPeer) {
  // Rank 1 never runs: rank 0 waits for its address until the abort.
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  AlgorithmParams p;
  p.size = 2;
  p.dtype = DT_FLOAT;
  p.num_elements = 10;
  p.same_address_space = true;
  std::vector<float> x(10), y(10);
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "direct", p);
  ASSERT_TRUE(alg.ok()) << alg.status();
  std::thread aborter([&] { mailbox->Abort(absl::CancelledError("step cancelled")); });
  absl::Status s = (*alg)->Run(*mailbox->Connect(0), x.data(), y.data());
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
}

// Inputs whose float sum depends on the order of the additions, so that a
// chunk reduced in another order would show.
std::vector<std::vector<float>> OrderSensitiveInputs(int n, int64_t count) {
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) in[r][i] = (r % 2 ? 1e8f : 1.0f) / float(1 + (i + r) % 7);
  }
  return in;
}

TEST(DirectReductionTest, AnyNumberOfThreadsGivesBitwiseTheRankOrderReduction) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t count : {0, 1, 4097, 3 * (1 << 20) + 5}) {  // up to 12 MiB: many chunks
      SCOPED_TRACE(absl::StrCat("threads=", threads, " count=", count));
      const int n = 3;
      std::vector<std::vector<float>> in = OrderSensitiveInputs(n, count);
      std::vector<const void*> ptrs;
      for (auto& v : in) ptrs.push_back(v.data());
      std::vector<float> want(count), got(count, -1.0f);
      ReduceInputs(MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT, ptrs.data(), n, 0, count, want.data(), n);
      DirectReduction job(MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT, ptrs, count, got.data(), n);
      std::vector<std::thread> ts;
      std::vector<int64_t> taken(threads);
      for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { taken[t] = job.Work(); });
      job.WaitDone();
      for (auto& t : ts) t.join();
      EXPECT_TRUE(job.Done());
      EXPECT_TRUE(job.status().ok()) << job.status();
      int64_t total = 0;
      for (int64_t k : taken) total += k;
      EXPECT_EQ(total, job.num_chunks());
      if (count > 0) {
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), count * sizeof(float)));
      }
    }
  }
}

TEST(DirectReductionTest, WaitDoneWaitsForAChunkAnotherThreadIsReducing) {
  // The waiter takes no chunk itself: WaitDone must return only once the
  // worker has written every chunk.
  const int64_t count = 4 << 20;
  std::vector<std::vector<float>> in = OrderSensitiveInputs(2, count);
  std::vector<const void*> ptrs = {in[0].data(), in[1].data()};
  std::vector<float> want(count), got(count, -1.0f);
  ReduceInputs(MergeOp::kMax, FinalOp::kId, DT_FLOAT, ptrs.data(), 2, 0, count, want.data(), 2);
  DirectReduction job(MergeOp::kMax, FinalOp::kId, DT_FLOAT, ptrs, count, got.data(), 2);
  std::thread worker([&] { job.Work(); });
  job.WaitDone();
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), count * sizeof(float)));
  worker.join();
}

TEST(DirectReductionTest, AbortSkipsTheChunksNotYetTakenAndSaysWhy) {
  const int64_t count = 1 << 20;
  std::vector<float> a(count, 1.0f), b(count, 2.0f), out(count, -1.0f);
  DirectReduction job(MergeOp::kAdd, FinalOp::kId, DT_FLOAT, {a.data(), b.data()}, count,
                      out.data(), 2);
  ASSERT_GT(job.num_chunks(), 1);
  job.Abort(absl::DeadlineExceededError("timed out"));
  job.Abort(absl::CancelledError("second abort loses"));
  EXPECT_EQ(job.Work(), job.num_chunks());  // every chunk taken, none reduced
  job.WaitDone();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kDeadlineExceeded) << job.status();
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[count - 1], -1.0f);
}

class AllGatherTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AllGatherTest, BlocksArriveInRankOrder) {
  const std::string algorithm = GetParam();
  for (int n : kRankCounts) {
    if (!RunsOn(algorithm, n)) continue;
    for (int64_t count : {0, 1, 3, 1000}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " count=", count));
      std::vector<std::vector<char>> in(n, std::vector<char>(count * 8 + 1));
      std::vector<std::vector<char>> out(n, std::vector<char>(n * count * 8 + 1));
      for (int r = 0; r < n; ++r) {
        for (int64_t i = 0; i < count; ++i) reinterpret_cast<int64_t*>(in[r].data())[i] = r * 100000 + i;
      }
      AlgorithmParams p;
      p.size = n;
      p.dtype = DT_INT64;
      p.num_elements = count;
      auto status = RunRanks(CollectiveType::kAllGather, algorithm, p, in, &out);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(status[r].ok()) << status[r];
        const int64_t* y = reinterpret_cast<const int64_t*>(out[r].data());
        for (int b = 0; b < n; ++b) {
          for (int64_t i = 0; i < count; ++i) ASSERT_EQ(y[b * count + i], b * 100000 + i);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AllGatherTest,
                         ::testing::Values("ring", "recursive_doubling"));

TEST(AllGatherRecursiveDoublingTest, NeedsAPowerOfTwoRanks) {
  AlgorithmParams p;
  p.size = 3;
  p.dtype = DT_FLOAT;
  auto a = CreateCollectiveAlgorithm(CollectiveType::kAllGather, "recursive_doubling", p);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
  p.size = 8;
  EXPECT_TRUE(CreateCollectiveAlgorithm(CollectiveType::kAllGather, "recursive_doubling", p).ok());
}

TEST(BroadcastTreeTest, EveryRootReachesEveryRank) {
  for (int n : kRankCounts) {
    for (int root = 0; root < n; ++root) {
      for (int64_t count : {0, 1, 4099}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " root=", root, " count=", count));
        std::vector<std::vector<char>> in(n), out(n, std::vector<char>(count * 4 + 1, 0));
        in[root].resize(count * 4 + 1);
        for (int64_t i = 0; i < count; ++i) reinterpret_cast<float*>(in[root].data())[i] = i * 0.5f + root;
        AlgorithmParams p;
        p.size = n;
        p.root = root;
        p.dtype = DT_FLOAT;
        p.num_elements = count;
        std::vector<absl::Status> status(n);
        // Receivers run as kBroadcastRecv, the root as kBroadcastSend: one algorithm.
        auto s = RunRanks(CollectiveType::kBroadcastSend, "tree", p, in, &out);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(s[r].ok()) << s[r];
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(reinterpret_cast<const float*>(out[r].data())[i], i * 0.5f + root) << "rank " << r;
          }
        }
      }
    }
  }
}

TEST(AlgorithmRegistryTest, SelectionDependsOnlyOnGroupWideValues) {
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "ring", 2, 8), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "local", 4, 1 << 30), "reduce_to_one");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 4, 8), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "nccl", 4, 8), "ring");  // CPU: auto
  // In one address space auto (and nccl) all-reduce reads the peers' inputs
  // directly; ring and reduce_to_one stay selectable.
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 4, 8, true), "direct");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "nccl", 2, 1 << 26, true), "direct");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "ring", 4, 8, true), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "local", 4, 8, true), "reduce_to_one");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "direct", 4, 8, false), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 4, 8, true), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "reduce_to_one", 4, 8), "ring");
  // Over TCP, groups of 2^k ranks gather by recursive doubling, others by the ring.
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 4, 8, false, "tcp"),
            "recursive_doubling");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 2, 1 << 26, false, "tcp"),
            "recursive_doubling");
  // Past 4 MiB a rank, the ring at 4 ranks; recursive doubling at 2 ranks whatever the size.
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 4, int64_t{4} << 20, false, "tcp"),
            "recursive_doubling");
  EXPECT_EQ(
      *SelectAlgorithm(CollectiveType::kAllGather, "auto", 4, (int64_t{4} << 20) + 1, false, "tcp"),
      "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 8, int64_t{1} << 26, false, "tcp"),
            "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 3, 8, false, "tcp"), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kReduceScatter, "auto", 4, 8, false, "tcp"),
            "recursive_halving");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kReduceScatter, "auto", 6, 8, false, "tcp"), "ring");
  // Small all-reduces over TCP by recursive doubling (2^k ranks), up to its bound.
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 4,
                             AllReduceRecursiveDoubling::kMaxBytes, false, "tcp"),
            "recursive_doubling");
  EXPECT_NE(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 4,
                             AllReduceRecursiveDoubling::kMaxBytes + 1, false, "tcp"),
            "recursive_doubling");
  EXPECT_NE(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 3, 8, false, "tcp"),
            "recursive_doubling");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kBroadcastRecv, "auto", 4, 8), "tree");
  EXPECT_EQ(SelectAlgorithm(CollectiveType::kAllReduce, "carrier_pigeon", 4, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCollectiveAlgorithm(CollectiveType::kAllGather, "nope", {}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata
