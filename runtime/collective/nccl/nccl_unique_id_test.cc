#include "runtime/collective/nccl/nccl_unique_id.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

// A fake id: every byte value appears, so the encoding is checked for all.
std::string FakeId(int seed) {
  std::string id(kNcclUniqueIdBytes, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 2 + seed) & 0xff);
  return id;
}

TEST(NcclUniqueIdTest, EncodeDecodeRoundTripsEveryByte) {
  for (int seed : {0, 1}) {
    const std::string id = FakeId(seed);
    const std::string value = EncodeNcclUniqueId(id);
    EXPECT_TRUE(absl::StartsWith(value, "nccl-id:"));
    EXPECT_EQ(value.size(), 8 + 2 * kNcclUniqueIdBytes);
    for (char c : value) EXPECT_TRUE(c >= 32 && c < 127) << "not printable: " << int(c);
    absl::StatusOr<std::string> back = DecodeNcclUniqueId(value, "k");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, id);
  }
}

TEST(NcclUniqueIdTest, MalformedValuesAreInvalidArgumentNamingTheKey) {
  const std::string good = EncodeNcclUniqueId(FakeId(3));
  const std::vector<std::string> bad = {
      "",
      "garbage",
      good.substr(0, good.size() - 2),        // one byte short
      good + "00",                            // one byte long
      good.substr(0, good.size() - 1),        // odd number of digits
      "nccl-id:" + std::string(2 * kNcclUniqueIdBytes, 'g'),
      std::string("nccl-id:\x01\xff", 10) + std::string(2 * kNcclUniqueIdBytes - 2, '0'),
  };
  for (const std::string& v : bad) {
    absl::StatusOr<std::string> r = DecodeNcclUniqueId(v, "nccl/group/7");
    ASSERT_FALSE(r.ok()) << "accepted '" << v << "'";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "nccl/group/7")) << r.status();
  }
}

TEST(NcclUniqueIdTest, RankZeroPublishesAndOthersGetTheSameId) {
  InMemoryKeyValueStore kv;
  constexpr int kRanks = 4;
  std::vector<absl::StatusOr<std::string>> ids(kRanks, absl::UnknownError("not run"));
  int made = 0;
  std::vector<std::thread> threads;
  // Others start first: they must block until rank 0 publishes.
  for (int r = kRanks - 1; r >= 0; --r) {
    threads.emplace_back([&, r] {
      ids[r] = ExchangeNcclUniqueId(&kv, "nccl/test", r, kRanks, absl::Seconds(30),
                                    [&]() -> absl::StatusOr<std::string> {
                                      ++made;  // only rank 0 calls it
                                      return FakeId(5);
                                    });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made, 1);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(ids[r].ok()) << "rank " << r << ": " << ids[r].status();
    EXPECT_EQ(*ids[r], FakeId(5)) << "rank " << r;
  }
  absl::StatusOr<std::string> stored = kv.Get("nccl/test", absl::Seconds(1));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, EncodeNcclUniqueId(FakeId(5)));
}

TEST(NcclUniqueIdTest, MissingRankZeroIsDeadlineExceededNamingKeyAndRankZero) {
  InMemoryKeyValueStore kv;
  absl::StatusOr<std::string> r =
      ExchangeNcclUniqueId(&kv, "nccl/lonely", 1, 2, absl::Milliseconds(50), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "nccl/lonely")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "rank 0 never published")) << r.status();
}

TEST(NcclUniqueIdTest, WrongSizeIdInTheStoreIsInvalidArgumentNotACrash) {
  InMemoryKeyValueStore kv;
  // A 64-byte id, as another program (or NCCL version) might have written.
  ASSERT_TRUE(kv.Insert("nccl/short", EncodeNcclUniqueId(std::string(64, 'x'))).ok());
  absl::StatusOr<std::string> r =
      ExchangeNcclUniqueId(&kv, "nccl/short", 1, 2, absl::Seconds(5), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "nccl/short")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "64 bytes")) << r.status();
}

TEST(NcclUniqueIdTest, ReusedKeyIsAlreadyExistsOnRankZero) {
  InMemoryKeyValueStore kv;
  auto make = []() -> absl::StatusOr<std::string> { return FakeId(1); };
  ASSERT_TRUE(ExchangeNcclUniqueId(&kv, "nccl/once", 0, 2, absl::Seconds(1), make).ok());
  absl::StatusOr<std::string> again = ExchangeNcclUniqueId(&kv, "nccl/once", 0, 2, absl::Seconds(1), make);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_TRUE(absl::StrContains(again.status().message(), "new key")) << again.status();
}

TEST(NcclUniqueIdTest, BadArgumentsAndFailingIdMaker) {
  InMemoryKeyValueStore kv;
  auto make = []() -> absl::StatusOr<std::string> { return FakeId(1); };
  EXPECT_EQ(ExchangeNcclUniqueId(nullptr, "k", 0, 1, absl::Seconds(1), make).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangeNcclUniqueId(&kv, "", 0, 1, absl::Seconds(1), make).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangeNcclUniqueId(&kv, "k", 2, 2, absl::Seconds(1), make).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangeNcclUniqueId(&kv, "k", -1, 2, absl::Seconds(1), make).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> failed = ExchangeNcclUniqueId(
      &kv, "k2", 0, 2, absl::Seconds(1),
      []() -> absl::StatusOr<std::string> { return absl::UnavailableError("no network interface"); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "no network interface"));
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "k2"));
  // Nothing was published for a failed maker.
  EXPECT_FALSE(kv.Get("k2", absl::Milliseconds(1)).ok());
  absl::StatusOr<std::string> wrong = ExchangeNcclUniqueId(
      &kv, "k3", 0, 2, absl::Seconds(1), []() -> absl::StatusOr<std::string> { return std::string("x"); });
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace strata
