#include "tools/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace strata {
namespace {

constexpr size_t kMaxLine = 512;
constexpr absl::Duration kJoinSilence = absl::Seconds(10);

// What a join or a round reply's HMAC covers: its kind, the challenge of
// its connection and its text.
std::string Signed(absl::string_view what, absl::string_view challenge, absl::string_view text) {
  return absl::StrCat("strata-rendezvous-", what, "\n", challenge, "\n", text);
}

std::string Mac(const JobToken& token, absl::string_view what, absl::string_view challenge,
                absl::string_view text) {
  return absl::BytesToHexString(token.Sign(Signed(what, challenge, text)));
}

// A MAC in hex (2 * kMacBytes characters) as bytes; false for anything else.
bool MacFromHex(absl::string_view hex, std::string* out) {
  if (hex.size() != 2 * kMacBytes) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = absl::HexStringToBytes(hex);
  return true;
}

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one line (without '\n') within `deadline`; nullopt on EOF, error,
// an over-long line or the deadline (InfiniteFuture: no deadline).
std::optional<std::string> ReadLine(int fd, absl::Time deadline) {
  std::string line;
  for (;;) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char c;
    const ssize_t n = recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    if (line.size() >= kMaxLine) return std::nullopt;
    line.push_back(c);
  }
}

// Probes an idle connection, so that a peer gone silent (its host cut
// off, no reset ever coming) ends the wait in about 25 s instead of never.
void KeepAlive(int fd) {
  const int on = 1, idle = 10, interval = 5, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

// A connected TCP socket to host:port, or -1.
int Dial(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd >= 0) KeepAlive(fd);
  return fd;
}

struct Conn {
  int fd = -1;
  std::string challenge;
  std::string buffer;
  absl::Time accepted;
  bool joined = false;
  std::string node_id;
  int tasks = 0;
};

void Drop(Conn& c, absl::string_view why) {
  if (!why.empty()) SendAll(c.fd, absl::StrCat("ERROR ", why, "\n"));
  close(c.fd);
  c.fd = -1;
}

// Sends every joined node of the round (`order`: the host first, then join
// order) its place in it, and closes their connections.
void AnnounceRound(std::vector<Conn>& conns, const std::vector<size_t>& order, int round,
                   const JobToken& token) {
  int world = 0;
  for (size_t i : order) world += conns[i].tasks;
  int first = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    Conn& c = conns[order[k]];
    const std::string reply =
        absl::StrCat("ROUND ", round, " ", k, " ", order.size(), " ", world, " ", first);
    SendAll(c.fd, absl::StrCat(reply, " ", Mac(token, "round", c.challenge, reply), "\n"));
    first += c.tasks;
    close(c.fd);
    c.fd = -1;
  }
}

// Reads what a connection sent: its JOIN line (checked against the job's
// token and its challenge), or nothing more once joined.
void ReadJoin(Conn& c, const JobToken& token) {
  char buf[256];
  const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
  if (n <= 0) return Drop(c, "");  // gone (a joined node that left is out of the round)
  if (c.joined) return Drop(c, "unexpected data after JOIN");
  c.buffer.append(buf, static_cast<size_t>(n));
  const size_t nl = c.buffer.find('\n');
  if (nl == std::string::npos) {
    if (c.buffer.size() > kMaxLine) Drop(c, "line too long");
    return;
  }
  const std::string line = c.buffer.substr(0, nl);
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  int tasks = 0;
  if (parts.size() != 4 || parts[0] != "JOIN" || parts[1].empty() ||
      !absl::SimpleAtoi(parts[2], &tasks) || tasks < 1 || tasks > 100000) {
    return Drop(c, "expected JOIN <node id> <tasks> <hmac>");
  }
  const std::string request = absl::StrCat("JOIN ", parts[1], " ", parts[2]);
  std::string mac;
  if (!MacFromHex(parts[3], &mac) || !token.Verify(Signed("join", c.challenge, request), mac)) {
    return Drop(c, "not this job's token");
  }
  c.joined = true;
  c.node_id = parts[1];
  c.tasks = tasks;
  c.accepted = absl::Now();  // join order
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    RendezvousServerOptions options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(options.host.c_str(), absl::StrCat(options.port).c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous host \"", options.host,
                                               "\" does not resolve: ", gai_strerror(rc)));
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.host, ":", options.port,
                                               ": ", std::strerror(err)));
  }
  std::unique_ptr<RendezvousServer> s(new RendezvousServer(std::move(options), fd));
  if (pipe2(s->wake_, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

RendezvousServer::RendezvousServer(RendezvousServerOptions options, int fd)
    : options_(std::move(options)), listen_fd_(fd) {}

RendezvousServer::~RendezvousServer() {
  if (wake_[1] >= 0) {
    const char c = 'x';
    (void)!write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void RendezvousServer::Loop() {
  std::vector<Conn> conns;
  std::vector<size_t> order;
  int round = 0;
  absl::Time min_reached = absl::InfiniteFuture();
  for (;;) {
    // The joined connections of the open round, in join order (`order`
    // indexes `conns`: rebuilt after closed ones are erased).
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Conn& c) { return c.fd < 0; }),
                conns.end());
    order.clear();
    for (size_t i = 0; i < conns.size(); ++i) {
      if (conns[i].joined) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return conns[a].accepted < conns[b].accepted; });
    // Close the open round if it may.
    const bool host_in = std::any_of(order.begin(), order.end(), [&](size_t i) {
      return conns[i].node_id == options_.host_node_id;
    });
    const int joined = static_cast<int>(order.size());
    if (joined < options_.min_nodes) {
      min_reached = absl::InfiniteFuture();  // one left before the round closed
    } else if (min_reached == absl::InfiniteFuture()) {
      min_reached = absl::Now();
    }
    if (host_in &&
        (joined >= options_.max_nodes ||
         (joined >= options_.min_nodes && absl::Now() >= min_reached + options_.last_call))) {
      // The host first, then join order.
      std::stable_partition(order.begin(), order.end(),
                            [&](size_t i) { return conns[i].node_id == options_.host_node_id; });
      AnnounceRound(conns, order, round, options_.token);
      ++round;
      min_reached = absl::InfiniteFuture();
      continue;
    }
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN, 0});
    const int r = poll(fds.data(), fds.size(), 100);
    const bool broken = r < 0 && errno != EINTR;
    if (broken || fds[0].revents != 0) {
      // Stopping (or, never seen, poll failing): no launcher is left waiting.
      for (Conn& c : conns) {
        SendAll(c.fd, broken ? "ERROR the rendezvous failed\n" : "DONE\n");
        close(c.fd);
      }
      return;
    }
    if (fds[1].revents & POLLIN) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        KeepAlive(fd);
        Conn c;
        c.fd = fd;
        c.challenge = absl::BytesToHexString(RandomBytes(16));
        c.accepted = absl::Now();
        if (SendAll(fd, absl::StrCat("CHALLENGE ", c.challenge, "\n"))) {
          conns.push_back(std::move(c));
        } else {
          close(fd);
        }
      }
    }
    const size_t polled = fds.size() - 2;  // connections accepted above come after
    for (size_t i = 0; i < polled; ++i) {
      Conn& c = conns[i];
      if (c.fd < 0) continue;
      if (!c.joined && absl::Now() > c.accepted + kJoinSilence) {
        Drop(c, "no JOIN in time");
        continue;
      }
      if ((fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadJoin(c, options_.token);
    }
  }
}

absl::StatusOr<RendezvousRound> JoinRendezvous(const std::string& host, int port,
                                               const JobToken& token, const std::string& node_id,
                                               int tasks, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    const int fd = Dial(host, port);
    if (fd < 0) {
      if (absl::Now() + backoff >= deadline) {
        return absl::UnavailableError(absl::StrCat(
            "rendezvous at ", host, ":", port, " unreachable for ", absl::FormatDuration(timeout)));
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
      continue;
    }
    std::optional<std::string> hello = ReadLine(fd, absl::Now() + kJoinSilence);
    if (!hello.has_value() || hello->rfind("CHALLENGE ", 0) != 0) {
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("rendezvous at ", host, ":", port, " sent no challenge"));
    }
    const std::string challenge = hello->substr(10);
    const std::string request = absl::StrCat("JOIN ", node_id, " ", tasks);
    SendAll(fd, absl::StrCat(request, " ", Mac(token, "join", challenge, request), "\n"));
    // The round closes when the job's launchers are there: no deadline.
    std::optional<std::string> reply = ReadLine(fd, absl::InfiniteFuture());
    close(fd);
    if (!reply.has_value()) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous at ", host, ":", port, " went away before the round closed"));
    }
    if (*reply == "DONE") {
      return absl::CancelledError("the job ended while this launcher waited for a round");
    }
    if (reply->rfind("ERROR ", 0) == 0) {
      return absl::UnauthenticatedError(absl::StrCat("rendezvous at ", host, ":", port,
                                                     " refused this launcher: ", reply->substr(6)));
    }
    std::vector<std::string> parts = absl::StrSplit(*reply, ' ');
    RendezvousRound r;
    std::string mac;
    if (parts.size() != 7 || parts[0] != "ROUND" || !absl::SimpleAtoi(parts[1], &r.round) ||
        !absl::SimpleAtoi(parts[2], &r.node_rank) || !absl::SimpleAtoi(parts[3], &r.nnodes) ||
        !absl::SimpleAtoi(parts[4], &r.world_size) || !absl::SimpleAtoi(parts[5], &r.first_rank) ||
        !MacFromHex(parts[6], &mac) ||
        !token.Verify(Signed("round", challenge, reply->substr(0, reply->rfind(' '))), mac)) {
      return absl::UnauthenticatedError(absl::StrCat(
          "rendezvous at ", host, ":", port, " answered without this job's token or garbled"));
    }
    return r;
  }
}

}  // namespace strata
