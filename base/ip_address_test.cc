#include "base/ip_address.h"

#include <set>
#include <vector>

#include "absl/strings/match.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(IpAddressTest, Literals) {
  EXPECT_TRUE(IsIpAddress("10.0.0.2"));
  EXPECT_TRUE(IsIpAddress("::1"));
  EXPECT_FALSE(IsIpAddress("node7.example"));
  EXPECT_TRUE(IsUnspecifiedAddress("0.0.0.0"));
  EXPECT_TRUE(IsUnspecifiedAddress("::"));
  EXPECT_FALSE(IsUnspecifiedAddress("127.0.0.1"));
}

TEST(IpAddressTest, LocalAddressTowardLoopbackIsLoopback) {
  absl::StatusOr<std::string> v4 = LocalAddressToward("127.0.0.1", 9);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(*v4, "127.0.0.1");
  absl::StatusOr<std::string> v4b = LocalAddressToward("127.0.0.5", 9);
  ASSERT_TRUE(v4b.ok()) << v4b.status();
  EXPECT_EQ(*v4b, "127.0.0.1");
}

TEST(IpAddressTest, LocalAddressTowardAnUnknownHostNamesIt) {
  absl::StatusOr<std::string> bad = LocalAddressToward("no-such-host.invalid", 9);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("no-such-host.invalid"));
}

TEST(IpAddressTest, PickFreePortsGivesDistinctBindablePorts) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts("127.0.0.1", 8);
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 8u);
  for (int p : *ports) EXPECT_TRUE(p > 0 && p < 65536) << p;
  EXPECT_FALSE(PickFreePorts("localhost", 1).ok());
  absl::StatusOr<std::vector<int>> remote = PickFreePorts("192.0.2.1", 1);  // TEST-NET-1
  ASSERT_FALSE(remote.ok());
  EXPECT_TRUE(absl::StrContains(remote.status().message(), "cannot bind a port on 192.0.2.1"))
      << remote.status();
}

}  // namespace
}  // namespace strata
