// TcpTransport: the Transport between processes on different hosts (or in
// different network namespaces), one TCP connection per pair of ranks.
//
// Set-up: every rank listens on an ephemeral port of `options.host` (the
// host part of its task's address in the cluster spec, never 0.0.0.0
// implicitly), publishes "host:port" in the key-value store under
// `options.key_prefix`, and connects to every higher rank (the higher one
// accepts). A handshake carries a communicator id derived from key_prefix and
// size, and the connecting rank, so stray or foreign connections are closed
// and ignored. A rank that never shows up within `connect_timeout` gives
// DeadlineExceeded naming it.
//
//   TcpTransportOptions opts;
//   opts.host = "10.10.0.2";
//   opts.key_prefix = "collective/group7/tcp";
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t,
//                           ConnectTcpTransport(rank, size, kv, opts));
//   STRATA_RETURN_IF_ERROR(algorithm->Run(*t, input, output));
//
// Wire protocol (after the handshake; all integers little-endian, i.e. the
// hosts' native order on every machine Strata runs on): a 32-byte frame
// header {magic, kind, tag, bytes, code}, then the payload.
//   - kEager: a message of at most `eager_limit` bytes, sent at once. If the
//     receive is not posted yet it is buffered (bounded per peer by
//     `max_unexpected_bytes`).
//   - kReady: the receiver posted a receive larger than eager_limit; the
//     sender may now send it as kData, which is read straight into the
//     posted buffer. A large message is therefore never buffered, and no
//     allocation is ever sized by a peer beyond eager_limit.
//   - kAbort: the sender aborted with {code, message}; the receiver aborts
//     with the same status.
// A size that disagrees with the posted receive, a bad magic, an unknown
// kind or an absurd size aborts the communicator with an error naming the
// peer before any byte of the payload is copied. A lost connection aborts it
// with Unavailable naming the peer.
//
// Progress: one I/O thread per transport (epoll) reads every connection;
// sends are written by the posting thread when the connection is idle, else
// by the I/O thread. A thread waiting in DriveUntil takes over instead: it
// reads and writes every connection itself (one such driver at a time;
// other waiters sleep until their operations are done or take over), and
// the I/O thread stops watching the sockets until an operation is posted
// while nobody drives. Callbacks run on any of these, never under a lock.
//
// Thread-safety: every method may be called concurrently. Ownership: the
// transport owns its sockets and its thread; buffers as for Transport. The
// key-value store is used only during ConnectTcpTransport.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"

namespace strata {

struct TcpTransportOptions {
  // The address this rank listens on: an IPv4/IPv6 literal or a host name.
  // Required (InvalidArgument when empty).
  std::string host;
  // Namespaces the key-value keys ("<prefix>/addr/<rank>") and the
  // communicator id; distinct communicators need distinct prefixes.
  std::string key_prefix = "strata/tcp";
  // How long set-up waits for every peer to publish, listen and connect.
  absl::Duration connect_timeout = absl::Seconds(60);
  // SO_SNDBUF / SO_RCVBUF in bytes (the kernel caps them at
  // net.core.wmem_max / rmem_max); 0 leaves the kernel's autotuning. Large
  // buffers let a ring step's chunk go in one system call: measured on
  // loopback, 4 MiB beat autotuning at 1-64 MiB all-reduces.
  int socket_buffer_bytes = 4 << 20;
  // The sockets' TCP congestion control (TcpSocketOptions in tcp_socket.h):
  // "auto" replaces a pacing one (bbr) by cubic or reno, "system" keeps the
  // host's default, a name sets that one. Measured across network
  // namespaces, 2 ranks, 4 MiB all-reduce: 1.8-2.0 GB/s bus bandwidth under
  // bbr, 4.1-5.8 under reno.
  std::string congestion_control = "auto";
  // The job's token: connections are set up only with peers that prove it
  // (TcpSocketOptions::job_token). None: any peer that knows the hello.
  std::optional<JobToken> job_token;
  // Mutual TLS (runtime/security/tls.h): after the hellos (and the token's
  // challenges) every connection is a TLS 1.3 session; the connecting rank
  // checks that the peer's certificate names the host it published, both
  // check that it chains to the CA. A peer that fails is named
  // (Unauthenticated). None: plaintext.
  std::optional<TlsConfig> tls;
  // Messages up to this size are sent eagerly; larger ones wait for the
  // receiver's kReady.
  size_t eager_limit = 64 << 10;
  // Eager messages buffered per peer before their receives are posted;
  // beyond this the peer is considered broken and the communicator aborts.
  size_t max_unexpected_bytes = 64 << 20;
  // After each batch of events the I/O thread keeps polling for this long
  // before it sleeps: lower latency at the cost of CPU time. 0: never spin.
  absl::Duration poll_spin = absl::ZeroDuration();
  // Whether DriveUntil uses the waiting thread (else it returns false and
  // the I/O thread moves every byte).
  bool caller_drives = true;
  // A thread waiting in DriveUntil (the pipelined ring's Run) serves the
  // sockets itself: it polls them without blocking for this long after the
  // last bytes moved, then sleeps in poll() on them.
  absl::Duration driver_spin = absl::Microseconds(50);
};

// Connects rank `rank` of `size` ranks. Every rank must call it with the same
// size and key_prefix; it returns once this rank is connected to every peer.
absl::StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const TcpTransportOptions& options);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_H_
