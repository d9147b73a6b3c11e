#include "runtime/coordination/grpc_server.h"

#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/security/grpc_credentials.h"

namespace strata {

absl::Status ParseHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address '", address, "' is not host:port"));
  }
  *host = address.substr(0, colon);
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address '", address, "' has a bad port"));
  }
  return absl::OkStatus();
}

namespace {

// gRPC's own log lines (a failed bind prints a page of nested causes before
// Strata's one-line error says the same) go to stderr only when the user
// asks gRPC to log, by setting GRPC_VERBOSITY; every failure Strata cares
// about reaches it as a status and is reported in its own words.
void GrpcLog(gpr_log_func_args* args) {
  static const bool wanted = std::getenv("GRPC_VERBOSITY") != nullptr;
  if (!wanted) return;
  std::fprintf(stderr, "grpc: %s:%d: %s\n", args->file, args->line, args->message);
}

}  // namespace

void QuietGrpcLogs() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(GrpcLog); });
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(GrpcServerOptions options) {
  QuietGrpcLogs();
  std::string host;
  int port = 0;
  STRATA_RETURN_IF_ERROR(ParseHostPort(options.address, &host, &port));
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("server on ", options.address,
                                                   ": max_message_bytes must be positive, not ",
                                                   options.max_message_bytes));
  }
  std::unique_ptr<GrpcServer> server(new GrpcServer);
  grpc::ServerBuilder builder;
  if (options.host_coordination_service) {
    STRATA_ASSIGN_OR_RETURN(server->coordination_,
                            CoordinationServiceImpl::Create(std::move(options.coordination)));
  }
  server->coordination_grpc_ = std::make_unique<CoordinationGrpcService>(
      server->coordination_.get(), options.address, std::move(options.job_token));
  builder.RegisterService(server->coordination_grpc_.get());
  for (grpc::Service* s : options.services) builder.RegisterService(s);
  // gRPC turns SO_REUSEPORT on by default, which would let a second server
  // share a taken port silently instead of failing here.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Peers' keepalive pings (DialTask's keepalive) are welcome as often as
  // every 100 ms, and never answered with GOAWAY ("too many pings").
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // The coordination service answers with gRPC's callback API (its waiting
  // calls hold no thread); services added by their owners may be sync ones,
  // which run each call on a thread of its own: bound those threads, so
  // that a flood of calls meets RESOURCE_EXHAUSTED rather than exhausting
  // the process.
  grpc::ResourceQuota quota(absl::StrCat("strata-server-", options.address));
  const int tasks = static_cast<int>(options.coordination.tasks.size());
  quota.SetMaxThreads(std::min(kMaxServerThreads, 8 * tasks + 64));
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  int bound_port = 0;
  builder.AddListeningPort(options.address, ServerCredentialsFor(options.tls), &bound_port);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot start the gRPC server on ", options.address,
        ": could not listen there (port already in use, or the host is not an address of this "
        "machine)"));
  }
  server->port_ = bound_port;
  server->address_ = absl::StrCat(host, ":", bound_port);
  return server;
}

GrpcServer::~GrpcServer() {
  // Handlers blocked in the coordination service return first, so the
  // server's shutdown need not wait for their timeouts.
  if (coordination_ != nullptr) coordination_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
  // The last reactions of waiting calls (a cancel racing their answer) are
  // done before the service they touch goes.
  if (coordination_grpc_ != nullptr) coordination_grpc_->AwaitReactorsGone();
}

}  // namespace strata
