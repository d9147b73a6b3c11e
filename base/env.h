// Env: the process's clock and file system as one interface (LevelDB's Env
// is the model), so that code which reads the time or writes files can be
// run by a test against a clock it moves by hand or a file system that
// fails on cue, with no sleeping and no full disk.
//
//   Env* env = options.env != nullptr ? options.env : Env::Default();
//   const absl::Time deadline = env->Now() + timeout;
//   STRATA_RETURN_IF_ERROR(env->WriteFileAtomically(path, text));
//
// Env::Default() is the real clock (absl::Now) and POSIX files
// (file_io.h), one per process, never destroyed. EnvWrapper forwards every
// call to another Env: a test's Env derives from it and overrides only what
// it changes (base/testing/test_env.h has a manual clock and a file system
// that fails its n-th change).
//
// Components take an `Env*` in their options (null: the default):
// CoordinationServiceOptions::env (heartbeats and deadlines),
// CheckpointManager::Create and SaveCheckpoint (every file they change).
//
// Thread-safety: every method may be called from any thread; Default() is
// thread-safe. Errors are file_io.h's: a Status naming the path.
#ifndef STRATA_BASE_ENV_H_
#define STRATA_BASE_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/file_io.h"

namespace strata {

class Env {
 public:
  virtual ~Env() = default;

  // The real clock and POSIX files.
  static Env* Default();

  // ---- The clock.
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration d) = 0;

  // ---- Files, as the functions of the same names in file_io.h.
  virtual absl::StatusOr<std::unique_ptr<io::WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  virtual absl::StatusOr<std::unique_ptr<io::RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;  // OK if already absent
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  virtual absl::Status CreateDirs(const std::string& dir) = 0;  // mkdir -p
  virtual bool FileExists(const std::string& path) = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;

  // ---- Built on the calls above (so a test's Env sees each step).
  // The whole file; NotFound if it does not exist.
  absl::StatusOr<std::string> ReadFileToString(const std::string& path);
  // Writes `contents` to a temporary name beside `path`, fsyncs it, renames it
  // over `path` and fsyncs the directory: readers see the old or the new file.
  absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);
};

// `env`, or the default when null (for options whose Env may be unset).
inline Env* EnvOrDefault(Env* env) { return env != nullptr ? env : Env::Default(); }

// Forwards every call to `target` (not owned; it must outlive the wrapper).
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  absl::Time Now() override { return target_->Now(); }
  void SleepFor(absl::Duration d) override { target_->SleepFor(d); }
  absl::StatusOr<std::unique_ptr<io::WritableFile>> NewWritableFile(
      const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  absl::StatusOr<std::unique_ptr<io::RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return target_->NewRandomAccessFile(path);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  absl::Status DeleteFile(const std::string& path) override { return target_->DeleteFile(path); }
  absl::Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  absl::Status CreateDirs(const std::string& dir) override { return target_->CreateDirs(dir); }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return target_->ListDir(dir);
  }

 private:
  Env* const target_;
};

}  // namespace strata

#endif  // STRATA_BASE_ENV_H_
