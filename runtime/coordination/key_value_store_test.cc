#include "runtime/coordination/key_value_store.h"

#include <thread>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(InMemoryKeyValueStoreTest, InsertOnceThenGet) {
  InMemoryKeyValueStore kv;
  ASSERT_TRUE(kv.Insert("a", "1").ok());
  absl::Status again = kv.Insert("a", "2");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("'a'"), std::string::npos);
  absl::StatusOr<std::string> v = kv.Get("a", absl::Seconds(1));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "1");
}

TEST(InMemoryKeyValueStoreTest, GetWaitsForALaterInsert) {
  InMemoryKeyValueStore kv;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(kv.Insert("late", "x").ok());
  });
  absl::StatusOr<std::string> v = kv.Get("late", absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "x");
}

TEST(InMemoryKeyValueStoreTest, GetTimesOutNamingTheKey) {
  InMemoryKeyValueStore kv;
  absl::StatusOr<std::string> v = kv.Get("missing", absl::Milliseconds(10));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("'missing'"), std::string::npos);
}

}  // namespace
}  // namespace strata
