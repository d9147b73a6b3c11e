// GrpcServer: the gRPC server every task of a cluster runs, bound to exactly
// its own "host:port" from the cluster spec (never 0.0.0.0). On the chief it
// hosts the coordination service (coordination_service.h); other services
// (the worker service) can be added by their owners. Control messages are
// capped at 4 MiB by default in both directions.
//
//   GrpcServerOptions opts;
//   opts.address = spec.task_address();                   // "10.0.0.2:2222"
//   opts.host_coordination_service = spec.is_chief();
//   opts.coordination.tasks = CoordinatedTasks(spec.ToClusterDef());
//   opts.coordination.cluster_fingerprint = ClusterFingerprint(spec.ToClusterDef());
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Start(opts));
//
// Start fails with Unavailable naming the address when it cannot be bound
// (port taken, host not local): SO_REUSEPORT is off, so a second server on
// a taken port fails instead of sharing it. Port 0 picks a free port
// (tests); address() then reports the one bound.
//
// Thread-safety: const methods may be called concurrently. Ownership: owns
// the gRPC server and the coordination service; the extra services must
// outlive it. The destructor wakes calls blocked in the coordination service
// and stops the server within about a second.
#ifndef STRATA_RUNTIME_COORDINATION_GRPC_SERVER_H_
#define STRATA_RUNTIME_COORDINATION_GRPC_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/coordination/coordination_service.h"
#include "runtime/security/tls.h"

namespace strata {

inline constexpr int kDefaultMaxMessageBytes = 4 << 20;

// The most threads a server runs sync services' calls on (8 per
// coordinated task plus 64, up to this); the coordination service's calls
// take none while they wait (gRPC's callback API).
inline constexpr int kMaxServerThreads = 4096;

// Routes gRPC's own log lines to stderr only when GRPC_VERBOSITY is set
// (Start calls it; so does a client). Idempotent.
void QuietGrpcLogs();

struct GrpcServerOptions {
  // "host:port" ("[v6addr]:port" for IPv6) to listen on, as given.
  std::string address;
  // Host the coordination service (on the chief); `coordination` configures it.
  bool host_coordination_service = false;
  CoordinationServiceOptions coordination;
  // Largest message received or sent.
  int max_message_bytes = kDefaultMaxMessageBytes;
  // More services to serve; not owned.
  std::vector<grpc::Service*> services;
  // The job's token: the coordination service serves only calls that prove
  // it (CoordinationGrpcService). None: it serves anyone.
  std::optional<JobToken> job_token;
  // Mutual TLS (runtime/security/tls.h): clients must present a certificate
  // of the CA. None: plaintext.
  std::optional<TlsConfig> tls;
};

class GrpcServer {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(GrpcServerOptions options);
  ~GrpcServer();

  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The address listened on (with the port bound when asked for port 0).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The coordination service; null unless hosted here.
  CoordinationServiceImpl* coordination_service() const { return coordination_.get(); }

 private:
  GrpcServer() = default;

  std::string address_;
  int port_ = 0;
  std::unique_ptr<CoordinationServiceImpl> coordination_;
  std::unique_ptr<CoordinationGrpcService> coordination_grpc_;
  std::unique_ptr<grpc::Server> server_;
};

// Splits "host:port" / "[v6]:port"; InvalidArgument naming the address if
// the host is empty or the port is not in [0, 65535].
absl::Status ParseHostPort(const std::string& address, std::string* host, int* port);

}  // namespace strata

#endif  // STRATA_RUNTIME_COORDINATION_GRPC_SERVER_H_
