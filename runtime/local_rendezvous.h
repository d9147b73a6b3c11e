// LocalRendezvous: the in-process Rendezvous (kernels/rendezvous.h) where the
// _Send and _Recv nodes of one step's partitions meet. One per step: a key is
// sent once and received once, in either order; the session makes a fresh
// one for each step that has more than one partition.
//
//   LocalRendezvous r;
//   r.RecvAsync(key, [](const absl::Status& s, const Tensor& t) { ... });  // waits
//   r.Send(key, t);                 // runs the waiting callback on this thread
//   r.StartAbort(absl::CancelledError("step cancelled"));  // fails pending and later receives
//
// Across devices with memory of their own (GPUs), give it the devices: a
// value whose key names two devices that NeedsCopy (runtime/device.h) is
// copied to the receiving device (on the devices' copy streams) before the
// receiver sees it; everything else is handed over as is, as without devices.
//
//   LocalRendezvous r(&device_mgr);
//
// Thread-safety: every method may be called concurrently. Callbacks run
// without the lock held, on the thread of the Send, RecvAsync or StartAbort
// that completed them. Ownership: the caller owns the rendezvous; it must
// outlive the step's Send and Recv kernels.
#ifndef STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_
#define STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "kernels/rendezvous.h"
#include "runtime/device.h"

namespace strata {

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous() = default;
  // Runs a function on some thread (a thread pool's Schedule).
  using Scheduler = std::function<void(std::function<void()>)>;
  // `devices` (not owned, may be null: no copies) must outlive the
  // rendezvous. A finished copy hands its value over through `schedule`
  // (null: on the device's callback thread), so that the receiving step does
  // not continue on a thread the device needs for its own callbacks.
  LocalRendezvous(const DeviceMgr* devices, Scheduler schedule)
      : devices_(devices), schedule_(std::move(schedule)) {}
  // Pending receives are completed with Cancelled ("rendezvous destroyed");
  // waits for copies in flight (they hold the rendezvous), each until its
  // value is handed over and its call to `schedule` has returned, so that
  // the scheduler (a pool the caller destroys next) is not still in use.
  ~LocalRendezvous() override;

  // InvalidArgument if `key` was already sent this step; the abort status
  // once aborted.
  absl::Status Send(const std::string& key, const Tensor& value) override;
  // A second receive of one key completes with InvalidArgument.
  void RecvAsync(const std::string& key, DoneCallback done) override;
  // Keeps the first status (an OK status becomes Cancelled).
  void StartAbort(const absl::Status& status) override;

 private:
  // The value's handover (no copy needed, or its copy is done).
  absl::Status Deliver(const std::string& key, const Tensor& value, bool copied);

  struct Item {
    bool copying = false;  // sent; its copy is in flight
    bool has_value = false;
    Tensor value;
    DoneCallback waiter;  // set while a receive waits
    bool received = false;
  };
  // Copies in flight; shared with their callbacks, which may still be
  // releasing its mutex when the destructor's wait ends.
  struct InFlight {
    Mutex mu;
    int n ABSL_GUARDED_BY(mu) = 0;
  };

  const DeviceMgr* const devices_ = nullptr;
  const Scheduler schedule_;
  const std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  Mutex mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Item> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_
