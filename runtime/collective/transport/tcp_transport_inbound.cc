// TcpTransport's inbound side: the I/O thread's loop and the parsing and
// dispatching of frames, run by whoever holds a connection's in_mu (the I/O
// thread or a thread driving in DriveUntil). See tcp_transport_internal.h.
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/run_queue.h"
#include "runtime/collective/transport/tcp_transport_internal.h"

namespace strata {
namespace tcp_internal {

void TcpTransport::Loop() {
  CountThisThreadsRunQueueDelay();
  epoll_event events[64];
  const int64_t spin_ns = absl::ToInt64Nanoseconds(options_.poll_spin);
  absl::Time spin_until = absl::InfinitePast();
  bool buffered = false;
  while (!stop_.load()) {
    const bool spinning = buffered || (spin_ns > 0 && absl::Now() < spin_until);
    const int n = epoll_wait(epoll_fd_.get(), events, 64, spinning ? 0 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      AbortImpl(ErrnoError("tcp transport: epoll_wait"), /*broadcast=*/true);
      break;
    }
    if (n > 0 && spin_ns > 0) spin_until = absl::Now() + options_.poll_spin;
    for (int i = 0; i < n; ++i) {
      const uint32_t id = events[i].data.u32;
      if (id == kWakeId) {
        uint64_t v;
        (void)!read(wake_fd_.get(), &v, sizeof(v));
        continue;
      }
      Peer& p = *peers_[id];
      if (events[i].events & EPOLLOUT) Flush(p);
      if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !p.in_closed.load()) {
        MutexLock l(&p.in_mu);
        if (!p.in_closed.load()) HandleReadable(p);
      }
    }
    buffered = ServeBufferedInput();
    if (aborted_.load()) FailAllClaimed(AbortStatus());
  }
  FailAllClaimed(absl::CancelledError("tcp transport destroyed"));
}

bool TcpTransport::ServeBufferedInput() {
  if (!tls_) return false;  // plaintext: the sockets hold every unread byte
  bool left = false;
  for (auto& p : peers_) {
    if (!p || !BufferedInput(*p)) continue;
    // A driver serves the sockets now: it reads these too.
    if (io_paused_.load()) return false;
    MutexLock l(&p->in_mu);
    if (!p->in_closed.load()) HandleReadable(*p);
    left = left || BufferedInput(*p);
  }
  return left;
}

void TcpTransport::FailAllClaimed(const absl::Status& s) {
  for (auto& p : peers_) {
    if (!p) continue;
    MutexLock l(&p->in_mu);
    FailClaimed(*p, s);
  }
}

void TcpTransport::FailClaimed(Peer& p, const absl::Status& s) {
  if (p.target != Target::kUser) return;
  // The rest of this payload is read and dropped: the buffer is the
  // caller's again once its callback ran.
  p.target = Target::kDiscard;
  p.dst = nullptr;
  Callback cb = std::move(p.user_done);
  p.user_done = nullptr;
  --claimed_;
  cb(s);
}

void TcpTransport::StopReading(Peer& p) {
  p.in_closed.store(true);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
  FailClaimed(p, aborted_.load() ? AbortStatus()
                                 : absl::UnavailableError(absl::StrCat(
                                       "tcp transport: connection to rank ", p.rank, " closed")));
}

void TcpTransport::Protocol(Peer& p, const std::string& what) {
  AbortImpl(absl::DataLossError(absl::StrCat("tcp transport: rank ", p.rank, " sent ", what,
                                             " to rank ", rank_, "; connection dropped")),
            /*broadcast=*/true);
  StopReading(p);
}

void TcpTransport::HandleReadable(Peer& p) {
  // Bounded per event so one busy peer does not starve the others
  // (epoll is level-triggered: what is left in the socket comes next round).
  for (int round = 0; round < 64 && !p.in_closed.load(); ++round) {
    if (!ConsumeInput(p)) return;
    iovec iov[2];
    int n = 0;
    const bool direct =
        p.in_payload && p.remaining >= kDirectReadMin && p.target != Target::kDiscard;
    if (direct) iov[n++] = {p.dst, p.remaining};
    if (p.in_begin == p.in_end) p.in_begin = p.in_end = 0;
    iov[n++] = {p.in.data() + p.in_end, std::min(kBufferedReadBytes, p.in.size() - p.in_end)};
    const ssize_t r = ReadSome(p, iov, n);
    if (r > 0) {
      size_t got = static_cast<size_t>(r);
      if (direct) {
        const size_t d = std::min(got, p.remaining);
        p.dst += d;
        p.remaining -= d;
        got -= d;
      }
      p.in_end += got;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    const std::string reason = r == 0 ? "connection closed" : IoError(p, errno);
    StopReading(p);
    PeerLost(p, reason);
    return;
  }
  // The last read's frames are handled now: epoll reports only new bytes,
  // and if the peer sends nothing more (it may be waiting for them) no
  // later round would come.
  if (!p.in_closed.load()) ConsumeInput(p);
}

bool TcpTransport::ConsumeInput(Peer& p) {
  for (;;) {
    const size_t avail = p.in_end - p.in_begin;
    if (p.in_payload) {
      if (p.remaining > 0) {
        const size_t n = std::min(avail, p.remaining);
        if (n == 0) return true;
        if (p.target != Target::kDiscard) std::memcpy(p.dst, p.in.data() + p.in_begin, n);
        if (p.dst != nullptr) p.dst += n;
        p.in_begin += n;
        p.remaining -= n;
        if (p.remaining > 0) return true;
      }
      FinishPayload(p);
      if (p.in_closed.load()) return false;
      continue;
    }
    if (avail < sizeof(FrameHeader)) {
      if (p.in_begin > 0) {
        std::memmove(p.in.data(), p.in.data() + p.in_begin, avail);
        p.in_begin = 0;
        p.in_end = avail;
      }
      return true;
    }
    std::memcpy(&p.hdr, p.in.data() + p.in_begin, sizeof(FrameHeader));
    p.in_begin += sizeof(FrameHeader);
    if (!StartFrame(p)) return false;
  }
}

bool TcpTransport::StartFrame(Peer& p) {
  const FrameHeader& h = p.hdr;
  if (h.magic != kFrameMagic) {
    Protocol(p, absl::StrCat("a malformed frame (magic 0x", absl::Hex(h.magic), ")"));
    return false;
  }
  const Key k{p.rank, h.tag};
  p.in_payload = true;
  p.target = Target::kDiscard;
  p.dst = nullptr;
  p.remaining = 0;
  absl::Status error;
  std::string violation;
  PendingSend go;
  bool send_now = false;
  switch (h.kind) {
    case kEager:
    case kData: {
      if (h.kind == kEager && h.bytes > options_.eager_limit) {
        violation = absl::StrCat("an eager message of ", h.bytes, " bytes (limit ",
                                 options_.eager_limit, ")");
        break;
      }
      MutexLock l(&mu_);
      if (aborted_.load()) {
        p.remaining = h.bytes;  // the frame is well formed: skip it
        break;
      }
      auto it = recvs_.find(k);
      const bool posted = it != recvs_.end() && (h.kind == kEager || it->second.ready_sent);
      if (posted && it->second.bytes != h.bytes) {
        // Rejected on the header alone, before a byte is copied.
        error = MismatchError(p.rank, rank_, h.tag, h.bytes, it->second.bytes);
        p.remaining = h.bytes;  // dropped unread into nothing: no allocation
      } else if (posted) {
        p.target = Target::kUser;
        p.dst = it->second.data;
        p.remaining = h.bytes;
        p.user_done = std::move(it->second.done);
        recvs_.erase(it);
        ++claimed_;
      } else if (h.kind == kData) {
        violation = absl::StrCat("data with tag ", h.tag, " that was never requested");
      } else if (unexpected_.contains(k)) {
        violation = absl::StrCat("a second message with tag ", h.tag);
      } else if (unexpected_bytes_[p.rank] + h.bytes > options_.max_unexpected_bytes) {
        violation = absl::StrCat("more than ", options_.max_unexpected_bytes,
                                 " bytes of messages nobody receives");
      } else {
        unexpected_bytes_[p.rank] += h.bytes;
        p.target = Target::kStaged;
        p.staged.assign(h.bytes, 0);  // at most eager_limit
        p.dst = p.staged.data();
        p.remaining = h.bytes;
      }
      break;
    }
    case kReady: {
      p.in_payload = false;
      MutexLock l(&mu_);
      if (aborted_.load()) break;
      if (auto it = large_sends_.find(k); it != large_sends_.end()) {
        go = std::move(it->second);
        large_sends_.erase(it);
        if (go.bytes != h.bytes) {
          error = MismatchError(rank_, p.rank, h.tag, go.bytes, h.bytes);
        } else {
          send_now = true;
        }
      } else if (early_ready_.contains(k)) {
        violation = absl::StrCat("a second request for tag ", h.tag);
      } else if (early_ready_count_[p.rank] >= kMaxEarlyReady) {
        violation = absl::StrCat("more than ", kMaxEarlyReady, " unmatched requests");
      } else {
        early_ready_.emplace(k, h.bytes);
        ++early_ready_count_[p.rank];
      }
      break;
    }
    case kAbort:
      if (h.bytes > kMaxAbortMessage) {
        violation = absl::StrCat("an abort message of ", h.bytes, " bytes");
        break;
      }
      p.target = Target::kStaged;
      p.staged.assign(h.bytes, 0);
      p.dst = p.staged.data();
      p.remaining = h.bytes;
      break;
    case kClose:
      p.in_payload = false;
      FailPeer(p.rank, absl::UnavailableError(
                           absl::StrCat("tcp transport: rank ", p.rank, " closed its transport")));
      break;
    default:
      violation = absl::StrCat("a frame of unknown kind ", h.kind);
  }
  if (!violation.empty()) {
    if (go.done) go.done(absl::DataLossError("tcp transport: protocol violation"));
    Protocol(p, violation);
    return false;
  }
  if (!error.ok()) {
    AbortImpl(error, /*broadcast=*/true);
    if (go.done) go.done(error);
  }
  if (send_now) {
    OutFrame f = ControlFrame(kData, h.tag, go.bytes);
    f.payload = go.data;
    f.payload_bytes = go.bytes;
    f.done = std::move(go.done);
    Enqueue(p, std::move(f));
  }
  return true;
}

void TcpTransport::FinishPayload(Peer& p) {
  p.in_payload = false;
  const Target target = p.target;
  p.target = Target::kNone;
  p.dst = nullptr;
  if (target == Target::kUser) {
    Callback cb = std::move(p.user_done);
    p.user_done = nullptr;
    --claimed_;
    cb(absl::OkStatus());
    return;
  }
  if (target != Target::kStaged) return;
  if (p.hdr.kind == kAbort) {
    absl::Status s(CodeFromWire(p.hdr.code), std::string(p.staged.begin(), p.staged.end()));
    AbortImpl(s, /*broadcast=*/false);
    return;
  }
  const Key k{p.rank, p.hdr.tag};
  Callback cb;
  absl::Status error;
  {
    MutexLock l(&mu_);
    if (aborted_.load()) return;
    auto it = recvs_.find(k);
    if (it == recvs_.end()) {
      unexpected_.emplace(k, std::move(p.staged));
      p.staged = {};
      return;
    }
    unexpected_bytes_[p.rank] -= p.staged.size();
    if (it->second.bytes != p.staged.size()) {
      error = MismatchError(p.rank, rank_, p.hdr.tag, p.staged.size(), it->second.bytes);
    } else {
      if (!p.staged.empty()) std::memcpy(it->second.data, p.staged.data(), p.staged.size());
      cb = std::move(it->second.done);
      recvs_.erase(it);
    }
  }
  if (!error.ok()) return AbortImpl(error, /*broadcast=*/true);
  cb(absl::OkStatus());
}

}  // namespace tcp_internal
}  // namespace strata
