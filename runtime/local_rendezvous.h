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
// Thread-safety: every method may be called concurrently. Callbacks run
// without the lock held, on the thread of the Send, RecvAsync or StartAbort
// that completed them. Ownership: the caller owns the rendezvous; it must
// outlive the step's Send and Recv kernels.
#ifndef STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_
#define STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "graph/mutex.h"
#include "kernels/rendezvous.h"

namespace strata {

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous() = default;
  // Pending receives are completed with Cancelled ("rendezvous destroyed").
  ~LocalRendezvous() override;

  // InvalidArgument if `key` was already sent this step; the abort status
  // once aborted.
  absl::Status Send(const std::string& key, const Tensor& value) override;
  // A second receive of one key completes with InvalidArgument.
  void RecvAsync(const std::string& key, DoneCallback done) override;
  // Keeps the first status (an OK status becomes Cancelled).
  void StartAbort(const absl::Status& status) override;

 private:
  struct Item {
    bool has_value = false;
    Tensor value;
    DoneCallback waiter;  // set while a receive waits
    bool received = false;
  };
  Mutex mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Item> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_LOCAL_RENDEZVOUS_H_
