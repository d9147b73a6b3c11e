#include "runtime/collective/transport/in_process_transport.h"

#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(InProcessTransportTest, SendBeforeOrAfterRecvDeliversTheBytes) {
  auto mb = std::make_shared<InProcessMailbox>(2);
  auto t0 = mb->Connect(0), t1 = mb->Connect(1);
  const char a[] = "hello", b[] = "world";
  char ra[6] = {}, rb[6] = {};
  PendingOps ops;
  t0->SendAsync(1, 7, a, 6, ops.Add());  // send first
  t1->RecvAsync(0, 7, ra, 6, ops.Add());
  t0->RecvAsync(1, 8, rb, 6, ops.Add());  // receive first
  t1->SendAsync(0, 8, b, 6, ops.Add());
  ASSERT_TRUE(ops.Wait().ok());
  EXPECT_STREQ(ra, "hello");
  EXPECT_STREQ(rb, "world");
  EXPECT_EQ(t0->shared_workspace(), nullptr);
}

TEST(InProcessTransportTest, TagsKeepMessagesApart) {
  auto mb = std::make_shared<InProcessMailbox>(2);
  auto t0 = mb->Connect(0), t1 = mb->Connect(1);
  int x = 1, y = 2, rx = 0, ry = 0;
  PendingOps ops;
  t0->SendAsync(1, 1, &x, sizeof(x), ops.Add());
  t0->SendAsync(1, 2, &y, sizeof(y), ops.Add());
  t1->RecvAsync(0, 2, &ry, sizeof(ry), ops.Add());
  t1->RecvAsync(0, 1, &rx, sizeof(rx), ops.Add());
  ASSERT_TRUE(ops.Wait().ok());
  EXPECT_EQ(rx, 1);
  EXPECT_EQ(ry, 2);
}

TEST(InProcessTransportTest, AbortFailsPendingAndLaterOperations) {
  auto mb = std::make_shared<InProcessMailbox>(3);
  auto t2 = mb->Connect(2);
  int buf = 0;
  PendingOps pending;
  t2->RecvAsync(0, 1, &buf, sizeof(buf), pending.Add());
  std::thread aborter([&] { mb->Connect(1)->Abort(absl::CancelledError("step cancelled")); });
  absl::Status s = pending.Wait();
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  PendingOps later;
  t2->SendAsync(0, 2, &buf, sizeof(buf), later.Add());
  EXPECT_EQ(later.Wait().code(), absl::StatusCode::kCancelled);
}

TEST(InProcessTransportTest, SizeMismatchAndBadRanksAreInternalErrors) {
  auto mb = std::make_shared<InProcessMailbox>(2);
  auto t0 = mb->Connect(0), t1 = mb->Connect(1);
  char buf[8] = {};
  PendingOps ops;
  t0->SendAsync(1, 0, buf, 8, ops.Add());
  t1->RecvAsync(0, 0, buf, 4, ops.Add());
  EXPECT_EQ(ops.Wait().code(), absl::StatusCode::kInternal);
  PendingOps bad;
  t0->SendAsync(5, 0, buf, 1, bad.Add());
  EXPECT_EQ(bad.Wait().code(), absl::StatusCode::kInternal);
}

TEST(InProcessTransportTest, ManyConcurrentMessages) {
  constexpr int kRanks = 4, kMessages = 200;
  auto mb = std::make_shared<InProcessMailbox>(kRanks);
  std::vector<std::thread> threads;
  std::vector<int> bad(kRanks, 0);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto t = mb->Connect(r);
      std::vector<int> out(kMessages), in(kMessages * kRanks, -1);
      PendingOps ops;
      for (int m = 0; m < kMessages; ++m) {
        out[m] = r * 1000 + m;
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == r) continue;
          t->RecvAsync(peer, m, &in[peer * kMessages + m], sizeof(int), ops.Add());
          t->SendAsync(peer, m, &out[m], sizeof(int), ops.Add());
        }
      }
      if (!ops.Wait().ok()) bad[r] = -1;
      for (int peer = 0; peer < kRanks; ++peer) {
        for (int m = 0; m < kMessages && peer != r; ++m) bad[r] += in[peer * kMessages + m] != peer * 1000 + m;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(bad[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace strata
