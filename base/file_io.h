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

class WritableFile {
 public:
  // Creates or truncates `path`.
  static absl::StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path);
  ~WritableFile();  // closes without syncing if Close was not called
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  absl::Status Append(absl::string_view data);
  absl::Status Sync();   // fsync: data and size are on disk
  absl::Status Close();
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  const std::string path_;
  int fd_;
  uint64_t size_ = 0;
};

class RandomAccessFile {
 public:
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  // Reads exactly n bytes at offset into dst; DataLoss naming the file if the
  // file ends first.
  absl::Status Read(uint64_t offset, size_t n, char* dst) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

// The whole file; NotFound if it does not exist.
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
