// The internals of TcpTransport (tcp_transport.h), shared by its two source
// files: tcp_transport.cc (set-up, posting, aborts, writing, and the waiting
// thread's drive) and tcp_transport_inbound.cc (reading and dispatching
// frames). Not an API: include tcp_transport.h.
//
//   auto t = std::make_unique<tcp_internal::TcpTransport>(rank, size, options, std::move(fds));
//   STRATA_RETURN_IF_ERROR(t->Start());
//
// Thread-safety: as TcpTransport's. Ownership: the transport owns its
// sockets and its I/O thread.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_INTERNAL_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_INTERNAL_H_

#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/mutex.h"
#include "runtime/collective/transport/tcp_socket.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/security/tls.h"

namespace strata {
namespace tcp_internal {

inline constexpr uint32_t kFrameMagic = 0x46505453;  // "STPF"
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

inline constexpr size_t kMaxAbortMessage = 16 << 10;
// kReady frames for sends not posted yet, per peer: a peer that sends more
// is broken (each one is a receive the algorithm posted and has not matched).
inline constexpr size_t kMaxEarlyReady = 1 << 16;
// Reads of at least this many payload bytes go straight into the posted
// buffer; smaller ones go through the connection's input buffer so that the
// next header arrives in the same system call.
inline constexpr size_t kDirectReadMin = 32 << 10;
inline constexpr size_t kInputBufferBytes = 256 << 10;
// At most this much is read into the input buffer per system call: enough
// for a burst of small frames, while a large payload behind a header is
// read (mostly) straight into its destination, not copied through the
// buffer (which cost an extra memcpy of nearly every byte of 256 KiB
// messages).
inline constexpr size_t kBufferedReadBytes = 8 << 10;
inline constexpr int kMaxIov = 64;
inline constexpr uint32_t kWakeId = 0xffffffffu;

class TcpTransport;
// The transport this thread is driving in DriveUntil, if any: completions it
// runs itself need not wake it.
extern thread_local const TcpTransport* tls_driver;

inline int64_t Nanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline absl::StatusCode CodeFromWire(uint32_t code) {
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

class TcpTransport : public Transport {
 public:
  // tls: empty, or a finished TLS session per peer over fds[peer].
  TcpTransport(int rank, int size, const TcpTransportOptions& options, std::vector<UniqueFd> fds,
               std::vector<std::unique_ptr<TlsStream>> tls = {});
  ~TcpTransport() override;
  absl::Status Start();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "tcp"; }
  void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) override {
    Send(dst, tag, data, bytes, Notifying(std::move(done)));
    ResumeIoIfUndriven();
  }
  void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) override {
    Recv(src, tag, data, bytes, Notifying(std::move(done)));
    ResumeIoIfUndriven();
  }
  void Abort(const absl::Status& status) override { AbortImpl(status, /*broadcast=*/true); }
  bool DriveUntil(const std::function<void()>& start, const std::function<bool()>& done) override;

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
    // Null: plaintext. Else every byte goes through it (it serializes the
    // reader under in_mu and the writer under out_mu itself).
    std::unique_ptr<TlsStream> tls;
    // Outbound: whoever holds out_mu writes; out_armed while the socket is
    // full, and then whoever serves the socket (the I/O thread through
    // EPOLLOUT, or a driving waiter) continues.
    Mutex out_mu;
    std::deque<OutFrame> out ABSL_GUARDED_BY(out_mu);
    bool out_armed ABSL_GUARDED_BY(out_mu) = false;
    // A thread in DriveUntil serves this socket: the I/O thread's epoll does
    // not watch it (epoll_events is what is registered there).
    bool io_paused ABSL_GUARDED_BY(out_mu) = false;
    uint32_t epoll_events ABSL_GUARDED_BY(out_mu) = EPOLLIN;
    absl::Status out_error ABSL_GUARDED_BY(out_mu);
    // Inbound: touched only under in_mu, by the I/O thread or a driver.
    Mutex in_mu;
    std::atomic<bool> in_closed{false};
    std::vector<char> in;
    size_t in_begin = 0, in_end = 0;
    bool in_payload = false;
    FrameHeader hdr;
    Target target = Target::kNone;
    char* dst = nullptr;
    size_t remaining = 0;
    Callback user_done;  // the receive being filled (Target::kUser)
    std::vector<char> staged;
  };
  using Completion = std::pair<Callback, absl::Status>;

  void Send(int dst, uint64_t tag, const void* data, size_t bytes, Callback done);
  void Recv(int src, uint64_t tag, void* data, size_t bytes, Callback done);
  absl::Status CheckPeer(int peer, const char* what) const;
  absl::Status MismatchError(int src, int dst, uint64_t tag, uint64_t sent,
                             uint64_t expected) const;
  absl::Status AbortStatus() const { return abort_status_; }  // once aborted_ is set
  void AbortImpl(const absl::Status& status, bool broadcast);
  void PeerLost(Peer& p, const std::string& reason);
  void FailPeer(int peer, const absl::Status& status);

  // Outbound.
  void Enqueue(Peer& p, OutFrame f);
  // Writes what the socket takes; true if the connection just failed.
  bool FlushLocked(Peer& p, std::vector<Completion>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.out_mu);
  void SetWriteInterest(Peer& p, bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.out_mu);
  void UpdateEpoll(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.out_mu);
  // Runs completions (no lock held) and reports a failed connection.
  void AfterFlush(Peer& p, std::vector<Completion>& done, bool failed);
  // Writes the queue once the socket has room (POLLOUT).
  void Flush(Peer& p);
  static OutFrame ControlFrame(FrameKind kind, uint64_t tag, uint64_t bytes);

  // The socket calls, through TLS where there is one: as readv/sendmsg
  // (errno set); what a failure was.
  static ssize_t ReadSome(Peer& p, const iovec* iov, int n);
  static ssize_t WriteSome(Peer& p, const iovec* iov, int n);
  static std::string IoError(const Peer& p, int err);
  // Whether TLS holds decrypted bytes of p that poll/epoll cannot see.
  static bool BufferedInput(Peer& p);

  // Inbound (the I/O thread, or a driver), under p.in_mu.
  void Loop();
  // Reads the peers whose TLS holds bytes; whether any still does.
  bool ServeBufferedInput();
  void HandleReadable(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  bool ConsumeInput(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  bool StartFrame(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  void FinishPayload(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  void Protocol(Peer& p, const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  void FailClaimed(Peer& p, const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  void StopReading(Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.in_mu);
  void FailAllClaimed(const absl::Status& s);

  // Caller-driven progress (DriveUntil).
  Callback Notifying(Callback done);
  void NotifyWaiters();
  void PauseIo(bool paused) ABSL_EXCLUSIVE_LOCKS_REQUIRED(drive_mu_);
  bool AnyPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(drive_mu_);
  void ResumeIoIfUndriven();
  void Drive(const std::function<bool()>& done);

  const int rank_, size_;
  const TcpTransportOptions options_;
  // Every connection is TLS (else none is).
  const bool tls_;
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

  // At most one thread drives at a time; other waiters sleep on drive_cv_
  // until their operations are done or the driver leaves.
  Mutex drive_mu_;
  CondVar drive_cv_;
  bool driving_ ABSL_GUARDED_BY(drive_mu_) = false;
  std::atomic<int> drive_waiters_{0};
  // The driver sleeps in poll() on its sockets and driver_wake_fd_, which a
  // completion on another thread writes.
  std::atomic<bool> driver_sleeping_{false};
  UniqueFd driver_wake_fd_;
  // The I/O thread does not watch the sockets (written under drive_mu_).
  // A driver pauses it and leaves it paused if nothing is pending, so that
  // back-to-back collectives never wake it; the next operation posted while
  // nobody drives resumes it.
  std::atomic<bool> io_paused_{false};
  // How long the driver polls before it sleeps, adapted within
  // [0, options_.driver_spin]; used by one driver at a time.
  int64_t spin_ns_ = 0;
  // Receives whose payload is being read (taken out of recvs_).
  std::atomic<int> claimed_{0};
};

}  // namespace tcp_internal
}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_INTERNAL_H_
