// Envs for tests (base/env.h): a clock the test moves by hand, and a file
// system that fails the n-th change made through it.
//
//   ManualClockEnv clock;                    // starts at a fixed time
//   options.env = &clock;
//   clock.Advance(absl::Seconds(11));        // no sleeping
//
//   FaultyFileEnv files;
//   files.FailChange(3);                     // the third change fails
//   absl::Status s = mgr->Save(...);         // Unavailable "injected ..."
//
// Thread-safety: both may be used from any thread.
#ifndef STRATA_BASE_TESTING_TEST_ENV_H_
#define STRATA_BASE_TESTING_TEST_ENV_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/env.h"

namespace strata {
namespace testing {

// Now() is a time that moves only when the test advances it (or a
// SleepFor, which advances it instead of sleeping); files go to `target`.
class ManualClockEnv : public EnvWrapper {
 public:
  explicit ManualClockEnv(Env* target = Env::Default(),
                          absl::Time start = absl::FromUnixSeconds(1700000000));
  absl::Time Now() override;
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d);

 private:
  std::atomic<int64_t> now_ns_;
};

// Counts every change to the file system made through it (creating a file,
// an append, a sync, a close, a rename, a delete, a directory sync, a
// mkdir) and fails the n-th (1-based) with Unavailable "injected failure of
// <what> '<path>'", doing nothing of it; every other call goes to `target`.
class FaultyFileEnv : public EnvWrapper {
 public:
  explicit FaultyFileEnv(Env* target = Env::Default()) : EnvWrapper(target) {}

  // Fails the n-th change from now (0: none) and restarts the count.
  void FailChange(int64_t n);
  // Changes counted since the last FailChange.
  int64_t changes() const { return changes_.load(); }
  // Whether the failure was injected.
  bool failed() const { return failed_.load(); }

  // Counts one change to `path` and returns the injected error if it is the
  // one to fail (used by this Env's files too).
  absl::Status Change(absl::string_view what, const std::string& path);

  absl::StatusOr<std::unique_ptr<io::WritableFile>> NewWritableFile(
      const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::Status CreateDirs(const std::string& dir) override;

 private:
  std::atomic<int64_t> fail_at_{0};
  std::atomic<int64_t> changes_{0};
  std::atomic<bool> failed_{false};
};

}  // namespace testing
}  // namespace strata

#endif  // STRATA_BASE_TESTING_TEST_ENV_H_
