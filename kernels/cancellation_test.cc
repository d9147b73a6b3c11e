#include "kernels/cancellation.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "base/mutex.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(CancellationManagerTest, CallbacksRunOnceWithTheFirstStatus) {
  CancellationManager cm;
  int runs = 0;
  absl::Status seen;
  CancellationToken t = cm.RegisterCallback([&](const absl::Status& s) {
    ++runs;
    seen = s;
  });
  ASSERT_NE(t, kInvalidCancellationToken);
  EXPECT_FALSE(cm.IsCancelled());
  EXPECT_TRUE(cm.status().ok());
  cm.StartCancel(absl::AbortedError("peer died"));
  cm.StartCancel(absl::InternalError("second"));
  EXPECT_TRUE(cm.IsCancelled());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(seen.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(cm.status().message(), "peer died");
  EXPECT_FALSE(cm.DeregisterCallback(t));
}

TEST(CancellationManagerTest, OkStatusBecomesCancelled) {
  CancellationManager cm;
  cm.StartCancel(absl::OkStatus());
  EXPECT_EQ(cm.status().code(), absl::StatusCode::kCancelled);
}

TEST(CancellationManagerTest, DeregisteredCallbackDoesNotRun) {
  CancellationManager cm;
  bool ran = false;
  CancellationToken t = cm.RegisterCallback([&](const absl::Status&) { ran = true; });
  EXPECT_TRUE(cm.DeregisterCallback(t));
  cm.StartCancel(absl::CancelledError("x"));
  EXPECT_FALSE(ran);
}

TEST(CancellationManagerTest, RegisterAfterCancelIsRefused) {
  CancellationManager cm;
  cm.StartCancel(absl::CancelledError("x"));
  EXPECT_EQ(cm.RegisterCallback([](const absl::Status&) {}), kInvalidCancellationToken);
}

TEST(CancellationManagerTest, DeregisterWaitsForARunningCallback) {
  CancellationManager cm;
  Notification in_callback, release;
  std::atomic<bool> finished{false};
  CancellationToken t = cm.RegisterCallback([&](const absl::Status&) {
    in_callback.Notify();
    release.WaitForNotification();
    finished = true;
  });
  std::thread canceller([&] { cm.StartCancel(absl::CancelledError("x")); });
  in_callback.WaitForNotification();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    release.Notify();
  });
  EXPECT_FALSE(cm.DeregisterCallback(t));
  EXPECT_TRUE(finished);  // Deregister returned only after the callback finished.
  canceller.join();
  releaser.join();
}

TEST(CancellationManagerTest, ConcurrentRegistrationAndCancel) {
  CancellationManager cm;
  std::atomic<int> ran{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j) {
        CancellationToken t = cm.RegisterCallback([&](const absl::Status&) { ++ran; });
        if (t == kInvalidCancellationToken) ++refused;
      }
    });
  }
  cm.StartCancel(absl::CancelledError("x"));
  for (auto& t : threads) t.join();
  // Every registration either ran its callback or was refused.
  EXPECT_EQ(ran + refused, 4000);
}

}  // namespace
}  // namespace strata
