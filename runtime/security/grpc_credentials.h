// gRPC credentials for a job's control plane: mutual TLS (tls.h) when the
// task has certificates, else plaintext (the job token's per-call proofs,
// rpc_auth.h, guard it either way).
//
//   builder.AddListeningPort(address, ServerCredentialsFor(options.tls), &port);
//   channel = grpc::CreateCustomChannel(address, ChannelCredentialsFor(options.tls), args);
//
// With TLS the server requires and verifies a client certificate chaining
// to the CA, and the client checks that the server's certificate names the
// host of the address it dials (gRPC's own check).
//
// Thread-safety: the functions are reentrant.
#ifndef STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
#define STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>

#include "runtime/security/tls.h"

namespace strata {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const std::optional<TlsConfig>& tls);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const std::optional<TlsConfig>& tls);

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
