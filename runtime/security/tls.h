// Optional mutual TLS for a job's connections: every task holds a
// certificate and key, and the certificate authority (CA) every peer's
// certificate must chain to. With it, the gRPC control plane (GrpcServer,
// CoordinationClient) and the TCP data plane (TcpTransport) are encrypted,
// and each side of every connection proves its certificate; a peer whose
// certificate does not chain to the CA, or (for the side that connects) does
// not name the host it was reached at, is refused. It adds to the job token
// (job_token.h), which stays required: TLS keeps the bytes private, the token
// keeps out whoever holds a certificate of the same CA but not the job's
// secret.
//
//   STRATA_ASSIGN_OR_RETURN(std::optional<TlsConfig> tls, ResolveTls(TlsFiles{}));
//   if (tls) {
//     STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const TlsContext> ctx, TlsContext::Create(*tls));
//     std::unique_ptr<TlsStream> a = ctx->NewStream(fd, /*is_client=*/true, "10.0.0.3");
//     STRATA_RETURN_IF_ERROR(TlsHandshakeAll({a.get()}, {"rank 1 (10.0.0.3:4000)"}, deadline));
//     ssize_t n = a->Writev(iov, 2);  // as writev(2): bytes, or -1 with errno
//   }
//
// Where a task finds its files (ResolveTls), per file, first match wins: the
// flag (--tls_cert_file, --tls_key_file, --tls_ca_file), then the
// environment variable (STRATA_TLS_CERT_FILE, STRATA_TLS_KEY_FILE,
// STRATA_TLS_CA_FILE: a Kubernetes secret mounted as files, a Slurm job's
// private directory). None of the three: no TLS. Some but not all: an error
// naming the missing one.
//
// LoadTlsConfig checks at start-up what would otherwise fail at the first
// connection, each error naming the file: PEM that does not parse, a key that
// is not the certificate's, a certificate that does not chain to the CA or
// is outside its validity period.
//
// Connections use TLS 1.3 only, without session tickets or resumption.
// Certificates name their hosts as subjectAltName entries (DNS names or IP
// addresses, as the cluster spec writes them).
//
// Thread-safety: TlsConfig and TlsContext are immutable once made. A
// TlsStream's Readv and Writev may be called concurrently (one reader and one
// writer at a time, serialized inside); the handshake must finish first.
// Ownership: a TlsStream uses but does not own its socket.
#ifndef STRATA_RUNTIME_SECURITY_TLS_H_
#define STRATA_RUNTIME_SECURITY_TLS_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace strata {

inline constexpr char kTlsCertFileEnv[] = "STRATA_TLS_CERT_FILE";
inline constexpr char kTlsKeyFileEnv[] = "STRATA_TLS_KEY_FILE";
inline constexpr char kTlsCaFileEnv[] = "STRATA_TLS_CA_FILE";
// The largest PEM file read.
inline constexpr size_t kMaxPemFileBytes = 1 << 20;

struct TlsFiles {
  std::string cert_file;  // PEM: this task's certificate, then any intermediates
  std::string key_file;   // PEM: its private key (unencrypted)
  std::string ca_file;    // PEM: the CA certificate(s) peers must chain to
};

// The three files' contents, checked by LoadTlsConfig.
struct TlsConfig {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  TlsFiles files;  // where they came from (for messages)
};

// Reads and checks the files (see the header comment). InvalidArgument
// naming the file and what is wrong with it; NotFound for a missing file.
absl::StatusOr<TlsConfig> LoadTlsConfig(const TlsFiles& files);

// `flags` completed from the environment (see the header comment), then
// loaded; nullopt when none of the three is set anywhere.
absl::StatusOr<std::optional<TlsConfig>> ResolveTls(const TlsFiles& flags);

class TlsStream;
absl::Status TlsHandshakeAll(const std::vector<TlsStream*>& streams,
                             const std::vector<std::string>& names, absl::Time deadline);

// A TLS 1.3 context holding this task's certificate, key and trusted CAs,
// requiring a certificate of every peer.
class TlsContext {
 public:
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Create(const TlsConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A session over connected socket `fd` (non-blocking), not yet shaken
  // hands. The client checks that the server's certificate names
  // `peer_host` (an IP literal or DNS name; ignored by the server).
  std::unique_ptr<TlsStream> NewStream(int fd, bool is_client, const std::string& peer_host) const;

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

class TlsStream {
 public:
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // One step of the handshake: 1 done, 0 call again when the socket is
  // readable (*want_write false) or writable (true), -1 failed (error()).
  int HandshakeStep(bool* want_write);

  // As readv(2)/writev(2) on the socket, through TLS: the bytes moved (> 0),
  // 0 at the end of the stream (readv), or -1 with errno EAGAIN (nothing to
  // read, or the socket is full), EPIPE (writev after the peer closed) or
  // EPROTO (a TLS failure: error() says which). Writev must be retried with
  // the same leading bytes after EAGAIN (the bytes after them may have grown).
  ssize_t Readv(const iovec* iov, int n);
  ssize_t Writev(const iovec* iov, int n);
  // Whether Readv would return bytes without reading the socket (decrypted
  // bytes left from an earlier record): poll/epoll cannot see them.
  bool HasBufferedInput();
  // Bytes of the stream a Writev that ended in EAGAIN handed to OpenSSL,
  // which sends them whatever comes next (0 after a write that completed):
  // a caller that gives up on queued data must still send these.
  size_t pending_write_bytes() const;
  // What the last failure was (OpenSSL's reason, and the certificate check's).
  std::string error() const;

 private:
  friend class TlsContext;
  friend absl::Status TlsHandshakeAll(const std::vector<TlsStream*>& streams,
                                      const std::vector<std::string>& names, absl::Time deadline);
  TlsStream(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ssize_t WriteLocked(const char* data, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetError(int ret) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  SSL* const ssl_;
  const int fd_;
  std::string error_ ABSL_GUARDED_BY(mu_);
  // Small iovecs are gathered here into one record.
  std::string gather_ ABSL_GUARDED_BY(mu_);
  size_t pending_write_ ABSL_GUARDED_BY(mu_) = 0;
};

// Runs the handshakes of `streams` (each on its own socket) together until
// all are done or `deadline`. Unauthenticated naming `names[i]` and the
// reason when peer i's certificate is refused (or it refused ours);
// DeadlineExceeded naming the peers not done by then.
absl::Status TlsHandshakeAll(const std::vector<TlsStream*>& streams,
                             const std::vector<std::string>& names, absl::Time deadline);

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_TLS_H_
