#include "runtime/collective/worker_pool.h"

#include <utility>

#include "base/run_queue.h"

namespace strata {

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock l(&mu_);
    stop_ = true;
    work_.SignalAll();
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void WorkerPool::Schedule(std::function<void()> fn) {
  MutexLock l(&mu_);
  queue_.push_back(std::move(fn));
  // Idle threads may all be about to take earlier tasks: count them against
  // the whole queue, so that no task waits behind a blocked one.
  if (static_cast<int>(queue_.size()) > idle_) {
    threads_.emplace_back([this] { WorkerLoop(); });
  } else {
    work_.Signal();
  }
}

int WorkerPool::num_threads() const {
  MutexLock l(&mu_);
  return static_cast<int>(threads_.size());
}

void WorkerPool::WorkerLoop() {
  CountThisThreadsRunQueueDelay();
  MutexLock l(&mu_);
  for (;;) {
    while (queue_.empty() && !stop_) {
      ++idle_;
      work_.Wait(&mu_);
      --idle_;
    }
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    fn();
    fn = nullptr;  // destroy the task's captures without the lock
    mu_.Lock();
  }
}

DeadlineTimer::~DeadlineTimer() { Stop(); }

void DeadlineTimer::Stop() {
  std::thread t;
  {
    MutexLock l(&mu_);
    stop_ = true;
    entries_.clear();
    changed_.SignalAll();
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

uint64_t DeadlineTimer::Schedule(absl::Time when, std::function<void()> fn) {
  MutexLock l(&mu_);
  if (stop_) return 0;
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{when, std::move(fn)});
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  changed_.SignalAll();
  return id;
}

bool DeadlineTimer::Cancel(uint64_t id) {
  MutexLock l(&mu_);
  return entries_.erase(id) > 0;
}

void DeadlineTimer::Loop() {
  MutexLock l(&mu_);
  while (!stop_) {
    // Few entries are pending at once (one per waiting collective), so a
    // linear scan for the earliest beats keeping a second index.
    auto next = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (next == entries_.end() || it->second.when < next->second.when) next = it;
    }
    if (next == entries_.end()) {
      changed_.Wait(&mu_);
      continue;
    }
    const absl::Time now = absl::Now();
    if (next->second.when > now) {
      changed_.WaitWithTimeout(&mu_, next->second.when - now);
      continue;
    }
    std::function<void()> fn = std::move(next->second.fn);
    entries_.erase(next);
    mu_.Unlock();
    fn();
    fn = nullptr;
    mu_.Lock();
  }
}

}  // namespace strata
