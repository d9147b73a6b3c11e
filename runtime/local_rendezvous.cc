#include "runtime/local_rendezvous.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/mutex.h"
#include "base/status.h"

namespace strata {

LocalRendezvous::~LocalRendezvous() {
  StartAbort(absl::CancelledError("rendezvous destroyed"));
  InFlight* f = in_flight_.get();
  MutexLock l(&f->mu);
  f->mu.Await([f]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) { return f->n == 0; });
}

namespace {

// The sending and receiving device names of a key made by
// Rendezvous::CreateKey ("src;incarnation;dst;tensor").
bool SplitKey(const std::string& key, absl::string_view* src, absl::string_view* dst) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, absl::MaxSplits(';', 3));
  if (parts.size() != 4) return false;
  *src = parts[0];
  *dst = parts[2];
  return true;
}

}  // namespace

absl::Status LocalRendezvous::Send(const std::string& key, const Tensor& value) {
  if (devices_ != nullptr) {
    absl::string_view src_name, dst_name;
    Device* src = nullptr;
    Device* dst = nullptr;
    if (SplitKey(key, &src_name, &dst_name)) {
      auto s = devices_->LookupDevice(src_name);
      auto d = devices_->LookupDevice(dst_name);
      if (s.ok() && d.ok()) {
        src = *s;
        dst = *d;
      }
    }
    if (src != nullptr && value.IsInitialized() && NeedsCopy(*src, *dst, value.dtype())) {
      {
        MutexLock l(&mu_);
        if (!abort_status_.ok()) return abort_status_;
        Item& item = table_[key];
        if (item.copying || item.has_value || item.received) {
          return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' sent twice"));
        }
        item.copying = true;
      }
      {
        MutexLock l(&in_flight_->mu);
        ++in_flight_->n;
      }
      // The receiver gets the copy; a failed copy fails the step, since the
      // receiver can never get its value.
      CopyTensorBetweenDevices(src, dst, value, [this, key](absl::Status s, Tensor t) {
        auto finish = [this, key, s, t = std::move(t), f = in_flight_]() mutable {
          if (s.ok()) s = Deliver(key, t, /*copied=*/true);
          if (!s.ok()) StartAbort(AnnotateStatus(s, absl::StrCat("rendezvous key '", key, "': ")));
          t = Tensor();
          MutexLock l(&f->mu);
          --f->n;
        };
        if (schedule_) {
          // `finish` may run, and the step end (its pool and this rendezvous
          // with it destroyed), while this thread is still inside the
          // scheduler's call: the call holds a count of its own, dropped
          // once it returned (by then `this` is no longer touched).
          std::shared_ptr<InFlight> f = in_flight_;
          {
            MutexLock l(&f->mu);
            ++f->n;
          }
          schedule_(std::move(finish));
          MutexLock l(&f->mu);
          --f->n;
        } else {
          finish();
        }
      });
      return absl::OkStatus();
    }
  }
  return Deliver(key, value, /*copied=*/false);
}

absl::Status LocalRendezvous::Deliver(const std::string& key, const Tensor& value, bool copied) {
  DoneCallback waiter;
  {
    MutexLock l(&mu_);
    if (!abort_status_.ok()) return abort_status_;
    Item& item = table_[key];
    if (item.has_value || item.received || (item.copying && !copied)) {
      return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' sent twice"));
    }
    item.copying = false;
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
