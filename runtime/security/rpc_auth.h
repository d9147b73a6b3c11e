// Job-token proof on gRPC calls (job_token.h): the client signs each call,
// the server checks it before the handler does anything.
//
//   // client
//   grpc::ClientContext ctx;
//   SignRpc(token, "Heartbeat", request, &ctx);
//   // server, first thing in the handler
//   absl::Status s = verifier.Check("Heartbeat", *request, *ctx);
//   if (!s.ok()) return ToGrpcStatus(s);   // Unauthenticated
//
// The proof is the metadata entry "strata-auth: v1.<unix ms>.<nonce>.<mac>",
// mac = HMAC-SHA256(token, "strata-rpc-v1" | method | time | nonce | the
// request's deterministic serialization), hex-encoded. The token itself is
// never sent. A proof binds its method and request, so it cannot be moved to
// another call; a proof older or newer than kRpcProofWindow (clock skew
// allowed between hosts) is refused, and within the window each proof is
// accepted once (a replay cache of the proofs seen, bounded). Refusals say
// why in terms that reveal nothing of the token, the tasks' incarnations or
// the cluster's state.
//
// Thread-safety: RpcVerifier::Check may be called concurrently.
#ifndef STRATA_RUNTIME_SECURITY_RPC_AUTH_H_
#define STRATA_RUNTIME_SECURITY_RPC_AUTH_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "google/protobuf/message.h"
#include "runtime/security/job_token.h"

namespace strata {

inline constexpr char kRpcProofKey[] = "strata-auth";
inline constexpr absl::Duration kRpcProofWindow = absl::Minutes(5);

// The proof for (method, request) signed at `signed_at`, with a fresh nonce:
// the value of the kRpcProofKey metadata entry.
std::string MakeRpcProof(const JobToken& token, absl::string_view method,
                         const google::protobuf::Message& request, absl::Time signed_at);
// Adds the proof for (method, request), signed now, to `ctx`'s metadata.
void SignRpc(const JobToken& token, absl::string_view method,
             const google::protobuf::Message& request, grpc::ClientContext* ctx);

class RpcVerifier {
 public:
  // No token: every call is accepted (--insecure_no_job_token).
  explicit RpcVerifier(std::optional<JobToken> token) : token_(std::move(token)) {}

  bool enabled() const { return token_.has_value(); }
  // OK, or Unauthenticated naming what is wrong with the proof.
  absl::Status Check(absl::string_view method, const google::protobuf::Message& request,
                     const grpc::ServerContextBase& ctx);

  // Most proofs remembered for replay detection: past it the oldest are
  // forgotten early (they are still refused once outside the window).
  static constexpr size_t kMaxRemembered = 1 << 18;

 private:
  // Refuses a proof seen before; remembers it. Drops those outside the window.
  bool FirstSeen(const std::string& mac, absl::Time signed_at);

  const std::optional<JobToken> token_;
  Mutex mu_;
  absl::flat_hash_set<std::string> seen_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, std::string>> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_RPC_AUTH_H_
