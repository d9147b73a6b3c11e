#include "runtime/local_rendezvous.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/mutex.h"

namespace strata {

LocalRendezvous::~LocalRendezvous() { StartAbort(absl::CancelledError("rendezvous destroyed")); }

absl::Status LocalRendezvous::Send(const std::string& key, const Tensor& value) {
  DoneCallback waiter;
  {
    MutexLock l(&mu_);
    if (!abort_status_.ok()) return abort_status_;
    Item& item = table_[key];
    if (item.has_value || item.received) {
      return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' sent twice"));
    }
    if (!item.waiter) {
      item.has_value = true;
      item.value = value;
      return absl::OkStatus();
    }
    waiter = std::move(item.waiter);
    item.waiter = nullptr;
    item.received = true;
  }
  // The receiver continues on this thread, after the lock is released: it may
  // send or receive other keys.
  waiter(absl::OkStatus(), value);
  return absl::OkStatus();
}

void LocalRendezvous::RecvAsync(const std::string& key, DoneCallback done) {
  Tensor value;
  absl::Status status;
  {
    MutexLock l(&mu_);
    if (!abort_status_.ok()) {
      status = abort_status_;
    } else {
      Item& item = table_[key];
      if (item.received || item.waiter) {
        status = absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' received twice"));
      } else if (!item.has_value) {
        item.waiter = std::move(done);
        return;
      } else {
        value = std::move(item.value);
        item.value = Tensor();
        item.has_value = false;
        item.received = true;
      }
    }
  }
  done(status, value);
}

void LocalRendezvous::StartAbort(const absl::Status& status) {
  std::vector<DoneCallback> waiters;
  absl::Status s;
  {
    MutexLock l(&mu_);
    if (!abort_status_.ok()) return;
    abort_status_ = status.ok() ? absl::CancelledError("rendezvous aborted") : status;
    s = abort_status_;
    for (auto& [key, item] : table_) {
      if (item.waiter) waiters.push_back(std::move(item.waiter));
    }
    table_.clear();  // drop values nobody will receive
  }
  for (auto& w : waiters) w(s, Tensor());
}

}  // namespace strata
