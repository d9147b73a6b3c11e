#include "runtime/security/test_certs.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status.h"

namespace strata {
namespace {

absl::Status Run(const std::string& command) {
  const std::string full = absl::StrCat(command, " >/dev/null 2>&1");
  const int rc = std::system(full.c_str());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("test certificates: `", command, "` exited ", rc,
                                            " (is Debian's openssl installed?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestCa> MakeTestCa(const std::string& dir, const std::string& name) {
  TestCa ca{dir, io::JoinPath(dir, name + "-ca.crt"), io::JoinPath(dir, name + "-ca.key")};
  STRATA_RETURN_IF_ERROR(Run(absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2",
      " -keyout ", ca.key_file, " -out ", ca.cert_file, " -subj /CN=", name, "-ca",
      " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign")));
  return ca;
}

absl::StatusOr<TlsFiles> MakeTestCert(const TestCa& ca, const std::string& name,
                                      const std::string& san) {
  const std::string base = io::JoinPath(ca.dir, name);
  const std::string ext = base + ".ext";
  STRATA_RETURN_IF_ERROR(io::WriteFileAtomically(
      ext, absl::StrCat("subjectAltName=", san, "\nbasicConstraints=CA:FALSE\n")));
  TlsFiles f{base + ".crt", base + ".key", ca.cert_file};
  STRATA_RETURN_IF_ERROR(Run(
      absl::StrCat("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ",
                   f.key_file, " -out ", base, ".csr -subj /CN=", name)));
  STRATA_RETURN_IF_ERROR(Run(absl::StrCat(
      "openssl x509 -req -in ", base, ".csr -CA ", ca.cert_file, " -CAkey ", ca.key_file,
      " -set_serial 0x", io::UniqueId(), " -days 1 -out ", f.cert_file, " -extfile ", ext)));
  return f;
}

absl::StatusOr<TlsFiles> MakeLocalhostCerts(const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(std::string dir, io::MakeTempDir(name));
  STRATA_ASSIGN_OR_RETURN(TestCa ca, MakeTestCa(dir, name));
  return MakeTestCert(ca, name + "-node", "DNS:localhost,IP:127.0.0.1");
}

}  // namespace strata
