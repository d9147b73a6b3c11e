// AllReducePipelinedRing over TcpTransport on 127.0.0.1 (ranks as threads):
// results against the directly computed reduction for uneven sizes, many
// pieces, repeated runs on one object, Div and Max; a peer's abort ends a
// run with that error; and what SelectAlgorithm picks for TCP.
#include "runtime/collective/algorithms/all_reduce_pipelined_ring.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/types.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/collective/transport/tcp_transport_test_util.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

using tcp_test::ConnectThreads;
using ::testing::HasSubstr;

AlgorithmParams Params(int r, int n, int64_t count, MergeOp op, FinalOp final_op) {
  AlgorithmParams p;
  p.type = CollectiveType::kAllReduce;
  p.rank = r;
  p.size = n;
  p.dtype = DT_FLOAT;
  p.num_elements = count;
  p.merge_op = op;
  p.final_op = final_op;
  return p;
}

// Small integers, so that every order of summing them is exact.
float Value(int rank, int64_t i, int run) {
  return static_cast<float>((rank * 7 + i * 13 + run * 5) % 41 - 20);
}

struct Case {
  int64_t count;
  size_t piece_bytes;
  MergeOp op;
  FinalOp final_op;
  // Runs up to this size wait in DriveUntil (the caller moves the bytes).
  int64_t drive_max_bytes = kPipelinedRingDriveMaxBytes;
  // First-step sends posted at a time (0: all).
  size_t send_window_bytes = kPipelinedRingSendWindowBytes;
  // Even runs all-reduce one buffer in place (odd ones out of place, on the
  // same algorithm object), receiving into this many slots.
  bool in_place = false;
  int in_place_slots = kPipelinedRingInPlaceSlots;
};

// Runs `runs` all-reduces on one algorithm object per rank; checks every
// element against the reduction computed here, and every rank's bits alike.
void RunCase(std::vector<std::unique_ptr<Transport>>& t, const Case& c, int runs) {
  const int n = static_cast<int>(t.size());
  std::vector<absl::Status> status(n);
  std::vector<std::vector<float>> out(n, std::vector<float>(c.count));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      PipelinedRingOptions o;
      o.piece_bytes = c.piece_bytes;
      o.drive_max_bytes = c.drive_max_bytes;
      o.send_window_bytes = c.send_window_bytes;
      o.in_place_slots = c.in_place_slots;
      auto alg = CreatePipelinedRingAllReduce(Params(r, n, c.count, c.op, c.final_op), o);
      if (!alg.ok()) {
        status[r] = alg.status();
        return;
      }
      for (int run = 0; run < runs && status[r].ok(); ++run) {
        std::vector<float> in(c.count);
        for (int64_t i = 0; i < c.count; ++i) in[i] = Value(r, i, run);
        if (c.in_place && run % 2 == 0) {
          out[r] = in;
          status[r] = (*alg)->Run(*t[r], out[r].data(), out[r].data());
        } else {
          std::fill(out[r].begin(), out[r].end(), -1234.0f);
          status[r] = (*alg)->Run(*t[r], in.data(), out[r].data());
        }
        for (int64_t i = 0; i < c.count && status[r].ok(); ++i) {
          float want = Value(0, i, run);
          for (int q = 1; q < n; ++q) {
            want = c.op == MergeOp::kMax ? std::max(want, Value(q, i, run)) : want + Value(q, i, run);
          }
          if (c.final_op == FinalOp::kDiv) want /= static_cast<float>(n);
          if (out[r][i] != want) {
            status[r] = absl::InternalError(absl::StrCat("run ", run, " rank ", r, " element ", i,
                                                         ": ", out[r][i], " != ", want));
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(std::memcmp(out[0].data(), out[r].data(), c.count * sizeof(float)), 0) << "rank " << r;
  }
}

TEST(PipelinedRingTest, MatchesTheReductionForEveryShape) {
  for (int n : {2, 3, 4}) {
    InMemoryKeyValueStore kv;
    auto t = ConnectThreads(n, kv);
    for (auto& x : t) ASSERT_TRUE(x);
    const Case cases[] = {
        {1, kPipelinedRingPieceBytes, MergeOp::kAdd, FinalOp::kId},
        {2, 4, MergeOp::kAdd, FinalOp::kDiv},
        {1000, 100, MergeOp::kMax, FinalOp::kId},
        // Many pieces of eager size, then of rendezvous size, then the default.
        {(1 << 20) + 3, 4 << 10, MergeOp::kAdd, FinalOp::kDiv},
        {(1 << 20) + 3, (64 << 10) + 4, MergeOp::kAdd, FinalOp::kId},
        {(1 << 20) + 3, kPipelinedRingPieceBytes, MergeOp::kMax, FinalOp::kId},
        // A window of one first-step send at a time: over many pieces, and
        // a chunk with an empty piece (3 ranks, 2 elements: a first send
        // that posts nothing); then no window at all.
        {(1 << 20) + 3, 4 << 10, MergeOp::kAdd, FinalOp::kId, 0, 1},
        {2, 4, MergeOp::kAdd, FinalOp::kDiv, 0, 1},
        {(1 << 20) + 3, (64 << 10) + 4, MergeOp::kMax, FinalOp::kId, 0, 0},
    };
    for (Case c : cases) {
      // Every shape with the caller driving the transport and without.
      for (int64_t drive_max : {int64_t{0}, int64_t{1} << 40}) {
        c.drive_max_bytes = drive_max;
        SCOPED_TRACE(absl::StrCat(n, " ranks, ", c.count, " floats, pieces of ", c.piece_bytes,
                                  ", send window ", c.send_window_bytes,
                                  drive_max > 0 ? ", driven" : ", I/O thread"));
        RunCase(t, c, /*runs=*/3);
      }
    }
  }
}

TEST(PipelinedRingTest, InPlaceMatchesTheReductionForEveryShape) {
  for (int n : {2, 3, 4}) {
    InMemoryKeyValueStore kv;
    auto t = ConnectThreads(n, kv);
    for (auto& x : t) ASSERT_TRUE(x);
    // Even runs in place, odd ones out of place on the same object.
    const Case cases[] = {
        // One slot over many pieces (eager-sized, then rendezvous-sized).
        {(1 << 18) + 3, 4 << 10, MergeOp::kAdd, FinalOp::kDiv, 0, 1, true, 1},
        {(1 << 18) + 3, (64 << 10) + 4, MergeOp::kAdd, FinalOp::kId, 0, 0, true, 1},
        // Empty pieces; the defaults; more slots than receives.
        {2, 4, MergeOp::kAdd, FinalOp::kDiv, 0, 1, true, 1},
        {(1 << 20) + 3, kPipelinedRingPieceBytes, MergeOp::kMax, FinalOp::kId, 0,
         kPipelinedRingSendWindowBytes, true},
        {1000, 100, MergeOp::kAdd, FinalOp::kId, 0, 0, true, 1000},
    };
    for (Case c : cases) {
      for (int64_t drive_max : {int64_t{0}, int64_t{1} << 40}) {
        c.drive_max_bytes = drive_max;
        SCOPED_TRACE(absl::StrCat(n, " ranks, ", c.count, " floats, pieces of ", c.piece_bytes,
                                  ", send window ", c.send_window_bytes, ", slots ",
                                  c.in_place_slots, drive_max > 0 ? ", driven" : ", I/O thread"));
        RunCase(t, c, /*runs=*/3);
      }
    }
  }
}

// 16 MiB in 256 KiB pieces sends more frames than the I/O thread handles in
// one wake-up; the frames read last must not wait for bytes that never come
// (this hung before TcpTransport handled them).
TEST(PipelinedRingTest, ManyLargePiecesBackToBack) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  for (auto& x : t) ASSERT_TRUE(x);
  RunCase(t, {int64_t{4} << 20, 256 << 10, MergeOp::kAdd, FinalOp::kId}, /*runs=*/4);
  RunCase(t, {int64_t{4} << 20, 256 << 10, MergeOp::kAdd, FinalOp::kId, int64_t{1} << 40},
          /*runs=*/4);
}

TEST(PipelinedRingTest, PeerAbortEndsTheRunWithItsError) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(3, kv);
  for (auto& x : t) ASSERT_TRUE(x);
  const int64_t count = 1 << 20;
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto alg = CreatePipelinedRingAllReduce(Params(r, 3, count, MergeOp::kAdd, FinalOp::kId));
      ASSERT_TRUE(alg.ok()) << alg.status();
      std::vector<float> in(count, 1.0f), out(count);
      status[r] = (*alg)->Run(*t[r], in.data(), out.data());
    });
  }
  t[2]->Abort(absl::FailedPreconditionError("rank 2 gave up"));
  for (auto& th : threads) th.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kFailedPrecondition) << status[r];
    EXPECT_THAT(std::string(status[r].message()), HasSubstr("rank 2 gave up"));
  }
}

TEST(PipelinedRingTest, RankOtherThanTheTransportsIsAnError) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  for (auto& x : t) ASSERT_TRUE(x);
  auto alg = CreatePipelinedRingAllReduce(Params(1, 2, 8, MergeOp::kAdd, FinalOp::kId));
  ASSERT_TRUE(alg.ok());
  std::vector<float> in(8), out(8);
  const absl::Status s = (*alg)->Run(*t[0], in.data(), out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("transport of rank 0 of 2"));
}

TEST(PipelinedRingTest, BadParams) {
  PipelinedRingOptions no_piece;
  no_piece.piece_bytes = 0;
  EXPECT_EQ(CreatePipelinedRingAllReduce(Params(0, 2, 8, MergeOp::kAdd, FinalOp::kId), no_piece)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  AlgorithmParams gather = Params(0, 2, 8, MergeOp::kAdd, FinalOp::kId);
  gather.type = CollectiveType::kAllGather;
  EXPECT_EQ(CreatePipelinedRingAllReduce(gather).status().code(), absl::StatusCode::kInvalidArgument);
  AlgorithmParams strings = Params(0, 2, 8, MergeOp::kAdd, FinalOp::kId);
  strings.dtype = DT_STRING;
  EXPECT_FALSE(CreatePipelinedRingAllReduce(strings).ok());
  // Registered under its name, as SelectAlgorithm returns it.
  EXPECT_TRUE(CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "pipelined_ring",
                                        Params(0, 2, 8, MergeOp::kAdd, FinalOp::kId))
                  .ok());
}

TEST(PipelinedRingTest, SelectedForTcpUnderAutoOnly) {
  auto pick = [](CollectiveType type, const std::string& hint, const std::string& kind) {
    auto s = SelectAlgorithm(type, hint, 2, 1 << 20, /*same_address_space=*/false, kind);
    return s.ok() ? *s : s.status().ToString();
  };
  EXPECT_EQ(pick(CollectiveType::kAllReduce, "auto", "tcp"), "pipelined_ring");
  EXPECT_EQ(pick(CollectiveType::kAllReduce, "", "tcp"), "pipelined_ring");
  EXPECT_EQ(pick(CollectiveType::kAllReduce, "nccl", "tcp"), "pipelined_ring");  // CPU: auto
  EXPECT_EQ(pick(CollectiveType::kAllReduce, "ring", "tcp"), "ring");
  EXPECT_NE(pick(CollectiveType::kAllReduce, "auto", "shm"), "pipelined_ring");
  EXPECT_NE(pick(CollectiveType::kAllReduce, "auto", "in_process"), "pipelined_ring");
  EXPECT_EQ(pick(CollectiveType::kAllGather, "auto", "tcp"), "recursive_doubling");
  EXPECT_THAT(pick(CollectiveType::kAllReduce, "bogus", "tcp"), HasSubstr("bogus"));
}

}  // namespace
}  // namespace strata
