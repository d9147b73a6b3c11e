// Strata's synchronization primitives: Mutex, MutexLock, ReaderMutexLock,
// CondVar and Notification, with abseil's spelling and thread-safety
// annotations, built on the C++ standard library (pthreads underneath).
//
//   Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   { MutexLock l(&mu_); ++n_; }
//   mu_.Await([&] { return n_ > 0; });   // holds mu_; waits until true
//
// Why not absl::Mutex: Debian's abseil is a prebuilt library without
// ThreadSanitizer instrumentation, so TSan cannot see its lock hand-offs and
// reports races on everything it guards. pthread mutexes are intercepted by
// TSan, so `--config=tsan` stays meaningful.
//
// Thread-safety: these are the thread-safety tools. Ownership: plain values,
// neither copyable nor movable.
#ifndef STRATA_BASE_MUTEX_H_
#define STRATA_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace strata {

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    // Await() waiters re-check their predicates after any release. They are
    // told before the release, not after: a waiter may return and destroy
    // the object holding this mutex as soon as it can lock it, which must
    // not be while this thread still signals its condition variable.
    if (waiters_ > 0) changed_.notify_all();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Shared locking is exclusive here; readers are never starved or reordered.
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { Lock(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // With the mutex held: releases it until `cond()` is true, then returns
  // holding it. `cond` is evaluated with the mutex held.
  void Await(const std::function<bool()>& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> l(mu_, std::adopt_lock);
    ++waiters_;
    changed_.wait(l, cond);
    --waiters_;
    l.release();
  }
  // Like Await, giving up after `timeout`; returns cond()'s final value.
  bool AwaitWithTimeout(const std::function<bool()>& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> l(mu_, std::adopt_lock);
    ++waiters_;
    const bool ok = changed_.wait_for(l, absl::ToChronoNanoseconds(timeout), cond);
    --waiters_;
    l.release();
    return ok;
  }

 private:
  friend class CondVar;
  std::mutex mu_;
  std::condition_variable changed_;  // for Await
  int waiters_ = 0;                  // guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with a Mutex held.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // Returns true if the wait timed out.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_for(l, absl::ToChronoNanoseconds(timeout)) == std::cv_status::timeout;
    l.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A one-shot event: Notify once; any number of waiters.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    std::lock_guard<std::mutex> l(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> l(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return notified_; });
  }
  // True if notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace strata

#endif  // STRATA_BASE_MUTEX_H_
