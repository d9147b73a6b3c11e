#include "base/file_io.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace io {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string Dir() {
  absl::StatusOr<std::string> d = MakeTempDir("file_io_test");
  EXPECT_TRUE(d.ok()) << d.status();
  return d.value_or("/nonexistent");
}

TEST(FileIoTest, AtomicWriteThenReadBack) {
  const std::string path = JoinPath(Dir(), "f");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0ond", 7)).ok());
  absl::StatusOr<std::string> got = ReadFileToString(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("sec\0ond", 7));
  // No temporary file is left beside it.
  absl::StatusOr<std::vector<std::string>> names = ListDir(DirName(path));
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, UnorderedElementsAre("f"));
}

TEST(FileIoTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = JoinPath(Dir(), "absent");
  absl::StatusOr<std::string> got = ReadFileToString(path);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(path));
  EXPECT_FALSE(FileExists(path));
  EXPECT_TRUE(DeleteFile(path).ok()) << "deleting an absent file is fine";
}

TEST(FileIoTest, ReadPastTheEndIsDataLoss) {
  const std::string path = JoinPath(Dir(), "short");
  ASSERT_TRUE(WriteFileAtomically(path, "0123456789").ok());
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = RandomAccessFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), 10u);
  char buf[8];
  ASSERT_TRUE((*f)->Read(2, 8, buf).ok());
  EXPECT_EQ(std::string(buf, 8), "23456789");
  absl::Status past = (*f)->Read(5, 8, buf);
  EXPECT_EQ(past.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(past.message()), HasSubstr(path));
}

TEST(FileIoTest, WritableFileAppendsSyncsAndRenames) {
  const std::string dir = Dir();
  absl::StatusOr<std::unique_ptr<WritableFile>> f = WritableFile::Create(JoinPath(dir, "tmp"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Append("ab").ok());
  ASSERT_TRUE((*f)->Append("cd").ok());
  EXPECT_EQ((*f)->size(), 4u);
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Close().ok());
  ASSERT_TRUE(RenameFile(JoinPath(dir, "tmp"), JoinPath(dir, "final")).ok());
  ASSERT_TRUE(SyncDir(dir).ok());
  EXPECT_EQ(ReadFileToString(JoinPath(dir, "final")).value_or(""), "abcd");
}

TEST(FileIoTest, CreateDirsMakesEveryLevel) {
  const std::string deep = JoinPath(Dir(), "a/b/c");
  ASSERT_TRUE(CreateDirs(deep).ok());
  ASSERT_TRUE(CreateDirs(deep).ok()) << "existing directories are fine";
  EXPECT_TRUE(FileExists(deep));
}

TEST(FileIoTest, PathPieces) {
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(BaseName("a/b/c"), "c");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_NE(UniqueId(), UniqueId());
}

TEST(FileIoTest, TempDirsAreNewAndUnderTheTestFolder) {
  const std::string a = Dir(), b = Dir();
  EXPECT_NE(a, b);
  EXPECT_TRUE(FileExists(a));
  const char* test_tmp = std::getenv("TEST_TMPDIR");
  if (test_tmp != nullptr) {
    EXPECT_TRUE(absl::StartsWith(a, test_tmp)) << a;
  }
  EXPECT_TRUE(absl::StrContains(BaseName(a), "file_io_test.")) << a;
  absl::StatusOr<std::vector<std::string>> names = ListDir(a);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
}

TEST(FileIoTest, TempDirUnderAMissingFolderIsAnErrorNamingIt) {
  const char* saved = std::getenv("TEST_TMPDIR");
  const std::string keep = saved != nullptr ? saved : "";
  ASSERT_EQ(setenv("TEST_TMPDIR", "/nonexistent/strata_base", 1), 0);
  absl::StatusOr<std::string> d = MakeTempDir("x");
  if (saved != nullptr) {
    setenv("TEST_TMPDIR", keep.c_str(), 1);
  } else {
    unsetenv("TEST_TMPDIR");
  }
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("/nonexistent/strata_base/x."));
}

}  // namespace
}  // namespace io
}  // namespace strata
