// The job token: a secret every task of one job holds, so that the job's
// control plane (gRPC) and data plane (TCP, shared memory) serve only its
// own tasks. The token itself never goes on the wire: peers prove they hold
// it with HMAC-SHA256 over what they send (an RPC's method and request, a
// handshake's challenges).
//
//   STRATA_ASSIGN_OR_RETURN(std::optional<JobToken> token,
//                           ResolveJobToken(/*token_file=*/"", /*insecure=*/false));
//   std::string mac = token->Sign("message");   // 32 bytes
//   bool ok = token->Verify("message", mac);     // constant time
//
// Where a task finds its token (ResolveJobToken), first match wins:
//   1. the file named by --job_token_file (argument `token_file`);
//   2. the file named by the environment variable STRATA_JOB_TOKEN_FILE
//      (a Kubernetes secret mounted as a file; a Slurm job's private file);
//   3. the environment variable STRATA_JOB_TOKEN (set by tools/launch).
// A file's content is the token, trailing whitespace dropped. A token has at
// least 16 bytes. With none of them, start-up fails with an error saying
// where to put one, unless `insecure` (--insecure_no_job_token) asks to run
// without (MultiWorkerMirroredStrategy then warns, once).
//
// Thread-safety: a JobToken is immutable; Sign/Verify may run concurrently.
#ifndef STRATA_RUNTIME_SECURITY_JOB_TOKEN_H_
#define STRATA_RUNTIME_SECURITY_JOB_TOKEN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

inline constexpr char kJobTokenEnv[] = "STRATA_JOB_TOKEN";
inline constexpr char kJobTokenFileEnv[] = "STRATA_JOB_TOKEN_FILE";
inline constexpr size_t kMinJobTokenBytes = 16;
inline constexpr size_t kMacBytes = 32;  // HMAC-SHA256

class JobToken {
 public:
  // InvalidArgument if shorter than kMinJobTokenBytes (the message says how
  // long it is, never what it is).
  static absl::StatusOr<JobToken> FromSecret(std::string secret);
  // 32 random bytes from the system's CSPRNG, hex-encoded (64 characters).
  static JobToken Generate();

  // HMAC-SHA256(token, message): kMacBytes raw bytes.
  std::string Sign(absl::string_view message) const;
  // Whether `mac` is Sign(message); compares in constant time.
  bool Verify(absl::string_view message, absl::string_view mac) const;
  // The secret, for handing to a child process (tools/launch) only.
  const std::string& secret() const { return secret_; }

 private:
  explicit JobToken(std::string secret) : secret_(std::move(secret)) {}
  std::string secret_;
};

// See the header comment. Returns nullopt only when `insecure` and no token
// is configured; a configured token is used even when `insecure` is set.
absl::StatusOr<std::optional<JobToken>> ResolveJobToken(const std::string& token_file,
                                                        bool insecure);

// `n` random bytes from the system's CSPRNG (challenges, nonces).
std::string RandomBytes(size_t n);

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_JOB_TOKEN_H_
