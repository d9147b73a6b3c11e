// libFuzzer target: TcpTransport's frame decoder (tcp_transport_inbound.cc)
// reading what a peer sends. The transport is rank 1 of 2, set up for real
// over loopback; the fuzzer is rank 0: it completes the hello, then sends
// the input as its byte stream and closes. Before that the transport posts
// a few receives and sends chosen by the input's first bytes (tags 0-3,
// sizes on both sides of the eager limit), so frames can match, mismatch,
// arrive early, or ask for sends (kReady).
//
// Input: byte 0: how many operations (0-3); then two bytes each: kind and
// tag (bit 0: send, bits 1-2: tag), size (index into kSizes); the rest is
// the stream.
//
// Whatever the stream, every operation must end (completed, or failed
// naming rank 0) once the connection closes: never a crash, a hang, or an
// allocation the peer sized beyond the transport's bounds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/transport/tcp_socket.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/coordination/key_value_store.h"

namespace {

using namespace strata;  // NOLINT: a fuzz target's only namespace

constexpr size_t kSizes[] = {0, 8, 1000, 64 << 10, (64 << 10) + 1, 200000};
constexpr char kPrefix[] = "fuzz/tcp";

int Connect(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port).ok()) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  // Closed with a reset, not into TIME_WAIT: at a thousand inputs a second
  // TIME_WAIT would use up the ephemeral ports within a minute.
  const linger no_linger{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    // libFuzzer's timer signal may interrupt it; the connection goes on.
    int err = errno;
    if (err == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      while (poll(&p, 1, 10000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      close(fd);
      errno = err;
      return -1;
    }
  }
  return fd;
}

bool SendAll(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;  // the transport closed: it refused the stream
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void Die(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "tcp_frames_fuzz: %s: %s\n", what, s.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  InMemoryKeyValueStore kv;
  TcpTransportOptions o;
  o.host = "127.0.0.1";
  o.key_prefix = kPrefix;
  o.connect_timeout = absl::Seconds(10);
  o.max_unexpected_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<Transport>> t;
  std::thread rank1([&] { t = ConnectTcpTransport(1, 2, kv, o); });
  absl::StatusOr<std::string> address = kv.Get(std::string(kPrefix) + "/addr/1", absl::Seconds(10));
  if (!address.ok()) Die("rank 1 did not publish", address.status());
  const int fd = Connect(*address);
  if (fd < 0) {
    Die("cannot connect to rank 1", absl::UnavailableError(std::strerror(errno)));
  }
  struct {
    uint32_t magic = 0x4c485453, version = 1;
    uint64_t comm = TcpCommunicatorId(std::string(kPrefix) + "#2");
    int32_t rank = 0, size = 2;
  } hello;
  const bool said = fd >= 0 && SendAll(fd, reinterpret_cast<const uint8_t*>(&hello), sizeof(hello));
  rank1.join();
  if (!said || !t.ok()) Die("set-up", t.status());
  char reply[24];
  size_t got = 0;
  while (got < sizeof(reply)) {
    const ssize_t r = recv(fd, reply + got, sizeof(reply) - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) Die("no hello back", absl::UnavailableError(std::strerror(errno)));
    got += static_cast<size_t>(r);
  }

  size_t pos = 0;
  const int n_ops = size > 0 ? data[pos++] % 4 : 0;
  std::vector<std::vector<char>> buffers;
  PendingOps ops;
  for (int i = 0; i < n_ops && pos + 2 <= size; ++i, pos += 2) {
    const bool is_send = data[pos] & 1;
    const uint64_t tag = (data[pos] >> 1) & 3;
    buffers.emplace_back(kSizes[data[pos + 1] % (sizeof(kSizes) / sizeof(kSizes[0]))], 'x');
    std::vector<char>& b = buffers.back();
    if (is_send) {
      (*t)->SendAsync(0, tag, b.data(), b.size(), ops.Add());
    } else {
      (*t)->RecvAsync(0, tag, b.data(), b.size(), ops.Add());
    }
  }
  SendAll(fd, data + pos, size - pos);
  shutdown(fd, SHUT_WR);
  // Every operation ends once the stream does: ok or an error, never a hang.
  (void)ops.Wait();
  t->reset();
  close(fd);
  return 0;
}
