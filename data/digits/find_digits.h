// Where the bundled digits file (data/digits/digits.csv.gz) is, for a binary
// run by `bazel run`, `bazel test`, from bazel-bin, from a copied bazel-bin
// tree or from anywhere in a source checkout.
//
//   absl::StatusOr<std::string> path = FindDigitsCsv(/*explicit_path=*/"", argv[0]);
//
// `explicit_path` if given (NotFound if missing), else the first that
// exists of: the runfiles of `argv0` or of this executable (RUNFILES_DIR /
// TEST_SRCDIR, <exe>.runfiles), the workspace of `bazel run`
// (BUILD_WORKSPACE_DIRECTORY), data/digits/digits.csv.gz in the working
// directory or any parent, and the same above the executable's real path.
// NotFound listing where it looked otherwise.
//
// Thread-safety: reentrant. Ownership: none.
#ifndef STRATA_DATA_DIGITS_FIND_DIGITS_H_
#define STRATA_DATA_DIGITS_FIND_DIGITS_H_

#include <string>

#include "absl/status/statusor.h"

namespace strata {

absl::StatusOr<std::string> FindDigitsCsv(const std::string& explicit_path, const std::string& argv0);

}  // namespace strata

#endif  // STRATA_DATA_DIGITS_FIND_DIGITS_H_
