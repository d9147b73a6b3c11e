#include "data/find_data.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// `dir`/`relative` for `dir` and each of its parents.
void AddAncestors(const std::string& relative, std::string dir, std::vector<std::string>* out) {
  while (!dir.empty()) {
    out->push_back(absl::StrCat(dir == "/" ? "" : dir, "/", relative));
    if (dir == "/") break;
    dir = Dirname(dir);
  }
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

absl::StatusOr<std::string> FindDataFile(const std::string& relative, const std::string& flag,
                                         const std::string& explicit_path, const std::string& argv0) {
  if (!explicit_path.empty()) {
    if (IsFile(explicit_path)) return explicit_path;
    return absl::NotFoundError(absl::StrCat("--", flag, "=", explicit_path, ": no such file"));
  }
  // Candidates in order of specificity: the runfiles Bazel made for this
  // binary (bazel run / bazel test / a copied bazel-bin tree), then the
  // source tree of `bazel run`, then the working directory and the
  // executable's location and their parents (a source checkout, or the
  // execroot, which links the source folders).
  std::vector<std::string> candidates;
  const std::string runfiles_rel = absl::StrCat("strata/", relative);
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* v = std::getenv(env);
    if (v != nullptr && *v != '\0') candidates.push_back(absl::StrCat(v, "/", runfiles_rel));
  }
  const std::string exe = SelfExe();
  for (const std::string& bin : {argv0, exe}) {
    if (!bin.empty()) candidates.push_back(absl::StrCat(bin, ".runfiles/", runfiles_rel));
  }
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr && *ws != '\0') {
    candidates.push_back(absl::StrCat(ws, "/", relative));
  }
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) AddAncestors(relative, cwd, &candidates);
  const std::string real_exe = RealPath(exe.empty() ? argv0 : exe);
  if (!real_exe.empty()) AddAncestors(relative, Dirname(real_exe), &candidates);
  for (const std::string& c : candidates) {
    if (IsFile(c)) return c;
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot find ", relative, "; pass --", flag, "=FILE. Looked in: ",
      absl::StrJoin(candidates, ", ")));
}

}  // namespace strata
