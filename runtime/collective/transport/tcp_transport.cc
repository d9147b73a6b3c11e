#include "runtime/collective/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status.h"
#include "runtime/collective/transport/tcp_socket.h"
#include "runtime/collective/transport/tcp_transport_internal.h"

namespace strata {
namespace tcp_internal {

thread_local const TcpTransport* tls_driver = nullptr;

TcpTransport::TcpTransport(int rank, int size, const TcpTransportOptions& options,
                           std::vector<UniqueFd> fds, std::vector<std::unique_ptr<TlsStream>> tls)
    : rank_(rank),
      size_(size),
      options_(options),
      tls_(!tls.empty()),
      peers_(size),
      unexpected_bytes_(size, 0),
      early_ready_count_(size, 0),
      peer_closed_(size) {
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    peers_[r] = std::make_unique<Peer>();
    peers_[r]->rank = r;
    peers_[r]->fd = std::move(fds[r]);
    if (!tls.empty()) peers_[r]->tls = std::move(tls[r]);
    peers_[r]->in.resize(kInputBufferBytes);
  }
}

absl::Status TcpTransport::Start() {
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) return ErrnoError("tcp transport: epoll_create1");
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) return ErrnoError("tcp transport: eventfd");
  driver_wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!driver_wake_fd_.valid()) return ErrnoError("tcp transport: eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kWakeId;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0) {
    return ErrnoError("tcp transport: epoll_ctl");
  }
  for (auto& p : peers_) {
    if (!p) continue;
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(p->rank);
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, p->fd.get(), &ev) != 0) {
      return ErrnoError("tcp transport: epoll_ctl");
    }
  }
  spin_ns_ = absl::ToInt64Nanoseconds(options_.driver_spin);
  io_thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

TcpTransport::~TcpTransport() {
  if (io_thread_.joinable()) {
    stop_.store(true);
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
    io_thread_.join();
  }
  const absl::Status cancelled = absl::CancelledError("tcp transport destroyed");
  std::vector<Callback> failed;
  {
    MutexLock l(&mu_);
    for (auto& kv : recvs_) failed.push_back(std::move(kv.second.done));
    for (auto& kv : large_sends_) failed.push_back(std::move(kv.second.done));
    recvs_.clear();
    large_sends_.clear();
  }
  for (auto& cb : failed) cb(cancelled);
  // Say goodbye, so peers that are still running collectives with others do
  // not take this close for a crash; then finish the frames already started
  // (for a bounded time) so the stream stays well framed.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  for (auto& p : peers_) {
    if (!p) continue;
    std::vector<Completion> done;
    {
      MutexLock l(&p->out_mu);
      std::deque<OutFrame> keep;
      // Under TLS, bytes handed to a write that waits for room go out
      // whatever follows: the frames holding them stay whole too.
      const size_t handed = p->tls ? p->tls->pending_write_bytes() : 0;
      size_t covered = 0;
      for (size_t i = 0; i < p->out.size(); ++i) {
        OutFrame& f = p->out[i];
        if (f.done) done.emplace_back(std::move(f.done), cancelled);
        const bool started = covered < handed || (i == 0 && f.written > 0);
        covered += sizeof(FrameHeader) + f.payload_bytes - f.written;
        if (started) {
          f.owned.assign(f.data(), f.payload_bytes);
          f.owns_payload = true;
          keep.push_back(std::move(f));
        }
      }
      p->out = std::move(keep);
      p->out.push_back(ControlFrame(kClose, 0, 0));
      while (p->out_error.ok() && !p->out.empty() && absl::Now() < deadline) {
        FlushLocked(*p, &done);
        if (p->out.empty() || !p->out_error.ok()) break;
        pollfd pfd{p->fd.get(), POLLOUT, 0};
        poll(&pfd, 1, 50);
      }
    }
    for (auto& [cb, s] : done) cb(s.ok() ? cancelled : s);
    // Drain what the peer sent, so close() sends FIN rather than RST (an
    // RST could discard data the peer has not read yet).
    shutdown(p->fd.get(), SHUT_WR);
    char sink[4096];
    while (read(p->fd.get(), sink, sizeof(sink)) > 0) {
    }
  }
}

absl::Status TcpTransport::CheckPeer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InternalError(absl::StrCat("tcp transport: rank ", rank_, " cannot ", what,
                                            " rank ", peer, " in a group of ", size_));
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::MismatchError(int src, int dst, uint64_t tag, uint64_t sent,
                                         uint64_t expected) const {
  return absl::InternalError(absl::StrCat("tcp transport: rank ", src, " sends ", sent,
                                          " bytes with tag ", tag, " but rank ", dst, " expects ",
                                          expected));
}

TcpTransport::OutFrame TcpTransport::ControlFrame(FrameKind kind, uint64_t tag, uint64_t bytes) {
  OutFrame f;
  f.header.kind = kind;
  f.header.tag = tag;
  f.header.bytes = bytes;
  return f;
}

void TcpTransport::Send(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) {
  if (absl::Status s = CheckPeer(dst, "send to"); !s.ok()) return done(s);
  const Key k{dst, tag};
  const bool eager = bytes <= options_.eager_limit;
  absl::Status error;
  bool mismatch = false;
  {
    MutexLock l(&mu_);
    if (aborted_.load()) {
      error = AbortStatus();
    } else if (!peer_closed_[dst].ok()) {
      error = peer_closed_[dst];
    } else if (auto it = early_ready_.find(k); it != early_ready_.end()) {
      // The receiver posted a large receive and is waiting for kData.
      const uint64_t expected = it->second;
      early_ready_.erase(it);
      --early_ready_count_[dst];
      if (expected != bytes) {
        error = MismatchError(rank_, dst, tag, bytes, expected);
        mismatch = true;
      }
    } else if (!eager) {
      if (large_sends_.contains(k)) {
        error = absl::InternalError(absl::StrCat("tcp transport: second send from rank ", rank_,
                                                 " to ", dst, " with tag ", tag));
      } else {
        large_sends_.emplace(k,
                             PendingSend{static_cast<const char*>(data), bytes, std::move(done)});
        return;  // waits for the receiver's kReady
      }
    }
  }
  if (mismatch) AbortImpl(error, /*broadcast=*/true);
  if (!error.ok()) return done(error);
  OutFrame f = ControlFrame(eager ? kEager : kData, tag, bytes);
  f.payload = static_cast<const char*>(data);
  f.payload_bytes = bytes;
  f.done = std::move(done);
  Enqueue(*peers_[dst], std::move(f));
}

void TcpTransport::Recv(int src, uint64_t tag, void* data, size_t bytes, Callback done) {
  if (absl::Status s = CheckPeer(src, "receive from"); !s.ok()) return done(s);
  const Key k{src, tag};
  std::vector<char> early;
  bool have_early = false, send_ready = false, mismatch = false;
  absl::Status error;
  {
    MutexLock l(&mu_);
    if (aborted_.load()) {
      error = AbortStatus();
    } else if (auto it = unexpected_.find(k); it != unexpected_.end()) {
      // Checked before the copy: a disagreeing peer's bytes never land here.
      unexpected_bytes_[src] -= it->second.size();
      if (it->second.size() != bytes) {
        error = MismatchError(src, rank_, tag, it->second.size(), bytes);
        mismatch = true;
      } else {
        early = std::move(it->second);
        have_early = true;
      }
      unexpected_.erase(it);
    } else if (!peer_closed_[src].ok()) {
      error = peer_closed_[src];
    } else if (recvs_.contains(k)) {
      error = absl::InternalError(absl::StrCat("tcp transport: second receive by rank ", rank_,
                                               " from ", src, " with tag ", tag));
    } else {
      send_ready = bytes > options_.eager_limit;
      recvs_.emplace(k, PostedRecv{static_cast<char*>(data), bytes, std::move(done), send_ready});
    }
  }
  if (mismatch) AbortImpl(error, /*broadcast=*/true);
  if (!error.ok()) return done(error);
  if (have_early) {
    if (bytes > 0) std::memcpy(data, early.data(), bytes);
    return done(absl::OkStatus());
  }
  if (send_ready) Enqueue(*peers_[src], ControlFrame(kReady, tag, bytes));
}

void TcpTransport::AbortImpl(const absl::Status& status, bool broadcast) {
  std::vector<Callback> failed;
  absl::Status s;
  {
    MutexLock l(&mu_);
    if (aborted_.load()) return;  // the first abort wins
    abort_status_ = status.ok() ? absl::AbortedError("tcp transport aborted") : status;
    aborted_.store(true);
    s = abort_status_;
    for (auto& kv : recvs_) failed.push_back(std::move(kv.second.done));
    for (auto& kv : large_sends_) failed.push_back(std::move(kv.second.done));
    recvs_.clear();
    large_sends_.clear();
    unexpected_.clear();
    early_ready_.clear();
  }
  for (auto& p : peers_) {
    if (!p) continue;
    std::vector<Completion> done;
    {
      MutexLock l(&p->out_mu);
      std::deque<OutFrame> keep;
      for (size_t i = 0; i < p->out.size(); ++i) {
        OutFrame& f = p->out[i];
        if (f.done) failed.push_back(std::move(f.done));
        // A frame half on the wire is finished from a copy: the peer must
        // still be able to parse the abort frame behind it.
        if (i == 0 && f.written > 0) {
          f.owned.assign(f.data(), f.payload_bytes);
          f.owns_payload = true;
          keep.push_back(std::move(f));
        }
      }
      p->out = std::move(keep);
      if (broadcast && p->out_error.ok()) {
        const std::string& msg = s.message().size() > kMaxAbortMessage
                                     ? std::string(s.message().substr(0, kMaxAbortMessage))
                                     : std::string(s.message());
        OutFrame f = ControlFrame(kAbort, 0, msg.size());
        f.header.code = static_cast<uint32_t>(s.code());
        f.owned = msg;
        f.owns_payload = true;
        f.payload_bytes = f.owned.size();
        p->out.push_back(std::move(f));
      }
      if (!p->out_armed && p->out_error.ok()) FlushLocked(*p, &done);
    }
    for (auto& [cb, st] : done) cb(st);  // already aborted: a failed write adds nothing
  }
  // The I/O thread fails the receive it is filling, if any.
  const uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
  for (auto& cb : failed) cb(s);
}

void TcpTransport::PeerLost(Peer& p, const std::string& reason) {
  bool clean;
  {
    MutexLock l(&mu_);
    clean = !peer_closed_[p.rank].ok();
  }
  const absl::Status s = absl::UnavailableError(absl::StrCat(
      "tcp transport: rank ", rank_, " lost its connection to rank ", p.rank, ": ", reason));
  if (clean) {
    FailPeer(p.rank, s);
  } else {
    AbortImpl(s, /*broadcast=*/true);
  }
}

void TcpTransport::FailPeer(int peer, const absl::Status& status) {
  std::vector<Callback> failed;
  {
    MutexLock l(&mu_);
    if (peer_closed_[peer].ok()) peer_closed_[peer] = status;
    for (auto* m : {&recvs_}) {
      for (auto it = m->begin(); it != m->end();) {
        if (it->first.peer == peer) {
          failed.push_back(std::move(it->second.done));
          m->erase(it++);
        } else {
          ++it;
        }
      }
    }
    for (auto it = large_sends_.begin(); it != large_sends_.end();) {
      if (it->first.peer == peer) {
        failed.push_back(std::move(it->second.done));
        large_sends_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& cb : failed) cb(status);
}

// ---- Outbound ----

void TcpTransport::Enqueue(Peer& p, OutFrame f) {
  std::vector<Completion> done;
  bool failed = false;
  {
    MutexLock l(&p.out_mu);
    if (f.done && aborted_.load()) {
      done.emplace_back(std::move(f.done), AbortStatus());
    } else if (!p.out_error.ok()) {
      if (f.done) done.emplace_back(std::move(f.done), p.out_error);
    } else {
      p.out.push_back(std::move(f));
      if (!p.out_armed) failed = FlushLocked(p, &done);
    }
  }
  AfterFlush(p, done, failed);
}

void TcpTransport::Flush(Peer& p) {
  std::vector<Completion> done;
  bool failed = false;
  {
    MutexLock l(&p.out_mu);
    if (p.out_error.ok()) failed = FlushLocked(p, &done);
  }
  AfterFlush(p, done, failed);
}

void TcpTransport::AfterFlush(Peer& p, std::vector<Completion>& done, bool failed) {
  for (auto& [cb, s] : done) cb(s);
  if (failed) PeerLost(p, "its connection failed on send");
}

void TcpTransport::SetWriteInterest(Peer& p, bool on) {
  if (p.out_armed == on) return;
  p.out_armed = on;
  UpdateEpoll(p);
}

void TcpTransport::UpdateEpoll(Peer& p) {
  const uint32_t want = p.io_paused ? 0 : EPOLLIN | (p.out_armed ? EPOLLOUT : 0);
  if (want == p.epoll_events) return;
  p.epoll_events = want;
  epoll_event ev{};
  ev.events = want;
  ev.data.u32 = static_cast<uint32_t>(p.rank);
  // ENOENT once reading stopped (the socket left the set): nothing to watch.
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
}

ssize_t TcpTransport::ReadSome(Peer& p, const iovec* iov, int n) {
  if (p.tls) return p.tls->Readv(iov, n);
  return readv(p.fd.get(), iov, n);
}

ssize_t TcpTransport::WriteSome(Peer& p, const iovec* iov, int n) {
  if (p.tls) return p.tls->Writev(iov, n);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = n;
  return sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::string TcpTransport::IoError(const Peer& p, int err) {
  if (p.tls && err == EPROTO) return absl::StrCat("TLS: ", p.tls->error());
  return std::strerror(err);
}

bool TcpTransport::BufferedInput(Peer& p) {
  return p.tls && !p.in_closed.load() && p.tls->HasBufferedInput();
}

bool TcpTransport::FlushLocked(Peer& p, std::vector<Completion>* done) {
  while (!p.out.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (size_t i = 0; i < p.out.size() && n + 2 <= kMaxIov; ++i) {
      const OutFrame& f = p.out[i];
      size_t off = f.written;
      if (off < sizeof(FrameHeader)) {
        iov[n++] = {reinterpret_cast<char*>(const_cast<FrameHeader*>(&f.header)) + off,
                    sizeof(FrameHeader) - off};
        off = sizeof(FrameHeader);
      }
      const size_t pay = off - sizeof(FrameHeader);
      if (pay < f.payload_bytes) {
        iov[n++] = {const_cast<char*>(f.data()) + pay, f.payload_bytes - pay};
      }
    }
    ssize_t w = WriteSome(p, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        SetWriteInterest(p, true);
        return false;
      }
      p.out_error = absl::UnavailableError(absl::StrCat(
          "tcp transport: rank ", rank_, " cannot send to rank ", p.rank, ": ", IoError(p, errno)));
      for (auto& f : p.out) {
        if (f.done) done->emplace_back(std::move(f.done), p.out_error);
      }
      p.out.clear();
      SetWriteInterest(p, false);
      return true;
    }
    size_t left = static_cast<size_t>(w);
    while (left > 0 || (!p.out.empty() && p.out.front().written ==
                                              sizeof(FrameHeader) + p.out.front().payload_bytes)) {
      OutFrame& f = p.out.front();
      const size_t total = sizeof(FrameHeader) + f.payload_bytes;
      const size_t step = std::min(left, total - f.written);
      f.written += step;
      left -= step;
      if (f.written < total) break;
      if (f.done) done->emplace_back(std::move(f.done), absl::OkStatus());
      p.out.pop_front();
    }
  }
  SetWriteInterest(p, false);
  return false;
}

// ---- Caller-driven progress ----

Transport::Callback TcpTransport::Notifying(Callback done) {
  return [this, done = std::move(done)](absl::Status s) {
    done(std::move(s));
    NotifyWaiters();
  };
}

void TcpTransport::NotifyWaiters() {
  // A driver sleeping in poll() sees only its sockets: a completion on any
  // other thread (the I/O thread, a thread posting a send that flushed this
  // one, an abort) wakes it through its eventfd.
  if (tls_driver != this && driver_sleeping_.load()) {
    const uint64_t one = 1;
    (void)!write(driver_wake_fd_.get(), &one, sizeof(one));
  }
  if (drive_waiters_.load() > 0) {
    MutexLock l(&drive_mu_);
    drive_cv_.SignalAll();
  }
}

bool TcpTransport::DriveUntil(const std::function<void()>& start,
                              const std::function<bool()>& done) {
  // From a callback run by the driver: callbacks must not block.
  if (!options_.caller_drives || tls_driver == this) {
    start();
    return false;
  }
  bool mine;
  {
    MutexLock l(&drive_mu_);
    mine = !driving_;
    if (mine) {
      driving_ = true;
      PauseIo(true);
    }
  }
  // Marked as the driver while posting, so that the posts do not resume the
  // I/O thread: this thread drives them, or the current driver does (and
  // resumes the I/O thread when it leaves them pending).
  tls_driver = this;
  start();
  if (!mine) {
    tls_driver = nullptr;
    MutexLock l(&drive_mu_);
    // Counted before done() is read: a completion that done() missed sees
    // the count and signals (under drive_mu_, so not before the Wait).
    ++drive_waiters_;
    while (driving_ && !done()) drive_cv_.Wait(&drive_mu_);
    --drive_waiters_;
    if (done()) return true;
    driving_ = true;
    PauseIo(true);
    tls_driver = this;
  }
  Drive(done);
  tls_driver = nullptr;
  MutexLock l(&drive_mu_);
  driving_ = false;
  if (AnyPending()) PauseIo(false);
  drive_cv_.SignalAll();  // another waiter may take over
  return true;
}

void TcpTransport::PauseIo(bool paused) {
  // The I/O thread stops watching the sockets, so that it is not woken for
  // bytes a driver reads anyway; it still watches wake_fd_ (aborts) and
  // gets errors and hang-ups, which it handles under in_mu as usual.
  if (io_paused_.load() == paused) return;
  io_paused_.store(paused);
  for (auto& p : peers_) {
    if (!p) continue;
    MutexLock l(&p->out_mu);
    p->io_paused = paused;
    UpdateEpoll(*p);
  }
}

bool TcpTransport::AnyPending() {
  // Not under in_mu (callbacks run under it and take drive_mu_): claimed_
  // counts the receives being filled.
  if (claimed_.load() > 0) return true;
  {
    MutexLock l(&mu_);
    if (!recvs_.empty() || !large_sends_.empty()) return true;
  }
  for (auto& p : peers_) {
    if (!p) continue;
    MutexLock l(&p->out_mu);
    if (!p->out.empty()) return true;
  }
  return false;
}

void TcpTransport::ResumeIoIfUndriven() {
  // After the operation is registered: a driver that leaves after this
  // check sees it pending and resumes the I/O thread itself.
  if (!io_paused_.load() || tls_driver == this) return;
  MutexLock l(&drive_mu_);
  if (!driving_) PauseIo(false);
}

void TcpTransport::Drive(const std::function<bool()>& done) {
  // Polling pays only if the peer's bytes come while this thread polls,
  // i.e. if the peer is running: on a loaded machine it may be waiting for
  // the very core this thread spins on. So each empty poll yields the core,
  // and the spin adapts to the gaps the sleeps measure (below).
  const int64_t max_spin_ns = absl::ToInt64Nanoseconds(options_.driver_spin);
  std::vector<pollfd> fds;
  std::vector<Peer*> who;
  int64_t idle_since = Nanos();
  while (!done()) {
    fds.clear();
    who.clear();
    // Bytes TLS decrypted already are read now: poll() cannot see them.
    bool buffered = false;
    for (auto& p : peers_) {
      if (!p) continue;
      if (BufferedInput(*p)) {
        MutexLock l(&p->in_mu);
        if (!p->in_closed.load()) HandleReadable(*p);
        buffered = buffered || BufferedInput(*p);
        idle_since = Nanos();
      }
      short events = p->in_closed.load() ? 0 : POLLIN;
      {
        MutexLock l(&p->out_mu);
        if (p->out_armed && p->out_error.ok()) events |= POLLOUT;
      }
      if (events == 0) continue;
      fds.push_back({p->fd.get(), events, 0});
      who.push_back(p.get());
    }
    // Poll without blocking for `spin` after the last progress (the next
    // message of a ring step usually comes within it), then sleep in poll()
    // on the sockets themselves: the kernel wakes this thread directly.
    const bool sleep = !buffered && Nanos() - idle_since >= spin_ns_;
    if (sleep) {
      driver_sleeping_.store(true);
      if (done()) {
        driver_sleeping_.store(false);
        break;
      }
      fds.push_back({driver_wake_fd_.get(), POLLIN, 0});
    }
    const int n = poll(fds.data(), fds.size(), sleep ? -1 : 0);
    if (sleep) {
      // The wait this sleep ended: had it been shorter than driver_spin, a
      // spin of twice it would have caught the bytes without the wake-up
      // (which costs more than such a wait on a busy machine); a longer
      // one halves the spin. Doubling only the spin itself (and halving it
      // before every sleep) left it stuck near zero once it got there,
      // whatever the gaps: a 16 KiB all-gather took 9 or 55 us by chance.
      const int64_t waited = Nanos() - idle_since;
      spin_ns_ = waited < max_spin_ns
                     ? std::min(max_spin_ns, std::max<int64_t>({2 * spin_ns_, 2 * waited, 1000}))
                     : spin_ns_ / 2;
      driver_sleeping_.store(false);
      if (fds.back().revents != 0) {
        uint64_t v;
        (void)!read(driver_wake_fd_.get(), &v, sizeof(v));
      }
      fds.pop_back();
    }
    if (n < 0) {
      if (errno != EINTR) AbortImpl(ErrnoError("tcp transport: poll"), /*broadcast=*/true);
    }
    if (n == 0 && !sleep) sched_yield();
    bool progressed = false;
    for (size_t i = 0; n > 0 && i < who.size(); ++i) {
      Peer& p = *who[i];
      const short got = fds[i].revents;
      if (got & POLLOUT) {
        Flush(p);
        progressed = true;
      }
      if (got & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
        MutexLock l(&p.in_mu);
        if (!p.in_closed.load()) HandleReadable(p);
        progressed = true;
      }
    }
    // The receive this rank was filling when the transport aborted ends
    // here rather than waiting for the I/O thread.
    if (aborted_.load()) FailAllClaimed(AbortStatus());
    if (progressed) idle_since = Nanos();
  }
}

}  // namespace tcp_internal

namespace {

// TLS over every connection of the mesh: this rank connected to the higher
// ranks, so it is their client and checks that their certificates name the
// hosts they published.
absl::StatusOr<std::vector<std::unique_ptr<TlsStream>>> ShakeHands(
    int rank, int size, KeyValueStore& kv, const TcpTransportOptions& options,
    const std::vector<UniqueFd>& fds) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const TlsContext> ctx, TlsContext::Create(*options.tls));
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  std::vector<std::unique_ptr<TlsStream>> tls(size);
  std::vector<TlsStream*> streams;
  std::vector<std::string> names;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    STRATA_ASSIGN_OR_RETURN(std::string address,
                            kv.Get(absl::StrCat(options.key_prefix, "/addr/", p),
                                   std::max(absl::Seconds(1), deadline - absl::Now())));
    std::string host;
    int port = 0;
    STRATA_RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
    tls[p] = ctx->NewStream(fds[p].get(), /*is_client=*/p > rank, host);
    streams.push_back(tls[p].get());
    names.push_back(absl::StrCat("rank ", p, " (", address, ")"));
  }
  absl::Status s = TlsHandshakeAll(streams, names, deadline);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("tcp transport: rank ", rank, ": ", s.message()));
  }
  return tls;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const TcpTransportOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: rank ", rank, " is not in a group of ", size));
  }
  if (options.host.empty()) {
    return absl::InvalidArgumentError(
        "tcp transport: options.host is empty (give the address this task listens on)");
  }
  STRATA_ASSIGN_OR_RETURN(
      std::vector<UniqueFd> fds,
      EstablishTcpMesh(
          rank, size, kv, options.host, options.key_prefix, options.connect_timeout,
          TcpSocketOptions{options.socket_buffer_bytes, options.congestion_control,
                           options.job_token.has_value() ? &*options.job_token : nullptr}));
  std::vector<std::unique_ptr<TlsStream>> tls;
  if (options.tls.has_value()) {
    STRATA_ASSIGN_OR_RETURN(tls, ShakeHands(rank, size, kv, options, fds));
  }
  auto t = std::make_unique<tcp_internal::TcpTransport>(rank, size, options, std::move(fds),
                                                        std::move(tls));
  STRATA_RETURN_IF_ERROR(t->Start());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace strata
