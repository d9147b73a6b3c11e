#include "base/env.h"

#include "absl/strings/str_cat.h"

namespace strata {
namespace {

class PosixEnv final : public Env {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  absl::StatusOr<std::unique_ptr<io::WritableFile>> NewWritableFile(
      const std::string& path) override {
    return io::WritableFile::Create(path);
  }
  absl::StatusOr<std::unique_ptr<io::RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return io::RandomAccessFile::Open(path);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return io::RenameFile(from, to);
  }
  absl::Status DeleteFile(const std::string& path) override { return io::DeleteFile(path); }
  absl::Status SyncDir(const std::string& dir) override { return io::SyncDir(dir); }
  absl::Status CreateDirs(const std::string& dir) override { return io::CreateDirs(dir); }
  bool FileExists(const std::string& path) override { return io::FileExists(path); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return io::ListDir(dir);
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv;
  return env;
}

absl::StatusOr<std::string> Env::ReadFileToString(const std::string& path) {
  absl::StatusOr<std::unique_ptr<io::RandomAccessFile>> f = NewRandomAccessFile(path);
  if (!f.ok()) return f.status();
  std::string s((*f)->size(), '\0');
  absl::Status st = (*f)->Read(0, s.size(), s.data());
  if (!st.ok()) return st;
  return s;
}

absl::Status Env::WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp-", io::UniqueId());
  absl::StatusOr<std::unique_ptr<io::WritableFile>> f = NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  absl::Status st = (*f)->Append(contents);
  if (st.ok()) st = (*f)->Sync();
  if (st.ok()) st = (*f)->Close();
  if (st.ok()) st = RenameFile(tmp, path);
  if (!st.ok()) {
    DeleteFile(tmp).IgnoreError();  // best effort: the error that matters is st
    return st;
  }
  return SyncDir(io::DirName(path));
}

namespace io {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  return Env::Default()->ReadFileToString(path);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  return Env::Default()->WriteFileAtomically(path, contents);
}

}  // namespace io
}  // namespace strata
