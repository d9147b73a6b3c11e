#include "runtime/collective/worker_pool.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(WorkerPoolTest, StopRunsEveryQueuedTask) {
  std::atomic<int> ran{0};
  WorkerPool pool;
  for (int i = 0; i < 20; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  pool.Stop();
  EXPECT_EQ(ran.load(), 20);
  pool.Stop();  // idempotent
}

TEST(WorkerPoolTest, TasksThatBlockOnEachOtherGetTheirOwnThreads) {
  // Each task waits for the next one to start: a fixed pool of fewer than
  // 4 threads would deadlock.
  absl::Notification started[4];
  WorkerPool pool;
  for (int i = 0; i < 4; ++i) {
    pool.Schedule([&, i] {
      started[i].Notify();
      if (i + 1 < 4) started[i + 1].WaitForNotification();
    });
  }
  pool.Stop();
  for (auto& n : started) EXPECT_TRUE(n.HasBeenNotified());
}

TEST(DeadlineTimerTest, RunsAtItsTimeAndNotAfterCancel) {
  DeadlineTimer timer;
  absl::Notification ran;
  std::atomic<bool> cancelled_ran{false};
  const uint64_t late =
      timer.Schedule(absl::Now() + absl::Seconds(30), [&] { cancelled_ran = true; });
  timer.Schedule(absl::Now() + absl::Milliseconds(20), [&] { ran.Notify(); });
  EXPECT_TRUE(timer.Cancel(late));
  EXPECT_FALSE(timer.Cancel(late));
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  timer.Stop();
  EXPECT_FALSE(cancelled_ran.load());
}

// The collective executor's teardown relies on this: Stop returns only
// after a callback that is running has returned, so members it reads may be
// destroyed right after.
TEST(DeadlineTimerTest, StopWaitsForARunningCallbackAndDropsPendingOnes) {
  DeadlineTimer timer;
  absl::Notification entered;
  std::atomic<bool> finished{false};
  std::atomic<bool> pending_ran{false};
  timer.Schedule(absl::Now(), [&] {
    entered.Notify();
    absl::SleepFor(absl::Milliseconds(200));
    finished = true;
  });
  timer.Schedule(absl::Now() + absl::Seconds(30), [&] { pending_ran = true; });
  entered.WaitForNotification();
  timer.Stop();
  EXPECT_TRUE(finished.load());
  EXPECT_FALSE(pending_ran.load());
  // After Stop nothing is scheduled (0) and nothing runs.
  EXPECT_EQ(timer.Schedule(absl::Now(), [&] { pending_ran = true; }), 0u);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pending_ran.load());
  timer.Stop();  // idempotent
}

}  // namespace
}  // namespace strata
