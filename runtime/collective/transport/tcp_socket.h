// The connection set-up behind TcpTransport: a full mesh of TCP connections
// between the `size` ranks of one communicator, rendezvoused through a
// KeyValueStore. Rank r listens on an ephemeral port of `host`, publishes
// "host:port" under "<key_prefix>/addr/<r>", connects to every higher rank
// and accepts every lower one. Each connection starts with a 24-byte hello
// each way {magic, version, communicator id, rank, size}; the id is a hash
// of key_prefix, so a connection from another communicator, a stray port
// scanner or a garbage sender is closed and set-up goes on waiting for the
// real peer.
//
//   STRATA_ASSIGN_OR_RETURN(std::vector<UniqueFd> fds,
//       EstablishTcpMesh(rank, size, kv, "127.0.0.1", "job/tcp", absl::Seconds(60), {}));
//   // fds[p] is the connected, non-blocking, TCP_NODELAY socket to rank p
//   // (invalid for p == rank).
//
// Thread-safety: EstablishTcpMesh is reentrant. Ownership: UniqueFd closes
// its descriptor.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_SOCKET_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_SOCKET_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/security/job_token.h"

namespace strata {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// `what` and strerror(errno), as Internal (a local system call failed).
absl::Status ErrnoError(absl::string_view what);

// The communicator id carried in the hello (FNV-1a of key_prefix).
uint64_t TcpCommunicatorId(absl::string_view key_prefix);

// Splits "host:port" or "[v6 address]:port"; InvalidArgument naming `address`.
absl::Status SplitHostPort(const std::string& address, std::string* host, int* port);

// How the mesh's sockets are set up (besides TCP_NODELAY, always on), and
// whom they accept.
struct TcpSocketOptions {
  // > 0: SO_SNDBUF and SO_RCVBUF.
  int buffer_bytes = 0;
  // TCP_CONGESTION: "" or "system" leaves the host's default; "auto" leaves
  // it unless it paces its sends (bbr), then takes cubic, else reno (the
  // first this host lets an unprivileged socket use; if neither, the
  // default stays); any other name is set, and a host that refuses it is
  // an InvalidArgument naming it.
  std::string congestion_control;
  // Not null: every connection must prove this job token (not owned; must
  // outlive EstablishTcpMesh). After the hellos (version 2) the connecting
  // side sends a 16-byte challenge, the accepting side answers with its own
  // nonce and HMAC-SHA256(token, "accept", communicator, ranks, both
  // nonces), the connecting side checks it (Unauthenticated naming the
  // address otherwise: a task with another token, or another process on the
  // published port) and answers the other challenge the same way, which the
  // accepting side checks before it takes the connection (else it closes it
  // and goes on waiting for the real peer). The token never goes on the wire.
  const JobToken* job_token = nullptr;
};

// Applies `options` to socket `fd`.
absl::Status ConfigureTcpSocket(int fd, const TcpSocketOptions& options);

// The congestion control socket `fd` uses ("bbr", "cubic", ...).
std::string TcpCongestionControl(int fd);

// Connects rank `rank` to every other rank (see above). DeadlineExceeded
// naming the rank(s) that did not publish, listen or connect within
// `timeout`.
absl::StatusOr<std::vector<UniqueFd>> EstablishTcpMesh(int rank, int size, KeyValueStore& kv,
                                                       const std::string& host,
                                                       const std::string& key_prefix,
                                                       absl::Duration timeout,
                                                       const TcpSocketOptions& socket_options);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_SOCKET_H_
