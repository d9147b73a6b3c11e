#include "runtime/collective/transport/in_process_transport.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata {

namespace {

class InProcessTransport : public Transport {
 public:
  InProcessTransport(std::shared_ptr<InProcessMailbox> mailbox, int rank)
      : mailbox_(std::move(mailbox)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return mailbox_->size(); }
  const char* kind() const override { return "in_process"; }
  void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) override {
    mailbox_->Send(rank_, dst, tag, data, bytes, std::move(done));
  }
  void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) override {
    mailbox_->Recv(src, rank_, tag, data, bytes, std::move(done));
  }
  void Abort(const absl::Status& status) override { mailbox_->Abort(status); }

 private:
  const std::shared_ptr<InProcessMailbox> mailbox_;
  const int rank_;
};

}  // namespace

std::unique_ptr<Transport> InProcessMailbox::Connect(int rank) {
  return std::make_unique<InProcessTransport>(shared_from_this(), rank);
}

absl::Status InProcessMailbox::CheckRanks(int src, int dst) const {
  if (src < 0 || src >= size_ || dst < 0 || dst >= size_ || src == dst) {
    return absl::InternalError(
        absl::StrCat("transport: bad ranks src=", src, " dst=", dst, " in a group of ", size_));
  }
  return absl::OkStatus();
}

void InProcessMailbox::Complete(const Key& k, Posted send, Posted recv) {
  if (send.bytes != recv.bytes) {
    // Both sides are our algorithms: a mismatch is our bug.
    absl::Status s = absl::InternalError(absl::StrCat("transport: rank ", k.src, " sent ", send.bytes,
                                                      " bytes with tag ", k.tag, " but rank ", k.dst,
                                                      " expected ", recv.bytes));
    recv.done(s);
    send.done(s);
    return;
  }
  if (send.bytes > 0) std::memcpy(recv.data, send.data, send.bytes);
  recv.done(absl::OkStatus());
  send.done(absl::OkStatus());
}

void InProcessMailbox::Send(int src, int dst, uint64_t tag, const void* data, size_t bytes,
                            Transport::Callback done) {
  if (absl::Status s = CheckRanks(src, dst); !s.ok()) return done(s);
  const Key k{src, dst, tag};
  Posted send{const_cast<void*>(data), bytes, std::move(done)};
  Posted recv;
  absl::Status error;
  {
    MutexLock l(&mu_);
    if (!aborted_.ok()) {
      error = aborted_;
    } else if (auto it = recvs_.find(k); it != recvs_.end()) {
      recv = std::move(it->second);
      recvs_.erase(it);
    } else if (sends_.contains(k)) {
      error = absl::InternalError(absl::StrCat("transport: second send from rank ", src, " to ",
                                               dst, " with tag ", tag));
    } else {
      sends_.emplace(k, std::move(send));
      return;  // waits for its receive
    }
  }
  if (!error.ok()) return send.done(error);
  Complete(k, std::move(send), std::move(recv));
}

void InProcessMailbox::Recv(int src, int dst, uint64_t tag, void* data, size_t bytes,
                            Transport::Callback done) {
  if (absl::Status s = CheckRanks(src, dst); !s.ok()) return done(s);
  const Key k{src, dst, tag};
  Posted recv{data, bytes, std::move(done)};
  Posted send;
  absl::Status error;
  {
    MutexLock l(&mu_);
    if (!aborted_.ok()) {
      error = aborted_;
    } else if (auto it = sends_.find(k); it != sends_.end()) {
      send = std::move(it->second);
      sends_.erase(it);
    } else if (recvs_.contains(k)) {
      error = absl::InternalError(absl::StrCat("transport: second receive by rank ", dst, " from ",
                                               src, " with tag ", tag));
    } else {
      recvs_.emplace(k, std::move(recv));
      return;  // waits for its send
    }
  }
  if (!error.ok()) return recv.done(error);
  Complete(k, std::move(send), std::move(recv));
}

void InProcessMailbox::Abort(const absl::Status& status) {
  std::vector<Transport::Callback> failed;
  absl::Status s;
  {
    MutexLock l(&mu_);
    if (aborted_.ok()) aborted_ = status.ok() ? absl::AbortedError("transport aborted") : status;
    s = aborted_;
    for (auto& kv : sends_) failed.push_back(std::move(kv.second.done));
    for (auto& kv : recvs_) failed.push_back(std::move(kv.second.done));
    sends_.clear();
    recvs_.clear();
  }
  for (auto& cb : failed) cb(s);
}

}  // namespace strata
