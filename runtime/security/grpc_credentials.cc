#include "runtime/security/grpc_credentials.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

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
                                        const std::optional<TlsConfig>& tls,
                                        int max_message_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, ChannelCredentialsFor(tls), args);
}

}  // namespace strata
