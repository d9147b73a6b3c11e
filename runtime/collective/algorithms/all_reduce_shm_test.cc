// AllReduceShm over real ShmTransports (ranks as threads and as processes)
// against a reference computed here; plus all-gather and broadcast through
// the generic algorithms over the same transport.
#include "runtime/collective/algorithms/all_reduce_shm.h"

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/types.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/collective/transport/shm_test_util.h"
#include "runtime/collective/transport/shm_transport.h"

namespace strata {
namespace {

using shm_test::Mode;
using shm_test::RunRanks;
using shm_test::UniquePrefix;

// Small integers keep every merge exact, so results must equal the
// reference exactly.
template <typename T>
T InputValue(int rank, int64_t i, MergeOp op) {
  if (op == MergeOp::kMul) return static_cast<T>(1 + (rank + i) % 3);
  return static_cast<T>(((rank * 7 + i * 13) % 41) - 20);
}

template <typename T>
T Merge(MergeOp op, T a, T b) {
  switch (op) {
    case MergeOp::kAdd: return a + b;
    case MergeOp::kMul: return a * b;
    case MergeOp::kMin: return std::min(a, b);
    case MergeOp::kMax: return std::max(a, b);
  }
  return a;
}

// Runs an all-reduce of `elements` on n ranks and checks every rank's
// output itself (a child process cannot use gtest's expectations).
template <typename T>
void CheckAllReduce(Mode mode, int n, int64_t elements, MergeOp op, FinalOp final_op,
                    size_t chunk_bytes = size_t{256} << 10) {
  SCOPED_TRACE(absl::StrCat(n, " ranks, ", elements, " elements, ", DataTypeString(DataTypeToEnum<T>::value),
                            " op ", static_cast<int>(op), " final ", static_cast<int>(final_op)));
  ShmTransportOptions options;
  options.key_prefix = UniquePrefix("ar");
  options.chunk_bytes = chunk_bytes;
  auto statuses = RunRanks(mode, n, options, [&](int rank, Transport& t) -> absl::Status {
    AlgorithmParams p;
    p.rank = rank;
    p.size = n;
    p.dtype = DataTypeToEnum<T>::value;
    p.num_elements = elements;
    p.merge_op = op;
    p.final_op = final_op;
    auto name = SelectAlgorithm(CollectiveType::kAllReduce, "auto", n, elements * sizeof(T), false,
                                t.kind());
    if (!name.ok()) return name.status();
    if (*name != "shm") return absl::InternalError(absl::StrCat("auto picked ", *name));
    auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, *name, p);
    if (!alg.ok()) return alg.status();
    std::vector<T> in(elements), out(elements, T(-99));
    for (int64_t i = 0; i < elements; ++i) in[i] = InputValue<T>(rank, i, op);
    // Twice, so the second run reuses the workspace after the first.
    for (int run = 0; run < 2; ++run) {
      if (absl::Status s = (*alg)->Run(t, in.data(), out.data()); !s.ok()) return s;
      for (int64_t i = 0; i < elements; ++i) {
        T want = InputValue<T>(0, i, op);
        for (int q = 1; q < n; ++q) want = Merge(op, want, InputValue<T>(q, i, op));
        if (final_op == FinalOp::kDiv) want /= static_cast<T>(n);
        if (out[i] != want) {
          return absl::DataLossError(absl::StrCat("rank ", rank, " element ", i, ": got ",
                                                  out[i], " want ", want));
        }
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

class AllReduceShmTest : public ::testing::TestWithParam<Mode> {};

INSTANTIATE_TEST_SUITE_P(ThreadsAndProcesses, AllReduceShmTest,
                         ::testing::Values(Mode::kThreads, Mode::kProcesses),
                         [](const auto& info) {
                           return info.param == Mode::kThreads ? "Threads" : "Processes";
                         });

TEST_P(AllReduceShmTest, FloatSumMatchesReferenceForOddSizes) {
  for (int n : {2, 3, 4}) {
    for (int64_t elements : {0, 1, 3, 17, 1000, 65536 + 5}) {
      CheckAllReduce<float>(GetParam(), n, elements, MergeOp::kAdd, FinalOp::kId);
    }
  }
}

TEST_P(AllReduceShmTest, ManyChunks) {
  // 1 KiB chunks: 40 chunks of 256 floats, the last one partial.
  CheckAllReduce<float>(GetParam(), 3, 40 * 256 - 77, MergeOp::kAdd, FinalOp::kDiv, 1024);
}

TEST_P(AllReduceShmTest, SlicedChunksThenAWholeOne) {
  // 4 ranks, 128 KiB chunks: three chunks reduced slice by slice, then a
  // 20-byte one every rank reduces whole.
  CheckAllReduce<float>(GetParam(), 4, 3 * 32768 + 5, MergeOp::kAdd, FinalOp::kDiv, 128 << 10);
  CheckAllReduce<int64_t>(GetParam(), 3, 2 * 16384 + 1, MergeOp::kMax, FinalOp::kId, 128 << 10);
}

TEST_P(AllReduceShmTest, EveryDtypeAndOp) {
  for (MergeOp op : {MergeOp::kAdd, MergeOp::kMul, MergeOp::kMin, MergeOp::kMax}) {
    CheckAllReduce<double>(GetParam(), 3, 301, op, FinalOp::kId);
    CheckAllReduce<int32_t>(GetParam(), 2, 301, op, FinalOp::kId);
    CheckAllReduce<int64_t>(GetParam(), 4, 301, op, FinalOp::kId);
  }
  CheckAllReduce<int32_t>(GetParam(), 3, 99, MergeOp::kAdd, FinalOp::kDiv);
  CheckAllReduce<double>(GetParam(), 4, 99, MergeOp::kAdd, FinalOp::kDiv);
}

TEST_P(AllReduceShmTest, OneRankCopies) {
  CheckAllReduce<float>(GetParam(), 1, 33, MergeOp::kAdd, FinalOp::kDiv);
}

// Reduce-scatter over shared memory: "shm" (in the workspace) and "ring"
// (through the transport), rank r checking its block.
template <typename T>
void CheckReduceScatter(Mode mode, const std::string& name, int n, int64_t block, MergeOp op,
                        FinalOp final_op, size_t chunk_bytes = size_t{256} << 10) {
  SCOPED_TRACE(absl::StrCat(name, " reduce-scatter, ", n, " ranks, blocks of ", block, ", ",
                            DataTypeString(DataTypeToEnum<T>::value), " op ", static_cast<int>(op),
                            " final ", static_cast<int>(final_op)));
  ShmTransportOptions options;
  options.key_prefix = UniquePrefix("rs");
  options.chunk_bytes = chunk_bytes;
  auto statuses = RunRanks(mode, n, options, [&](int rank, Transport& t) -> absl::Status {
    AlgorithmParams p;
    p.type = CollectiveType::kReduceScatter;
    p.rank = rank;
    p.size = n;
    p.dtype = DataTypeToEnum<T>::value;
    p.num_elements = block * n;
    p.merge_op = op;
    p.final_op = final_op;
    auto alg = CreateCollectiveAlgorithm(CollectiveType::kReduceScatter, name, p);
    if (!alg.ok()) return alg.status();
    std::vector<T> in(block * n), out(block, T(-99));
    for (int64_t i = 0; i < block * n; ++i) in[i] = InputValue<T>(rank, i, op);
    for (int run = 0; run < 2; ++run) {
      if (absl::Status s = (*alg)->Run(t, in.data(), out.data()); !s.ok()) return s;
      for (int64_t i = 0; i < block; ++i) {
        const int64_t g = rank * block + i;
        T want = InputValue<T>(0, g, op);
        for (int q = 1; q < n; ++q) want = Merge(op, want, InputValue<T>(q, g, op));
        if (final_op == FinalOp::kDiv) want /= static_cast<T>(n);
        if (out[i] != want) {
          return absl::DataLossError(absl::StrCat("rank ", rank, " element ", i, ": got ", out[i],
                                                  " want ", want));
        }
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

TEST_P(AllReduceShmTest, ReduceScatterInTheWorkspaceAndAroundTheRing) {
  for (const char* name : {"shm", "ring"}) {
    for (int n : {1, 2, 3, 4}) {
      for (int64_t block : {0, 1, 17, 20000}) {
        CheckReduceScatter<float>(GetParam(), name, n, block, MergeOp::kAdd, FinalOp::kDiv);
      }
    }
    CheckReduceScatter<int64_t>(GetParam(), name, 3, 301, MergeOp::kMax, FinalOp::kId);
    CheckReduceScatter<double>(GetParam(), name, 4, 301, MergeOp::kMul, FinalOp::kId);
  }
  // 1 KiB chunks: a rank's block spans several chunks, and chunks span
  // several blocks.
  CheckReduceScatter<float>(GetParam(), "shm", 3, 1000, MergeOp::kAdd, FinalOp::kId, 1024);
  CheckReduceScatter<float>(GetParam(), "shm", 4, 50, MergeOp::kAdd, FinalOp::kId, 1024);
}

// Whether this process may read a child's memory (process_vm_readv): what
// the transport's probe should find.
bool CanReadAChild() {
  static const volatile uint64_t word = 0x1234567887654321;
  int ready[2];
  if (pipe(ready) != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    char c;
    while (read(ready[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  uint64_t seen = 0;
  iovec local{&seen, sizeof(seen)};
  iovec remote{const_cast<uint64_t*>(&word), sizeof(seen)};
  const bool ok = child > 0 && process_vm_readv(child, &local, 1, &remote, 1, 0) == sizeof(seen) &&
                  seen == word;
  const ssize_t woke = write(ready[1], "x", 1);  // the child exits either way, at the close
  (void)woke;
  close(ready[0]);
  close(ready[1]);
  if (child > 0) waitpid(child, nullptr, 0);
  return ok;
}

// Through the segment, and (blocks of 32 KiB and more, where peers' memory
// is readable) straight from the peers' inputs.
TEST_P(AllReduceShmTest, AllGatherInTheWorkspace) {
  const bool readable = CanReadAChild();
  for (bool single_copy : {true, false}) {
    for (int n : {1, 2, 3, 4}) {
      for (int64_t block : {0, 1, 17, 20000, 300000}) {
        for (size_t chunk : {size_t{1024}, size_t{256} << 10}) {
          SCOPED_TRACE(absl::StrCat("all-gather, single copy ", single_copy, ", ", n,
                                    " ranks, blocks of ", block, ", chunk ", chunk));
          ShmTransportOptions options;
          options.key_prefix = UniquePrefix("ag");
          options.chunk_bytes = chunk;
          options.single_copy = single_copy;
          const char* name = "shm";
          auto statuses =
              RunRanks(GetParam(), n, options, [&](int rank, Transport& t) -> absl::Status {
                if (t.shared_workspace()->peers_readable() != (single_copy && readable)) {
                  return absl::InternalError(
                      absl::StrCat("peers_readable() is ", t.shared_workspace()->peers_readable()));
                }
                AlgorithmParams p;
                p.type = CollectiveType::kAllGather;
                p.rank = rank;
                p.size = n;
                p.dtype = DT_INT32;
                p.num_elements = block;
                auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllGather, name, p);
                if (!alg.ok()) return alg.status();
                std::vector<int32_t> in(block), out(block * n, -1);
                for (int64_t i = 0; i < block; ++i)
                  in[i] = static_cast<int32_t>(rank * 1000000 + i);
                for (int run = 0; run < 2; ++run) {
                  if (absl::Status s = (*alg)->Run(t, in.data(), out.data()); !s.ok()) return s;
                  for (int q = 0; q < n; ++q) {
                    for (int64_t i = 0; i < block; ++i) {
                      if (out[q * block + i] != q * 1000000 + i) {
                        return absl::DataLossError(absl::StrCat("rank ", rank, " block ", q,
                                                                " element ", i, ": got ",
                                                                out[q * block + i]));
                      }
                    }
                  }
                }
                return absl::OkStatus();
              });
          for (int r = 0; r < n; ++r)
            EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
        }
      }
    }
  }
}

// Ranks that disagree on the element count fail, naming the rank, instead
// of reading past a buffer.
TEST(AllReduceShmErrorsTest, RanksThatDisagreeFailNamingTheRank) {
  ShmTransportOptions options;
  options.key_prefix = UniquePrefix("mismatch");
  auto statuses = RunRanks(Mode::kThreads, 2, options, [](int rank, Transport& t) -> absl::Status {
    AlgorithmParams p;
    p.rank = rank;
    p.size = 2;
    p.dtype = DT_FLOAT;
    p.num_elements = rank == 0 ? 10 : 12;
    auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "shm", p);
    if (!alg.ok()) return alg.status();
    std::vector<float> in(12, 1.0f), out(12);
    return (*alg)->Run(t, in.data(), out.data());
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank " + std::to_string(1 - r) + " runs"),
              std::string::npos)
        << statuses[r];
  }
}

TEST(AllReduceShmErrorsTest, OtherTransportsAreRefused) {
  auto mailbox = std::make_shared<InProcessMailbox>(2);
  auto t = mailbox->Connect(0);
  AlgorithmParams p;
  p.size = 2;
  p.dtype = DT_FLOAT;
  p.num_elements = 4;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "shm", p);
  ASSERT_TRUE(alg.ok()) << alg.status();
  float in[4] = {}, out[4];
  EXPECT_EQ((*alg)->Run(*t, in, out).code(), absl::StatusCode::kFailedPrecondition);
  p.dtype = DT_STRING;
  EXPECT_FALSE(CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "shm", p).ok());
}

TEST(AllReduceShmSelectTest, ShmKindPicksShmForEveryCollectiveButBroadcast) {
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 2, 4096, false, "shm"), "shm");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "nccl", 4, 1 << 26, false, "shm"), "shm");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "shared_memory", 2, 8, false, "shm"), "shm");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "ring", 2, 8, false, "shm"), "ring");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllReduce, "auto", 2, 8, false, "tcp"),
            "recursive_doubling");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 2, 8, false, "shm"), "shm");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kAllGather, "auto", 2, 8, false, "tcp"),
            "recursive_doubling");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kReduceScatter, "auto", 2, 8, false, "shm"), "shm");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kReduceScatter, "auto", 2, 8, false, "tcp"),
            "recursive_halving");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kReduceScatter, "auto", 2, 8, true, ""), "direct");
  EXPECT_EQ(*SelectAlgorithm(CollectiveType::kBroadcastSend, "auto", 2, 8, false, "shm"), "tree");
}

// All-gather (ring) and broadcast (tree) over the shared-memory transport's send/receive,
// and the ring all-reduce too, between processes.
TEST(ShmGenericAlgorithmsTest, AllGatherBroadcastAndRingAcrossProcesses) {
  ShmTransportOptions options;
  options.key_prefix = UniquePrefix("generic");
  const int n = 3;
  const int64_t elements = 1001;
  auto statuses = RunRanks(Mode::kProcesses, n, options, [&](int rank, Transport& t) -> absl::Status {
    AlgorithmParams p;
    p.rank = rank;
    p.size = n;
    p.dtype = DT_FLOAT;
    p.num_elements = elements;
    std::vector<float> in(elements);
    for (int64_t i = 0; i < elements; ++i) in[i] = InputValue<float>(rank, i, MergeOp::kAdd);
    // All-gather.
    p.type = CollectiveType::kAllGather;
    auto gather = CreateCollectiveAlgorithm(p.type, "ring", p);
    if (!gather.ok()) return gather.status();
    std::vector<float> all(n * elements);
    if (absl::Status s = (*gather)->Run(t, in.data(), all.data()); !s.ok()) return s;
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < elements; ++i) {
        if (all[q * elements + i] != InputValue<float>(q, i, MergeOp::kAdd)) {
          return absl::DataLossError(absl::StrCat("all-gather: rank ", rank, " block ", q));
        }
      }
    }
    // Broadcast from rank 1.
    p.type = rank == 1 ? CollectiveType::kBroadcastSend : CollectiveType::kBroadcastRecv;
    p.root = 1;
    auto bcast = CreateCollectiveAlgorithm(p.type, "tree", p);
    if (!bcast.ok()) return bcast.status();
    std::vector<float> got(elements);
    if (absl::Status s = (*bcast)->Run(t, rank == 1 ? in.data() : nullptr, got.data()); !s.ok()) {
      return s;
    }
    for (int64_t i = 0; i < elements; ++i) {
      if (got[i] != InputValue<float>(1, i, MergeOp::kAdd)) {
        return absl::DataLossError(absl::StrCat("broadcast: rank ", rank, " element ", i));
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

}  // namespace
}  // namespace strata
