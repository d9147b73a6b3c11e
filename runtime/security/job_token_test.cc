#include "runtime/security/job_token.h"

#include <stdlib.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

class JobTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(kJobTokenEnv);
    unsetenv(kJobTokenFileEnv);
  }
  void TearDown() override { SetUp(); }
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST_F(JobTokenTest, SignVerifiesOnlyWithTheSameTokenAndMessage) {
  auto a = JobToken::FromSecret("0123456789abcdef");
  auto b = JobToken::FromSecret("0123456789abcdeF");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string mac = a->Sign("hello");
  EXPECT_EQ(mac.size(), kMacBytes);
  EXPECT_TRUE(a->Verify("hello", mac));
  EXPECT_FALSE(a->Verify("hellp", mac));
  EXPECT_FALSE(b->Verify("hello", mac));
  EXPECT_FALSE(a->Verify("hello", mac.substr(1)));
  EXPECT_NE(a->Sign("x"), b->Sign("x"));
}

TEST_F(JobTokenTest, SignIsHmacSha256) {
  // RFC 4231 test case 3 key is 20 bytes of 0xaa; data 50 bytes of 0xdd.
  auto t = JobToken::FromSecret(std::string(20, '\xaa'));
  ASSERT_TRUE(t.ok());
  const std::string mac = t->Sign(std::string(50, '\xdd'));
  const unsigned char expected[] = {0x77, 0x3e, 0xa9, 0x1e, 0x36, 0x80, 0x0e, 0x46,
                                    0x85, 0x4d, 0xb8, 0xeb, 0xd0, 0x91, 0x81, 0xa7,
                                    0x29, 0x59, 0x09, 0x8b, 0x3e, 0xf8, 0xc1, 0x22,
                                    0xd9, 0x63, 0x55, 0x14, 0xce, 0xd5, 0x65, 0xfe};
  EXPECT_EQ(mac, std::string(reinterpret_cast<const char*>(expected), sizeof(expected)));
}

TEST_F(JobTokenTest, ShortSecretRefusedWithoutEchoingIt) {
  auto t = JobToken::FromSecret("hunter2");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(t.status().message(), "hunter2"));
  EXPECT_TRUE(absl::StrContains(t.status().message(), "7 bytes"));
}

TEST_F(JobTokenTest, GeneratedTokensAreLongAndDistinct) {
  const JobToken a = JobToken::Generate(), b = JobToken::Generate();
  EXPECT_EQ(a.secret().size(), 64u);
  EXPECT_NE(a.secret(), b.secret());
}

TEST_F(JobTokenTest, ResolvesFlagFileThenEnvFileThenEnvAndElseExplains) {
  auto none = ResolveJobToken("", false);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(none.status().message(), kJobTokenEnv));
  EXPECT_TRUE(absl::StrContains(none.status().message(), "--insecure_no_job_token"));
  auto insecure = ResolveJobToken("", true);
  ASSERT_TRUE(insecure.ok());
  EXPECT_FALSE(insecure->has_value());

  setenv(kJobTokenEnv, "from-the-environment", 1);
  auto env = ResolveJobToken("", false);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->secret(), "from-the-environment");
  // A token configured wins over --insecure_no_job_token.
  EXPECT_TRUE(ResolveJobToken("", true)->has_value());

  setenv(kJobTokenFileEnv, WriteFile("env_file", "from-the-env-file\n").c_str(), 1);
  EXPECT_EQ((*ResolveJobToken("", false))->secret(), "from-the-env-file");
  const std::string flag_file = WriteFile("flag_file", "from-the-flag-file \n\n");
  EXPECT_EQ((*ResolveJobToken(flag_file, false))->secret(), "from-the-flag-file");

  auto missing = ResolveJobToken("/no/such/token", false);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/no/such/token"));
  auto short_file = ResolveJobToken(WriteFile("short", "tiny\n"), false);
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(short_file.status().message(), "tiny"));
  auto dev = ResolveJobToken("/dev/zero", false);
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kInvalidArgument);
  setenv(kJobTokenFileEnv, "", 1);
  setenv(kJobTokenEnv, "short", 1);
  auto short_env = ResolveJobToken("", false);
  EXPECT_EQ(short_env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(short_env.status().message(), kJobTokenEnv));
}

}  // namespace
}  // namespace strata
