// gRPC credentials for a job's control plane: mutual TLS (tls.h) when the
// task has certificates, else plaintext (the job token's per-call proofs,
// rpc_auth.h, guard it either way).
//
//   builder.AddListeningPort(address, ServerCredentialsFor(options.tls), &port);
//   channel = DialTask(address, options.tls, max_message_bytes);
//
// With TLS the server requires and verifies a client certificate chaining
// to the CA, and the client checks that the server's certificate names the
// host of the address it dials (gRPC's own check).
//
// Thread-safety: the functions are reentrant.
#ifndef STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
#define STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "runtime/security/tls.h"

namespace strata {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const std::optional<TlsConfig>& tls);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const std::optional<TlsConfig>& tls);

// A channel to another task of the job at `address`, with `tls`'s
// credentials, messages up to `max_message_bytes` both ways, and reconnect
// attempts every 100 ms growing to 1 s (tasks start in any order: gRPC's
// default backoff grows to 120 s while a peer is not up yet). With
// `keepalive` > 0, while calls are open the channel pings the peer every
// `keepalive` and fails them (UNAVAILABLE) when a ping goes unanswered for
// `keepalive_timeout`: a peer that is frozen (SIGSTOP, a hung host) but
// whose kernel still holds the connection open is found that soon, not
// when a call's deadline passes. Strata's servers (GrpcServer) accept
// pings that often.
std::shared_ptr<grpc::Channel> DialTask(const std::string& address,
                                        const std::optional<TlsConfig>& tls, int max_message_bytes,
                                        absl::Duration keepalive = absl::ZeroDuration(),
                                        absl::Duration keepalive_timeout = absl::ZeroDuration());

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
