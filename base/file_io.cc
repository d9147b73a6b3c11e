#include "base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata {
namespace io {
namespace {

absl::Status Errno(int err, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " '", path, "'"));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  PosixWritableFile(const PosixWritableFile&) = delete;
  PosixWritableFile& operator=(const PosixWritableFile&) = delete;

  absl::Status Append(absl::string_view data) override;
  absl::Status Sync() override;
  absl::Status Close() override;
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  int fd_;
  uint64_t size_ = 0;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  PosixRandomAccessFile(const PosixRandomAccessFile&) = delete;
  PosixRandomAccessFile& operator=(const PosixRandomAccessFile&) = delete;

  absl::Status Read(uint64_t offset, size_t n, char* dst) const override;
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WritableFile>> WritableFile::Create(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Errno(errno, "cannot create", path);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

absl::Status PosixWritableFile::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("'", path_, "' is closed"));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(errno, "cannot write", path_);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_ += data.size();
  return absl::OkStatus();
}

absl::Status PosixWritableFile::Sync() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("'", path_, "' is closed"));
  if (::fsync(fd_) != 0) return Errno(errno, "cannot fsync", path_);
  return absl::OkStatus();
}

absl::Status PosixWritableFile::Close() {
  if (fd_ < 0) return absl::OkStatus();
  int fd = fd_;
  fd_ = -1;
  // close() may report a deferred write error (NFS); it must not be retried.
  if (::close(fd) != 0) return Errno(errno, "cannot close", path_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(
    const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Errno(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Errno(err, "cannot stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  return std::unique_ptr<RandomAccessFile>(
      new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

absl::Status PosixRandomAccessFile::Read(uint64_t offset, size_t n, char* dst) const {
  while (n > 0) {
    ssize_t r = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno(errno, "cannot read", path_);
    }
    if (r == 0) {
      return absl::DataLossError(
          absl::StrCat("'", path_, "' is truncated: ", n, " bytes missing at offset ", offset));
    }
    dst += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Errno(errno, absl::StrCat("cannot rename '", from, "' to"), to);
  }
  return absl::OkStatus();
}

absl::Status DeleteFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno(errno, "cannot delete", path);
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open directory", dir);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory (EINVAL); their renames are
  // as durable as they get.
  if (rc != 0 && err != EINVAL) return Errno(err, "cannot fsync directory", dir);
  return absl::OkStatus();
}

absl::Status CreateDirs(const std::string& dir) {
  if (dir.empty() || dir == "." || dir == "/") return absl::OkStatus();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("'", dir, "' exists and is not a directory"));
  }
  absl::Status parent = CreateDirs(DirName(dir));
  if (!parent.ok()) return parent;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno(errno, "cannot create directory", dir);
  }
  return absl::OkStatus();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Errno(errno, "cannot list directory", dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    absl::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string BaseName(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

std::string UniqueId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t seed = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  uint64_t x = seed ^ (static_cast<uint64_t>(::getpid()) << 40) ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  // splitmix64 finalizer: spreads the mixed bits over the whole word.
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return absl::StrFormat("%016x", x);
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  std::string path = JoinPath(base, absl::StrCat(prefix, ".XXXXXX"));
  if (::mkdtemp(path.data()) == nullptr) return Errno(errno, "mkdtemp", path);
  return path;
}

}  // namespace io
}  // namespace strata
