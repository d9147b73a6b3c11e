#include "runtime/collective/transport/tcp_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata {
namespace {

constexpr uint32_t kHelloMagic = 0x4c485453;  // "STHL"
// Version 1: the hello alone. Version 2: the job token's challenge-response
// follows (see HandshakeText); a side with a token speaks only 2.
constexpr uint32_t kHelloVersion = 1;
constexpr uint32_t kHelloVersionWithToken = 2;
constexpr size_t kNonceBytes = 16;
// Accepted connections still owing their hello; the oldest is dropped
// beyond this, so a flood of idle connections cannot exhaust descriptors.
constexpr size_t kMaxPendingAccepts = 64;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t comm_id;
  int32_t rank;
  int32_t size;
};
static_assert(sizeof(Hello) == 24, "wire layout");

uint32_t HelloVersion(const TcpSocketOptions& o) {
  return o.job_token != nullptr ? kHelloVersionWithToken : kHelloVersion;
}

// What each side's MAC covers: its role, the communicator, who connects to
// whom, and both nonces (its peer's challenge first), so that a MAC answers
// one challenge on one connection and cannot be replayed or reflected.
std::string HandshakeText(absl::string_view role, uint64_t comm_id, int connector, int acceptor,
                          int size, absl::string_view challenge, absl::string_view own_nonce) {
  return absl::StrCat("strata-tcp-v2/", role, "/", comm_id, "/", connector, "->", acceptor, "/",
                      size, "/", challenge, own_nonce);
}

int PollMs(absl::Time deadline, absl::Duration cap) {
  const absl::Duration left = std::min(deadline - absl::Now(), cap);
  return left <= absl::ZeroDuration() ? 0 : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
}

bool SetCongestionControl(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                    static_cast<socklen_t>(name.size())) == 0;
}

}  // namespace

std::string TcpCongestionControl(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name) - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

absl::Status ConfigureTcpSocket(int fd, const TcpSocketOptions& options) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoError("tcp transport: TCP_NODELAY");
  }
  const int buffer_bytes = options.buffer_bytes;
  if (buffer_bytes > 0) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes)) != 0) {
      return ErrnoError("tcp transport: socket buffer size");
    }
  }
  const std::string& cc = options.congestion_control;
  if (cc.empty() || cc == "system") return absl::OkStatus();
  if (cc == "auto") {
    // A pacing congestion control (bbr) spaces the sends out by its
    // estimate of the path's bandwidth; between the hosts of one cluster,
    // with a collective streaming both ways, that capped a 2-rank
    // all-reduce across network namespaces at 1.8-2.0 GB/s where reno
    // reached 4.1-5.8 (docs/perf/notes/targets.md, W3).
    if (TcpCongestionControl(fd).rfind("bbr", 0) != 0) return absl::OkStatus();
    if (!SetCongestionControl(fd, "cubic")) SetCongestionControl(fd, "reno");
    return absl::OkStatus();
  }
  if (!SetCongestionControl(fd, cc)) {
    const int e = errno;
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: congestion control '", cc, "' refused by this host (",
                     std::strerror(e), "; see net.ipv4.tcp_allowed_congestion_control)"));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  return res;
}

// Listens on an ephemeral port of `host`; returns the socket and its port.
absl::StatusOr<std::pair<UniqueFd, int>> Listen(const std::string& host, int backlog,
                                                const TcpSocketOptions& socket_options) {
  addrinfo* res;
  {
    auto r = Resolve(host, 0);
    if (!r.ok()) return r.status();
    res = *r;
  }
  absl::Status last = absl::InternalError("no address");
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    UniqueFd fd(socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last = ErrnoError("tcp transport: socket");
      continue;
    }
    // Buffers set before listen() are inherited by accepted sockets (and
    // sized before the window scale is negotiated).
    if (absl::Status s = ConfigureTcpSocket(fd.get(), socket_options); !s.ok()) {
      last = s;
      if (absl::IsInvalidArgument(s)) break;  // a refused option: no address will do
      continue;
    }
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || listen(fd.get(), backlog) != 0) {
      last = ErrnoError(absl::StrCat("tcp transport: cannot listen on ", host));
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last = ErrnoError("tcp transport: getsockname");
      continue;
    }
    const int port = ss.ss_family == AF_INET6
                         ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    freeaddrinfo(res);
    return std::make_pair(std::move(fd), port);
  }
  freeaddrinfo(res);
  return last;
}

Hello MakeHello(uint64_t comm_id, int rank, int size, uint32_t version) {
  return Hello{kHelloMagic, version, comm_id, rank, size};
}

// Sends or receives exactly `n` bytes on a non-blocking socket by `deadline`.
absl::Status IoAll(int fd, char* buf, size_t n, bool send_side, absl::Time deadline) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = send_side ? send(fd, buf + done, n - done, MSG_NOSIGNAL)
                                : recv(fd, buf + done, n - done, 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return absl::UnavailableError("connection closed during the handshake");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoError("handshake");
    pollfd pfd{fd, static_cast<short>(send_side ? POLLOUT : POLLIN), 0};
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("handshake timed out");
    poll(&pfd, 1, PollMs(deadline, absl::Milliseconds(200)));
  }
  return absl::OkStatus();
}

// Connects to rank `peer`, retrying until `deadline`.
absl::StatusOr<UniqueFd> ConnectPeer(int rank, int size, int peer, uint64_t comm_id,
                                     KeyValueStore& kv, const std::string& key_prefix,
                                     absl::Duration timeout, absl::Time deadline,
                                     const TcpSocketOptions& socket_options,
                                     const std::atomic<bool>& cancel) {
  const std::string key = absl::StrCat(key_prefix, "/addr/", peer);
  absl::StatusOr<std::string> address =
      kv.Get(key, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!address.ok()) {
    if (absl::IsDeadlineExceeded(address.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "tcp transport: rank ", peer, " never published its address (key '", key, "') within ",
          absl::FormatDuration(timeout), "; rank ", rank, " gave up waiting for it"));
    }
    return absl::Status(address.status().code(),
                        absl::StrCat("tcp transport: looking up rank ", peer,
                                     "'s address: ", address.status().message()));
  }
  std::string host;
  int port;
  if (absl::Status s = SplitHostPort(*address, &host, &port); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: rank ", peer, " published a bad address: ", s.message()));
  }
  std::string last_error = "no attempt";
  while (!cancel.load()) {
    auto res = Resolve(host, port);
    if (!res.ok()) return res.status();
    UniqueFd fd(socket((*res)->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    absl::Status s =
        fd.valid() ? ConfigureTcpSocket(fd.get(), socket_options) : ErrnoError("socket");
    if (s.ok() && connect(fd.get(), (*res)->ai_addr, (*res)->ai_addrlen) != 0) {
      if (errno == EINPROGRESS) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        poll(&pfd, 1, PollMs(deadline, absl::Seconds(5)));
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || !(pfd.revents & POLLOUT)) {
          errno = err != 0 ? err : ETIMEDOUT;
          s = ErrnoError("connect");
        }
      } else {
        s = ErrnoError("connect");
      }
    }
    freeaddrinfo(*res);
    const uint32_t version = HelloVersion(socket_options);
    const JobToken* token = socket_options.job_token;
    // Hello, then with a token our challenge.
    std::string out(sizeof(Hello), '\0');
    const Hello mine = MakeHello(comm_id, rank, size, version);
    std::memcpy(out.data(), &mine, sizeof(mine));
    const std::string challenge = token != nullptr ? RandomBytes(kNonceBytes) : "";
    out += challenge;
    Hello theirs{};
    if (s.ok()) s = IoAll(fd.get(), out.data(), out.size(), true, deadline);
    if (s.ok())
      s = IoAll(fd.get(), reinterpret_cast<char*>(&theirs), sizeof(theirs), false, deadline);
    if (s.ok()) {
      if (theirs.magic != kHelloMagic || theirs.version != version || theirs.comm_id != comm_id ||
          theirs.rank != peer || theirs.size != size) {
        return absl::FailedPreconditionError(
            absl::StrCat("tcp transport: ", *address, " (published as rank ", peer,
                         ") answered as another communicator or rank (rank ", theirs.rank, " of ",
                         theirs.size, "); do all ranks use key prefix '", key_prefix, "'?"));
      }
      if (token == nullptr) return fd;
      // Their nonce and their answer to our challenge; then ours to theirs.
      std::string answer(kNonceBytes + kMacBytes, '\0');
      s = IoAll(fd.get(), answer.data(), answer.size(), false, deadline);
      if (s.ok()) {
        const std::string their_nonce = answer.substr(0, kNonceBytes);
        if (!token->Verify(
                HandshakeText("accept", comm_id, rank, peer, size, challenge, their_nonce),
                absl::string_view(answer).substr(kNonceBytes))) {
          return absl::UnauthenticatedError(absl::StrCat(
              "tcp transport: ", *address, " (published as rank ", peer,
              ") did not prove this job's token: is that task started with another job token, "
              "or is another process listening there?"));
        }
        std::string mac = token->Sign(
            HandshakeText("connect", comm_id, rank, peer, size, their_nonce, challenge));
        s = IoAll(fd.get(), mac.data(), mac.size(), true, deadline);
        if (s.ok()) return fd;
      }
    }
    last_error = std::string(s.message());
    if (absl::Now() >= deadline) break;
    // Not listening yet, or it dropped us: try again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "tcp transport: rank ", rank, " could not connect to rank ", peer, " at ", *address,
      " within ", absl::FormatDuration(timeout), " (last error: ", last_error, ")"));
}

// Accepts ranks 0..rank-1 into fds; others, garbage and (with a token)
// peers that fail its challenge are closed.
absl::Status AcceptPeers(int listen_fd, int rank, int size, uint64_t comm_id,
                         absl::Duration timeout, absl::Time deadline,
                         const TcpSocketOptions& socket_options, const std::atomic<bool>& cancel,
                         std::vector<UniqueFd>* fds) {
  const JobToken* token = socket_options.job_token;
  const uint32_t version = HelloVersion(socket_options);
  // What a connecting peer sends, in stages: its hello; with a token its
  // challenge (then we answer) and its answer to ours.
  struct Pending {
    UniqueFd fd;
    char buf[sizeof(Hello) + kNonceBytes + kMacBytes];
    size_t got = 0;
    size_t need = sizeof(Hello);
    std::string nonce;  // ours, once we answered
  };
  std::deque<Pending> pending;
  int missing = rank;
  // Moves `p` on by one stage; false: close it.
  auto advance = [&](Pending& p) {
    Hello h;
    std::memcpy(&h, p.buf, sizeof(h));
    if (h.magic != kHelloMagic || h.version != version || h.comm_id != comm_id || h.size != size ||
        h.rank < 0 || h.rank >= rank || (*fds)[h.rank].valid()) {
      return false;
    }
    if (token == nullptr || p.need == sizeof(Hello) + kNonceBytes) {
      // Our hello, and with a token our nonce and answer to its challenge.
      const Hello mine = MakeHello(comm_id, rank, size, version);
      std::string out(reinterpret_cast<const char*>(&mine), sizeof(mine));
      if (token != nullptr) {
        p.nonce = RandomBytes(kNonceBytes);
        const absl::string_view challenge(p.buf + sizeof(Hello), kNonceBytes);
        out += p.nonce;
        out +=
            token->Sign(HandshakeText("accept", comm_id, h.rank, rank, size, challenge, p.nonce));
      }
      if (!IoAll(p.fd.get(), out.data(), out.size(), true, deadline).ok()) return false;
      if (token != nullptr) {
        p.need += kMacBytes;
        return true;
      }
    } else if (p.need == sizeof(Hello)) {
      p.need += kNonceBytes;
      return true;
    } else {
      const absl::string_view challenge(p.buf + sizeof(Hello), kNonceBytes);
      const absl::string_view mac(p.buf + sizeof(Hello) + kNonceBytes, kMacBytes);
      if (!token->Verify(HandshakeText("connect", comm_id, h.rank, rank, size, p.nonce, challenge),
                         mac)) {
        return false;
      }
    }
    (*fds)[h.rank] = std::move(p.fd);
    --missing;
    return false;  // done with it
  };
  while (missing > 0 && !cancel.load()) {
    if (absl::Now() >= deadline) {
      std::vector<int> absent;
      for (int r = 0; r < rank; ++r) {
        if (!(*fds)[r].valid()) absent.push_back(r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("tcp transport: rank(s) ", absl::StrJoin(absent, ", "),
                       " never connected to rank ", rank, " within ", absl::FormatDuration(timeout),
                       token != nullptr ? " (or connected without this job's token)" : ""));
    }
    std::vector<pollfd> pfds{{listen_fd, POLLIN, 0}};
    for (auto& p : pending) pfds.push_back({p.fd.get(), POLLIN, 0});
    poll(pfds.data(), pfds.size(), PollMs(deadline, absl::Milliseconds(50)));
    for (size_t i = pending.size(); i-- > 0;) {
      if (!(pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Pending& p = pending[i];
      const ssize_t r = recv(p.fd.get(), p.buf + p.got, p.need - p.got, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      bool keep = r > 0;
      if (keep) p.got += static_cast<size_t>(r);
      if (keep && p.got == p.need) keep = advance(p);
      if (!keep || !p.fd.valid()) pending.erase(pending.begin() + i);
    }
    if (pfds[0].revents & POLLIN) {
      for (;;) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        pending.emplace_back();
        pending.back().fd = UniqueFd(fd);
        if (pending.size() > kMaxPendingAccepts) pending.pop_front();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status ErrnoError(absl::string_view what) {
  char buf[256];
  const char* msg = strerror_r(errno, buf, sizeof(buf));
  return absl::InternalError(absl::StrCat(what, ": ", msg));
}

uint64_t TcpCommunicatorId(absl::string_view key_prefix) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key_prefix) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port <= 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' has a bad port"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<UniqueFd>> EstablishTcpMesh(int rank, int size, KeyValueStore& kv,
                                                       const std::string& host,
                                                       const std::string& key_prefix,
                                                       absl::Duration timeout,
                                                       const TcpSocketOptions& socket_options) {
  const absl::Time deadline = absl::Now() + timeout;
  const uint64_t comm_id = TcpCommunicatorId(absl::StrCat(key_prefix, "#", size));
  std::vector<UniqueFd> fds(size);
  if (size == 1) return fds;
  auto listening = Listen(host, size + 16, socket_options);
  if (!listening.ok()) return listening.status();
  UniqueFd listen_fd = std::move(listening->first);
  const std::string published =
      absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":",
                   listening->second);
  if (absl::Status s = kv.Insert(absl::StrCat(key_prefix, "/addr/", rank), published); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("tcp transport: rank ", rank,
                                               " cannot publish its address: ", s.message()));
  }
  // Connections to higher ranks go in parallel, so one missing rank does not
  // hide behind another; this thread accepts the lower ones meanwhile.
  std::atomic<bool> cancel{false};
  std::vector<absl::Status> status(size);
  std::vector<std::thread> connectors;
  for (int peer = rank + 1; peer < size; ++peer) {
    connectors.emplace_back([&, peer] {
      auto fd = ConnectPeer(rank, size, peer, comm_id, kv, key_prefix, timeout, deadline,
                            socket_options, cancel);
      if (fd.ok()) {
        fds[peer] = std::move(*fd);
      } else {
        status[peer] = fd.status();
        cancel.store(true);
      }
    });
  }
  absl::Status accepted = AcceptPeers(listen_fd.get(), rank, size, comm_id, timeout, deadline,
                                      socket_options, cancel, &fds);
  if (!accepted.ok()) cancel.store(true);
  for (auto& t : connectors) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  if (!accepted.ok()) return accepted;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (!fds[r].valid()) {
      return absl::InternalError(absl::StrCat("tcp transport: no connection to rank ", r));
    }
    if (absl::Status s = ConfigureTcpSocket(fds[r].get(), socket_options); !s.ok()) return s;
  }
  return fds;
}

}  // namespace strata
