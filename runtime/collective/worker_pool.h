// WorkerPool and DeadlineTimer: the collective executor's threads.
//
// WorkerPool: threads for work that blocks (one collective participant
// waiting on its peers). Unlike a fixed pool, it never lets a task wait for
// a thread that is blocked on another task: when more tasks are queued than
// threads are idle, it starts another thread. Threads are kept for reuse,
// so a steady state of k concurrent participants costs k threads, once.
//
//   WorkerPool pool("collective");
//   pool.Schedule([] { RunMyRank(); });
//
// Thread-safety: Schedule may be called concurrently. Ownership: the
// destructor runs the queued tasks and joins the threads, so tasks must not
// wait for anything that outlives it.
#ifndef STRATA_RUNTIME_COLLECTIVE_WORKER_POOL_H_
#define STRATA_RUNTIME_COLLECTIVE_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace strata {

class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Schedule(std::function<void()> fn);
  int num_threads() const;
  // What the destructor does, for an owner whose tasks use its other
  // members: runs the queued tasks and joins the threads. Idempotent; no
  // Schedule after it.
  void Stop();

 private:
  void WorkerLoop();

  mutable Mutex mu_;
  CondVar work_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// DeadlineTimer: runs callbacks at given times on one lazily started thread.
//
//   uint64_t id = timer.Schedule(absl::Now() + absl::Seconds(60), [] { TimeOut(); });
//   timer.Cancel(id);   // false if it has already run or is running
//
// Thread-safety: thread-safe; callbacks run without the timer's lock and may
// call Schedule/Cancel. Ownership: the destructor (or Stop) drops pending
// callbacks and joins the thread (waiting for a running callback).
class DeadlineTimer {
 public:
  DeadlineTimer() = default;
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Returns 0 (and drops `fn`) after Stop.
  uint64_t Schedule(absl::Time when, std::function<void()> fn);
  bool Cancel(uint64_t id);
  // What the destructor does, for an owner whose callbacks use members that
  // die before the timer: drops pending callbacks, waits for a running one
  // and joins the thread. Idempotent; must not be called from a callback.
  void Stop();

 private:
  void Loop();

  Mutex mu_;
  CondVar changed_;
  struct Entry {
    absl::Time when;
    std::function<void()> fn;
  };
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_WORKER_POOL_H_
