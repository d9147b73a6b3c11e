#include "base/env.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/testing/test_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string Dir() {
  absl::StatusOr<std::string> d = io::MakeTempDir("env_test");
  EXPECT_TRUE(d.ok()) << d.status();
  return d.value_or("/nonexistent");
}

TEST(EnvTest, TheDefaultIsTheRealClockAndTheRealFiles) {
  Env* env = Env::Default();
  EXPECT_EQ(env, EnvOrDefault(nullptr));
  const absl::Time before = absl::Now();
  const absl::Time now = env->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
  const std::string path = io::JoinPath(Dir(), "f");
  ASSERT_TRUE(env->WriteFileAtomically(path, "contents").ok());
  EXPECT_TRUE(io::FileExists(path));
  absl::StatusOr<std::string> got = io::ReadFileToString(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "contents");
}

TEST(EnvTest, AManualClockMovesOnlyWhenAdvanced) {
  testing::ManualClockEnv clock;
  const absl::Time t0 = clock.Now();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(90));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(90));
  const absl::Time real = absl::Now();
  clock.SleepFor(absl::Hours(1));  // advances instead of sleeping
  EXPECT_LT(absl::Now() - real, absl::Seconds(10));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(90) + absl::Hours(1));
}

// Every step of an atomic write failing in turn: the file holds the old
// contents or (only when the last step, the directory's fsync, fails) the
// new, never a mixture, and no temporary file is left behind.
TEST(EnvTest, AnAtomicWriteFailingAtAnyStepLeavesTheOldOrTheNewFile) {
  const std::string dir = Dir();
  const std::string path = io::JoinPath(dir, "f");
  testing::FaultyFileEnv env;
  ASSERT_TRUE(env.WriteFileAtomically(path, "old").ok());
  const int64_t steps = env.changes();
  EXPECT_EQ(steps, 6) << "create, append, fsync, close, rename, fsync of the directory";
  for (int64_t k = 1; k <= steps; ++k) {
    SCOPED_TRACE(k);
    env.FailChange(k);
    absl::Status s = env.WriteFileAtomically(path, std::string(1000, 'n'));
    ASSERT_TRUE(env.failed());
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("injected failure of"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(dir));
    absl::StatusOr<std::string> got = io::ReadFileToString(path);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, k == steps ? std::string(1000, 'n') : "old");
    absl::StatusOr<std::vector<std::string>> names = io::ListDir(dir);
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_THAT(*names, UnorderedElementsAre("f"));
    ASSERT_TRUE(env.WriteFileAtomically(path, "old").ok());
  }
}

TEST(EnvTest, AFaultyEnvFailsNothingUnlessAsked) {
  testing::FaultyFileEnv env;
  const std::string path = io::JoinPath(Dir(), "f");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(env.WriteFileAtomically(path, "x").ok());
  EXPECT_FALSE(env.failed());
  EXPECT_EQ(env.changes(), 18);
  absl::StatusOr<std::string> got = env.ReadFileToString(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "x");
  EXPECT_EQ(env.changes(), 18) << "reads change nothing";
}

}  // namespace
}  // namespace strata
