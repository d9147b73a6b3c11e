#include "runtime/collective/transport/transport.h"

#include <utility>

namespace strata {

Transport::Callback PendingOps::Add() {
  {
    MutexLock l(&mu_);
    ++pending_;
  }
  return [this](absl::Status s) {
    MutexLock l(&mu_);
    if (status_.ok() && !s.ok()) status_ = std::move(s);
    // Signalled with the lock held: the waiter may destroy this object as
    // soon as it can take the lock.
    if (--pending_ == 0) all_done_.SignalAll();
  };
}

absl::Status PendingOps::PostAndWait(Transport& t, int64_t bytes,
                                     const std::function<void()>& start) {
  if (bytes <= kDriveMaxBytes) return DriveAndWait(t, start);
  start();
  return Wait();
}

absl::Status PendingOps::DriveAndWait(Transport& t, const std::function<void()>& start) {
  // Held until `start` has posted everything, so that the count cannot
  // reach 0 in between.
  Transport::Callback posting = Add();
  t.DriveUntil(
      [&] {
        start();
        posting(absl::OkStatus());
      },
      [this] {
        MutexLock l(&mu_);
        return pending_ == 0;
      });
  return Wait();
}

absl::Status PendingOps::Wait() {
  MutexLock l(&mu_);
  while (pending_ > 0) all_done_.Wait(&mu_);
  return status_;
}

}  // namespace strata
