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

absl::Status PendingOps::Wait() {
  MutexLock l(&mu_);
  while (pending_ > 0) all_done_.Wait(&mu_);
  return status_;
}

}  // namespace strata
