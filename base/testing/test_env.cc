#include "base/testing/test_env.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {
namespace testing {
namespace {

// A file whose appends, syncs and close count as changes of its Env.
class FaultyWritableFile final : public io::WritableFile {
 public:
  FaultyWritableFile(FaultyFileEnv* env, std::unique_ptr<io::WritableFile> file)
      : env_(env), file_(std::move(file)) {}

  absl::Status Append(absl::string_view data) override {
    absl::Status s = env_->Change("append to", path());
    return s.ok() ? file_->Append(data) : s;
  }
  absl::Status Sync() override {
    absl::Status s = env_->Change("fsync of", path());
    return s.ok() ? file_->Sync() : s;
  }
  absl::Status Close() override {
    absl::Status s = env_->Change("close of", path());
    return s.ok() ? file_->Close() : s;
  }
  uint64_t size() const override { return file_->size(); }
  const std::string& path() const override { return file_->path(); }

 private:
  FaultyFileEnv* const env_;
  const std::unique_ptr<io::WritableFile> file_;
};

}  // namespace

ManualClockEnv::ManualClockEnv(Env* target, absl::Time start)
    : EnvWrapper(target), now_ns_(absl::ToUnixNanos(start)) {}

absl::Time ManualClockEnv::Now() { return absl::FromUnixNanos(now_ns_.load()); }

void ManualClockEnv::Advance(absl::Duration d) { now_ns_.fetch_add(absl::ToInt64Nanoseconds(d)); }

void FaultyFileEnv::FailChange(int64_t n) {
  fail_at_.store(n);
  changes_.store(0);
  failed_.store(false);
}

absl::Status FaultyFileEnv::Change(absl::string_view what, const std::string& path) {
  const int64_t n = changes_.fetch_add(1) + 1;
  if (n != fail_at_.load()) return absl::OkStatus();
  failed_.store(true);
  return absl::UnavailableError(absl::StrCat("injected failure of ", what, " '", path, "'"));
}

absl::StatusOr<std::unique_ptr<io::WritableFile>> FaultyFileEnv::NewWritableFile(
    const std::string& path) {
  STRATA_RETURN_IF_ERROR(Change("creating", path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> f, target()->NewWritableFile(path));
  return std::unique_ptr<io::WritableFile>(new FaultyWritableFile(this, std::move(f)));
}

absl::Status FaultyFileEnv::RenameFile(const std::string& from, const std::string& to) {
  STRATA_RETURN_IF_ERROR(Change(absl::StrCat("renaming '", from, "' to"), to));
  return target()->RenameFile(from, to);
}

absl::Status FaultyFileEnv::DeleteFile(const std::string& path) {
  STRATA_RETURN_IF_ERROR(Change("deleting", path));
  return target()->DeleteFile(path);
}

absl::Status FaultyFileEnv::SyncDir(const std::string& dir) {
  STRATA_RETURN_IF_ERROR(Change("fsync of directory", dir));
  return target()->SyncDir(dir);
}

absl::Status FaultyFileEnv::CreateDirs(const std::string& dir) {
  STRATA_RETURN_IF_ERROR(Change("creating directory", dir));
  return target()->CreateDirs(dir);
}

}  // namespace testing
}  // namespace strata
