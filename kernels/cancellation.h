// CancellationManager: how a step is cancelled. The executor checks
// IsCancelled() before each node; kernels that wait on something outside the
// step (Recv, collectives) register a callback that wakes them when the step
// is cancelled, and deregister it when they finish normally.
//
//   CancellationManager cm;
//   CancellationToken t = cm.RegisterCallback([&](const absl::Status& s) { AbortWait(s); });
//   if (t == kInvalidCancellationToken) return cm.status();   // already cancelled
//   ... wait ...
//   cm.DeregisterCallback(t);    // after this, the callback is not running and never will
//
//   cm.StartCancel(absl::CancelledError("step cancelled"));   // from any thread
//
// StartCancel keeps the first status; the callbacks registered before it run
// once each, on the thread that called StartCancel, without the lock held.
//
// Thread-safety: every method may be called concurrently, except that a
// callback must not deregister itself (DeregisterCallback would wait for it).
// Ownership: the caller owns the manager; it must outlive every registered
// callback's run and every DeregisterCallback call.
#ifndef STRATA_KERNELS_CANCELLATION_H_
#define STRATA_KERNELS_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/mutex.h"

namespace strata {

using CancellationToken = int64_t;
inline constexpr CancellationToken kInvalidCancellationToken = -1;

class CancellationManager {
 public:
  using Callback = std::function<void(const absl::Status&)>;

  CancellationManager() = default;
  CancellationManager(const CancellationManager&) = delete;
  CancellationManager& operator=(const CancellationManager&) = delete;
  // Must not be destroyed while StartCancel is running its callbacks.
  ~CancellationManager() = default;

  // Cancels: records `status` (the first one wins; an OK status becomes
  // Cancelled) and runs the registered callbacks. Later calls do nothing.
  void StartCancel(const absl::Status& status);

  // Lock-free; cheap enough to call before every node.
  bool IsCancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // The status StartCancel recorded; OK while not cancelled.
  absl::Status status() const;

  // Registers `cb` to run on cancellation. Returns kInvalidCancellationToken,
  // without registering it, if cancellation has already started.
  CancellationToken RegisterCallback(Callback cb);

  // Removes a callback. Returns true if it was removed before running; false
  // if cancellation took it: then this waits until it has finished running.
  bool DeregisterCallback(CancellationToken token);

 private:
  std::atomic<bool> cancelled_{false};
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool callbacks_done_ ABSL_GUARDED_BY(mu_) = false;
  CancellationToken next_token_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<CancellationToken, Callback> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_KERNELS_CANCELLATION_H_
