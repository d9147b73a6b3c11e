// Thin POSIX file helpers (namespace strata::io): every system-call failure
// becomes a Status that names the path (NotFound for a missing file, the
// errno's code otherwise). Durability is explicit: WritableFile::Sync and
// SyncDir are the fsyncs that make a rename-based commit crash-safe.
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, WritableFile::Create(tmp));
//   STRATA_RETURN_IF_ERROR(f->Append(bytes));
//   STRATA_RETURN_IF_ERROR(f->Sync());
//   STRATA_RETURN_IF_ERROR(f->Close());
//   STRATA_RETURN_IF_ERROR(RenameFile(tmp, final));
//   STRATA_RETURN_IF_ERROR(SyncDir(DirName(final)));
//
// Thread-safety: a WritableFile is used by one thread; RandomAccessFile::Read
// is safe from many threads at once (pread). The free functions are
// thread-safe. Ownership: each file object owns its descriptor.
#ifndef STRATA_BASE_FILE_IO_H_
#define STRATA_BASE_FILE_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {
namespace io {

// A file being written. Create makes a POSIX one; an Env (env.h) may make
// others (a test's file that fails on cue).
class WritableFile {
 public:
  // Creates or truncates `path`.
  static absl::StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path);
  virtual ~WritableFile() = default;  // closes without syncing if Close was not called

  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Sync() = 0;  // fsync: data and size are on disk
  virtual absl::Status Close() = 0;
  virtual uint64_t size() const = 0;  // bytes appended
  virtual const std::string& path() const = 0;
};

class RandomAccessFile {
 public:
  // Opens `path` (a regular file) for reading; its size is taken once.
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  virtual ~RandomAccessFile() = default;

  // Reads exactly n bytes at offset into dst; DataLoss naming the file if the
  // file ends first.
  virtual absl::Status Read(uint64_t offset, size_t n, char* dst) const = 0;
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

// The whole file; NotFound if it does not exist. (This and
// WriteFileAtomically are Env::Default()'s; env.h.)
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
// Writes `contents` to a temporary name beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory: readers see the old or the new file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

absl::Status RenameFile(const std::string& from, const std::string& to);
absl::Status DeleteFile(const std::string& path);  // OK if already absent
absl::Status SyncDir(const std::string& dir);
// mkdir -p.
absl::Status CreateDirs(const std::string& dir);
bool FileExists(const std::string& path);
// Names (not paths) of the entries of `dir`, without "." and "..".
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// "a/b/c" -> "a/b"; "c" -> "."; "/c" -> "/".
std::string DirName(absl::string_view path);
// "a/b/c" -> "c".
std::string BaseName(absl::string_view path);
std::string JoinPath(absl::string_view dir, absl::string_view name);
// 16 hex digits, different in every call (random, pid and clock mixed).
std::string UniqueId();

// Makes a new, empty directory PREFIX.XXXXXX (mkdtemp) under $TEST_TMPDIR
// (Bazel's per-test folder), else $TMPDIR, else /tmp, and returns its path.
// Nothing removes it: under Bazel the test's folder goes with the test.
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);

}  // namespace io
}  // namespace strata

#endif  // STRATA_BASE_FILE_IO_H_
