#include "runtime/collective/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/mutex.h"
#include "graph/status.h"
#include "runtime/collective/tcp_socket.h"

namespace strata {
namespace {

constexpr uint32_t kFrameMagic = 0x46505453;  // "STPF"
enum FrameKind : uint32_t { kEager = 1, kReady = 2, kData = 3, kAbort = 4, kClose = 5 };

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t kind = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;  // payload bytes; for kReady the receive's size
  uint32_t code = 0;   // kAbort: the absl::StatusCode
  uint32_t reserved = 0;
};
static_assert(sizeof(FrameHeader) == 32, "wire layout");

constexpr size_t kMaxAbortMessage = 16 << 10;
// kReady frames for sends not posted yet, per peer: a peer that sends more
// is broken (each one is a receive the algorithm posted and has not matched).
constexpr size_t kMaxEarlyReady = 1 << 16;
// Reads of at least this many payload bytes go straight into the posted
// buffer; smaller ones go through the connection's input buffer so that the
// next header arrives in the same system call.
constexpr size_t kDirectReadMin = 32 << 10;
constexpr size_t kInputBufferBytes = 256 << 10;
// At most this much is read into the input buffer per system call: enough
// for a burst of small frames, while a large payload behind a header is
// read (mostly) straight into its destination, not copied through the
// buffer (which cost an extra memcpy of nearly every byte of 256 KiB
// messages).
constexpr size_t kBufferedReadBytes = 8 << 10;
constexpr int kMaxIov = 64;
constexpr uint32_t kWakeId = 0xffffffffu;

absl::StatusCode CodeFromWire(uint32_t code) {
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

class TcpTransport : public Transport {
 public:
  TcpTransport(int rank, int size, const TcpTransportOptions& options, std::vector<UniqueFd> fds);
  ~TcpTransport() override;
  absl::Status Start();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "tcp"; }
  void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) override;
  void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) override;
  void Abort(const absl::Status& status) override { AbortImpl(status, /*broadcast=*/true); }

 private:
  struct Key {
    int peer;
    uint64_t tag;
    bool operator==(const Key& o) const { return peer == o.peer && tag == o.tag; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.peer, k.tag);
    }
  };
  struct PostedRecv {
    char* data;
    size_t bytes;
    Callback done;
    bool ready_sent;  // large: the sender was told to send kData
  };
  struct PendingSend {
    const char* data;
    size_t bytes;
    Callback done;
  };
  struct OutFrame {
    FrameHeader header;
    const char* payload = nullptr;  // the user's buffer, unless owns_payload
    size_t payload_bytes = 0;
    // The payload is `owned` (looked up at each write: a short string's
    // bytes move with the frame, so a pointer into it would dangle).
    bool owns_payload = false;
    std::string owned;
    const char* data() const { return owns_payload ? owned.data() : payload; }
    size_t written = 0;  // of header + payload
    Callback done;       // empty for control frames
  };
  enum class Target { kNone, kUser, kStaged, kDiscard };
  struct Peer {
    int rank = -1;
    UniqueFd fd;
    // Outbound: whoever holds out_mu writes; EPOLLOUT is armed while the
    // socket is full, and the I/O thread continues then.
    Mutex out_mu;
    std::deque<OutFrame> out ABSL_GUARDED_BY(out_mu);
    bool out_armed ABSL_GUARDED_BY(out_mu) = false;
    absl::Status out_error ABSL_GUARDED_BY(out_mu);
    // Inbound: touched only by the I/O thread.
    std::vector<char> in;
    size_t in_begin = 0, in_end = 0;
    bool in_payload = false;
    bool in_closed = false;
    FrameHeader hdr;
    Target target = Target::kNone;
    char* dst = nullptr;
    size_t remaining = 0;
    Callback user_done;  // the receive being filled (Target::kUser)
    std::vector<char> staged;
  };
  using Completion = std::pair<Callback, absl::Status>;

  absl::Status CheckPeer(int peer, const char* what) const;
  absl::Status MismatchError(int src, int dst, uint64_t tag, uint64_t sent, uint64_t expected) const;
  absl::Status AbortStatus() const { return abort_status_; }  // once aborted_ is set
  void AbortImpl(const absl::Status& status, bool broadcast);
  void PeerLost(Peer& p, const std::string& reason);
  void FailPeer(int peer, const absl::Status& status);

  // Outbound.
  void Enqueue(Peer& p, OutFrame f);
  // Writes what the socket takes; true if the connection just failed.
  bool FlushLocked(Peer& p, std::vector<Completion>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.out_mu);
  void SetWriteInterest(Peer& p, bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.out_mu);
  // Runs completions (no lock held) and reports a failed connection.
  void AfterFlush(Peer& p, std::vector<Completion>& done, bool failed);
  static OutFrame ControlFrame(FrameKind kind, uint64_t tag, uint64_t bytes);

  // Inbound (I/O thread).
  void Loop();
  void HandleReadable(Peer& p);
  bool ConsumeInput(Peer& p);
  bool StartFrame(Peer& p);
  void FinishPayload(Peer& p);
  void Protocol(Peer& p, const std::string& what);
  void FailClaimed(Peer& p, const absl::Status& s);
  void StopReading(Peer& p);

  const int rank_, size_;
  const TcpTransportOptions options_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null for this rank
  UniqueFd epoll_fd_, wake_fd_;
  std::thread io_thread_;
  std::atomic<bool> stop_{false};

  // Set once (under mu_) before aborted_ turns true; read after seeing it.
  absl::Status abort_status_;
  std::atomic<bool> aborted_{false};

  Mutex mu_;
  absl::flat_hash_map<Key, PostedRecv> recvs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, std::vector<char>> unexpected_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, uint64_t> early_ready_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, PendingSend> large_sends_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> unexpected_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> early_ready_count_ ABSL_GUARDED_BY(mu_);
  // A peer that closed its transport cleanly (kClose, then EOF): its
  // pending and later operations fail, the others go on.
  std::vector<absl::Status> peer_closed_ ABSL_GUARDED_BY(mu_);
};

TcpTransport::TcpTransport(int rank, int size, const TcpTransportOptions& options,
                           std::vector<UniqueFd> fds)
    : rank_(rank),
      size_(size),
      options_(options),
      peers_(size),
      unexpected_bytes_(size, 0),
      early_ready_count_(size, 0),
      peer_closed_(size) {
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    peers_[r] = std::make_unique<Peer>();
    peers_[r]->rank = r;
    peers_[r]->fd = std::move(fds[r]);
    peers_[r]->in.resize(kInputBufferBytes);
  }
}

absl::Status TcpTransport::Start() {
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) return ErrnoError("tcp transport: epoll_create1");
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) return ErrnoError("tcp transport: eventfd");
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
      for (size_t i = 0; i < p->out.size(); ++i) {
        OutFrame& f = p->out[i];
        if (f.done) done.emplace_back(std::move(f.done), cancelled);
        if (i == 0 && f.written > 0) {
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
    return absl::InternalError(absl::StrCat("tcp transport: rank ", rank_, " cannot ", what, " rank ",
                                            peer, " in a group of ", size_));
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

void TcpTransport::SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) {
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
        large_sends_.emplace(k, PendingSend{static_cast<const char*>(data), bytes, std::move(done)});
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

void TcpTransport::RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) {
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
  const absl::Status s = absl::UnavailableError(
      absl::StrCat("tcp transport: rank ", rank_, " lost its connection to rank ", p.rank, ": ", reason));
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

void TcpTransport::AfterFlush(Peer& p, std::vector<Completion>& done, bool failed) {
  for (auto& [cb, s] : done) cb(s);
  if (failed) PeerLost(p, "its connection failed on send");
}

void TcpTransport::SetWriteInterest(Peer& p, bool on) {
  if (p.out_armed == on) return;
  p.out_armed = on;
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? EPOLLOUT : 0);
  ev.data.u32 = static_cast<uint32_t>(p.rank);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
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
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        SetWriteInterest(p, true);
        return false;
      }
      p.out_error = absl::UnavailableError(absl::StrCat("tcp transport: rank ", rank_,
                                                        " cannot send to rank ", p.rank, ": ",
                                                        std::strerror(errno)));
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

// ---- Inbound (I/O thread) ----

void TcpTransport::Loop() {
  epoll_event events[64];
  const int64_t spin_ns = absl::ToInt64Nanoseconds(options_.poll_spin);
  absl::Time spin_until = absl::InfinitePast();
  while (!stop_.load()) {
    const bool spinning = spin_ns > 0 && absl::Now() < spin_until;
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
      if (events[i].events & EPOLLOUT) {
        std::vector<Completion> done;
        bool failed = false;
        {
          MutexLock l(&p.out_mu);
          if (p.out_error.ok()) failed = FlushLocked(p, &done);
        }
        AfterFlush(p, done, failed);
      }
      if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !p.in_closed) HandleReadable(p);
    }
    if (aborted_.load()) {
      for (auto& p : peers_) {
        if (p) FailClaimed(*p, AbortStatus());
      }
    }
  }
  const absl::Status cancelled = absl::CancelledError("tcp transport destroyed");
  for (auto& p : peers_) {
    if (p) FailClaimed(*p, cancelled);
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
  cb(s);
}

void TcpTransport::StopReading(Peer& p) {
  p.in_closed = true;
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
  for (int round = 0; round < 64 && !p.in_closed; ++round) {
    if (!ConsumeInput(p)) return;
    iovec iov[2];
    int n = 0;
    const bool direct = p.in_payload && p.remaining >= kDirectReadMin && p.target != Target::kDiscard;
    if (direct) iov[n++] = {p.dst, p.remaining};
    if (p.in_begin == p.in_end) p.in_begin = p.in_end = 0;
    iov[n++] = {p.in.data() + p.in_end, std::min(kBufferedReadBytes, p.in.size() - p.in_end)};
    const ssize_t r = readv(p.fd.get(), iov, n);
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
    const std::string reason = r == 0 ? "connection closed" : std::strerror(errno);
    StopReading(p);
    PeerLost(p, reason);
    return;
  }
  // The last read's frames are handled now: epoll reports only new bytes,
  // and if the peer sends nothing more (it may be waiting for them) no
  // later round would come.
  if (!p.in_closed) ConsumeInput(p);
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
      if (p.in_closed) return false;
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
      FailPeer(p.rank, absl::UnavailableError(absl::StrCat("tcp transport: rank ", p.rank,
                                                           " closed its transport")));
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

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(int rank, int size, KeyValueStore& kv,
                                                               const TcpTransportOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: rank ", rank, " is not in a group of ", size));
  }
  if (options.host.empty()) {
    return absl::InvalidArgumentError(
        "tcp transport: options.host is empty (give the address this task listens on)");
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<UniqueFd> fds,
                          EstablishTcpMesh(rank, size, kv, options.host, options.key_prefix,
                                           options.connect_timeout, options.socket_buffer_bytes));
  auto t = std::make_unique<TcpTransport>(rank, size, options, std::move(fds));
  STRATA_RETURN_IF_ERROR(t->Start());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace strata
