#include "runtime/security/grpc_credentials.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cstdint>

namespace strata {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const std::optional<TlsConfig>& tls) {
  if (!tls.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls->ca_pem;
  o.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const std::optional<TlsConfig>& tls) {
  if (!tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls->ca_pem;
  o.pem_private_key = tls->key_pem;
  o.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::Channel> DialTask(const std::string& address,
                                        const std::optional<TlsConfig>& tls, int max_message_bytes,
                                        absl::Duration keepalive,
                                        absl::Duration keepalive_timeout) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (keepalive > absl::ZeroDuration()) {
    auto ms = [](absl::Duration d) {
      return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, 1 << 30));
    };
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms(keepalive));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(keepalive_timeout));
    // Only while calls are open, and as often as that (gRPC otherwise stops
    // after two pings without data in between: a call waiting on a frozen
    // peer sends none).
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  return grpc::CreateCustomChannel(address, ChannelCredentialsFor(tls), args);
}

}  // namespace strata
