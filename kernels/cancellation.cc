#include "kernels/cancellation.h"

#include "base/mutex.h"

#include <utility>

namespace strata {

void CancellationManager::StartCancel(const absl::Status& status) {
  absl::flat_hash_map<CancellationToken, Callback> callbacks;
  absl::Status recorded;
  {
    MutexLock l(&mu_);
    if (cancelled_.load(std::memory_order_relaxed)) return;
    status_ = status.ok() ? absl::CancelledError("cancelled") : status;
    recorded = status_;
    // Take the callbacks out so that they run without the lock: a callback
    // may well call into this manager (status(), IsCancelled()) or into code
    // that registers with it.
    callbacks.swap(callbacks_);
    cancelled_.store(true, std::memory_order_release);
  }
  for (auto& [token, cb] : callbacks) cb(recorded);
  MutexLock l(&mu_);
  callbacks_done_ = true;
}

absl::Status CancellationManager::status() const {
  MutexLock l(&mu_);
  return status_;
}

CancellationToken CancellationManager::RegisterCallback(Callback cb) {
  MutexLock l(&mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return kInvalidCancellationToken;
  const CancellationToken t = next_token_++;
  callbacks_.emplace(t, std::move(cb));
  return t;
}

bool CancellationManager::DeregisterCallback(CancellationToken token) {
  MutexLock l(&mu_);
  if (callbacks_.erase(token) > 0) return true;
  if (!cancelled_.load(std::memory_order_relaxed)) return false;  // unknown token
  // StartCancel owns the callback now; the caller may free what it touches
  // only after it has run.
  mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return callbacks_done_; });
  return false;
}

}  // namespace strata
