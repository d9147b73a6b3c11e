#include "runtime/security/rpc_auth.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace strata {
namespace {

std::string Deterministic(const google::protobuf::Message& m) {
  std::string bytes;
  google::protobuf::io::StringOutputStream out(&bytes);
  google::protobuf::io::CodedOutputStream coded(&out);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

std::string SignedText(absl::string_view method, int64_t unix_ms, absl::string_view nonce,
                       const google::protobuf::Message& request) {
  return absl::StrCat("strata-rpc-v1\n", method, "\n", unix_ms, "\n", nonce, "\n",
                      Deterministic(request));
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string MakeRpcProof(const JobToken& token, absl::string_view method,
                         const google::protobuf::Message& request, absl::Time signed_at) {
  const int64_t unix_ms = absl::ToUnixMillis(signed_at);
  const std::string nonce = absl::BytesToHexString(RandomBytes(8));
  const std::string mac = token.Sign(SignedText(method, unix_ms, nonce, request));
  return absl::StrCat("v1.", unix_ms, ".", nonce, ".", absl::BytesToHexString(mac));
}

void SignRpc(const JobToken& token, absl::string_view method,
             const google::protobuf::Message& request, grpc::ClientContext* ctx) {
  ctx->AddMetadata(kRpcProofKey, MakeRpcProof(token, method, request, absl::Now()));
}

absl::Status RpcVerifier::Check(absl::string_view method, const google::protobuf::Message& request,
                                const grpc::ServerContextBase& ctx) {
  if (!token_.has_value()) return absl::OkStatus();
  auto refuse = [&](absl::string_view why) {
    return absl::UnauthenticatedError(absl::StrCat(
        method, " refused: ", why,
        " (every task of a job must hold the job's token: docs/cluster.md, \"Job token\")"));
  };
  const auto& md = ctx.client_metadata();
  auto it = md.find(kRpcProofKey);
  if (it == md.end()) return refuse("the call carries no job-token proof");
  const absl::string_view proof(it->second.data(), it->second.size());
  // v1.<ms>.<16 hex>.<64 hex>: bounded before anything is parsed.
  std::vector<absl::string_view> parts = absl::StrSplit(proof, '.');
  int64_t unix_ms = 0;
  if (proof.size() > 128 || parts.size() != 4 || parts[0] != "v1" ||
      !absl::SimpleAtoi(parts[1], &unix_ms) || parts[2].size() != 16 || !IsLowerHex(parts[2]) ||
      parts[3].size() != 2 * kMacBytes || !IsLowerHex(parts[3])) {
    return refuse("its job-token proof is malformed");
  }
  const std::string mac = absl::HexStringToBytes(parts[3]);
  if (!token_->Verify(SignedText(method, unix_ms, parts[2], request), mac)) {
    return refuse("its job-token proof does not match this job's token");
  }
  const absl::Time signed_at = absl::FromUnixMillis(unix_ms);
  if (absl::AbsDuration(absl::Now() - signed_at) > kRpcProofWindow) {
    return refuse(absl::StrCat("its job-token proof is outside the ",
                               absl::FormatDuration(kRpcProofWindow),
                               " window (clocks apart, or a replay)"));
  }
  if (!FirstSeen(mac, signed_at)) return refuse("its job-token proof was used before (a replay)");
  return absl::OkStatus();
}

bool RpcVerifier::FirstSeen(const std::string& mac, absl::Time signed_at) {
  MutexLock l(&mu_);
  // A proof is refused by the window check once signed_at + window has
  // passed; until then it must be remembered. Entries are in arrival order,
  // which skewed clocks make only roughly the order of their expiry: one
  // that expires early may wait behind a later one, within the bound.
  const absl::Time now = absl::Now();
  while (!order_.empty() && (order_.front().first < now || order_.size() >= kMaxRemembered)) {
    seen_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!seen_.insert(mac).second) return false;
  order_.emplace_back(signed_at + kRpcProofWindow, mac);
  return true;
}

}  // namespace strata
