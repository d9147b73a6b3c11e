// Where a file bundled with Strata (data/...) is, for a binary run by
// `bazel run`, `bazel test`, from bazel-bin, from a copied bazel-bin tree or
// from anywhere in a source checkout.
//
//   absl::StatusOr<std::string> path = FindDataFile("data/text/gpl-3.txt", "text", flag_value, argv[0]);
//
// `explicit_path` if given (NotFound naming --`flag` if missing), else the
// first that exists of: the runfiles of `argv0` or of this executable
// (RUNFILES_DIR / TEST_SRCDIR, <exe>.runfiles), the workspace of `bazel run`
// (BUILD_WORKSPACE_DIRECTORY), `relative` in the working directory or any
// parent, and the same above the executable's real path. NotFound listing
// where it looked otherwise.
//
// Thread-safety: reentrant. Ownership: none.
#ifndef STRATA_DATA_FIND_DATA_H_
#define STRATA_DATA_FIND_DATA_H_

#include <string>

#include "absl/status/statusor.h"

namespace strata {

absl::StatusOr<std::string> FindDataFile(const std::string& relative, const std::string& flag,
                                         const std::string& explicit_path, const std::string& argv0);

}  // namespace strata

#endif  // STRATA_DATA_FIND_DATA_H_
