#include "base/run_queue.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace strata {
namespace {

// Keeps the calling thread busy on `cpu` for `busy`.
void SpinOn(int cpu, std::chrono::milliseconds busy, bool counted) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  if (counted) CountThisThreadsRunQueueDelay();
  const auto until = std::chrono::steady_clock::now() + busy;
  volatile int sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
}

// Two busy threads on one CPU each wait about half the time; only the
// counted one's wait is in the sum, and it stays there after the thread
// exits.
TEST(RunQueueTest, ACountedThreadSharingItsCpuHasWaited) {
  if (access("/proc/thread-self/schedstat", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/thread-self/schedstat";
  }
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  const double before = CountedRunQueueSeconds();
  std::thread counted(SpinOn, cpu, std::chrono::milliseconds(300), true);
  std::thread other(SpinOn, cpu, std::chrono::milliseconds(300), false);
  counted.join();
  other.join();
  const double after = CountedRunQueueSeconds();
  EXPECT_GT(after - before, 0.05);
  EXPECT_LT(after - before, 5.0);
}

TEST(RunQueueTest, TheSumNeverGoesBack) {
  CountThisThreadsRunQueueDelay();
  CountThisThreadsRunQueueDelay();  // once per thread
  double last = CountedRunQueueSeconds();
  for (int i = 0; i < 20; ++i) {
    std::thread([] { CountThisThreadsRunQueueDelay(); }).join();
    const double now = CountedRunQueueSeconds();
    EXPECT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace strata
