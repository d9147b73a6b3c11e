// Test certificates, made by the openssl command line (Debian's `openssl`)
// in a directory of the test's: a CA, and certificates it signs for given
// subjectAltNames, as a user of mutual TLS (tls.h) would make them.
//
//   STRATA_ASSIGN_OR_RETURN(TestCa ca, MakeTestCa(dir, "job"));
//   STRATA_ASSIGN_OR_RETURN(TlsFiles node, MakeTestCert(ca, "node0",
//   "DNS:localhost,IP:127.0.0.1"));
//
// Keys are P-256 (fast to make); certificates are valid for a day.
#ifndef STRATA_RUNTIME_SECURITY_TEST_CERTS_H_
#define STRATA_RUNTIME_SECURITY_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/security/tls.h"

namespace strata {

struct TestCa {
  std::string dir;
  std::string cert_file;
  std::string key_file;
};

// A self-signed CA "<name>-ca" in `dir` (which must exist).
absl::StatusOr<TestCa> MakeTestCa(const std::string& dir, const std::string& name);

// A certificate for `san` ("DNS:localhost,IP:127.0.0.1") signed by `ca`, its
// key, and the CA's certificate as ca_file.
absl::StatusOr<TlsFiles> MakeTestCert(const TestCa& ca, const std::string& name,
                                      const std::string& san);

// Both at once, in a new temporary directory: a CA "<name>" and one
// certificate for localhost and 127.0.0.1.
absl::StatusOr<TlsFiles> MakeLocalhostCerts(const std::string& name);

}  // namespace strata

#endif  // STRATA_RUNTIME_SECURITY_TEST_CERTS_H_
