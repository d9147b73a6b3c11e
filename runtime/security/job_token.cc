#include "runtime/security/job_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace strata {

absl::StatusOr<JobToken> JobToken::FromSecret(std::string secret) {
  if (secret.size() < kMinJobTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("job token: ", secret.size(),
                                                   " bytes, fewer than the ", kMinJobTokenBytes,
                                                   " a token needs"));
  }
  return JobToken(std::move(secret));
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    // OpenSSL's CSPRNG seeds from getrandom(2); failing means the system
    // cannot give randomness at all, and a guessable token is worse than none.
    std::fprintf(stderr, "strata: the system's random number generator failed\n");
    std::abort();
  }
  return out;
}

JobToken JobToken::Generate() { return JobToken(absl::BytesToHexString(RandomBytes(32))); }

std::string JobToken::Sign(absl::string_view message) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool JobToken::Verify(absl::string_view message, absl::string_view mac) const {
  if (mac.size() != kMacBytes) return false;
  const std::string expected = Sign(message);
  return CRYPTO_memcmp(expected.data(), mac.data(), kMacBytes) == 0;
}

namespace {

absl::StatusOr<JobToken> FromFile(const std::string& path, const std::string& source) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("job token file '", path, "' (", source, ") cannot be read"));
  }
  // A token is short; reading a bounded prefix keeps a wrong path (a device,
  // a huge file) from costing memory.
  std::string secret(4096, '\0');
  in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  secret.resize(static_cast<size_t>(in.gcount()));
  if (in.gcount() == 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("job token file '", path, "' (", source, ") is larger than 4 KiB"));
  }
  absl::StripTrailingAsciiWhitespace(&secret);
  absl::StatusOr<JobToken> token = JobToken::FromSecret(std::move(secret));
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job token file '", path, "' (", source, "): ", token.status().message()));
  }
  return token;
}

}  // namespace

absl::StatusOr<std::optional<JobToken>> ResolveJobToken(const std::string& token_file,
                                                        bool insecure) {
  if (!token_file.empty()) return FromFile(token_file, "--job_token_file");
  if (const char* f = std::getenv(kJobTokenFileEnv); f != nullptr && *f != '\0') {
    return FromFile(f, kJobTokenFileEnv);
  }
  if (const char* t = std::getenv(kJobTokenEnv); t != nullptr && *t != '\0') {
    absl::StatusOr<JobToken> token = JobToken::FromSecret(t);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(kJobTokenEnv, ": ", token.status().message()));
    }
    return std::optional<JobToken>(*std::move(token));
  }
  if (insecure) return std::optional<JobToken>();
  return absl::FailedPreconditionError(absl::StrCat(
      "no job token: every task of a multi-worker job needs the same secret of at least ",
      kMinJobTokenBytes, " bytes, so that it serves only the job's own tasks. tools/launch sets ",
      kJobTokenEnv, " itself; elsewhere set ", kJobTokenEnv, ", or ", kJobTokenFileEnv,
      " or --job_token_file to a file holding it (a Slurm or Kubernetes secret). "
      "--insecure_no_job_token runs without one"));
}

}  // namespace strata
