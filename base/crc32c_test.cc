#include "base/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

uint32_t Both(const std::string& s) {
  uint32_t hw = crc32c::Value(s.data(), s.size());
  uint32_t sw = crc32c::ExtendPortable(0, s.data(), s.size());
  EXPECT_EQ(hw, sw) << "hardware and table disagree on a " << s.size() << "-byte input";
  return sw;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Both(""), 0u);
  EXPECT_EQ(Both("123456789"), 0xE3069283u);
  EXPECT_EQ(Both("a"), 0xC1D04330u);
  // RFC 3720 (iSCSI) appendix B.4 test vectors.
  EXPECT_EQ(Both(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Both(std::string(32, '\xff')), 0x62A8AB43u);
  std::string inc(32, '\0'), dec(32, '\0');
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Both(inc), 0x46DD794Eu);
  EXPECT_EQ(Both(dec), 0x113FDB5Cu);
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplitAndAlignment) {
  std::mt19937 rng(7);
  std::vector<char> buf(300);
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t start = 0; start < 9; ++start) {
    const char* p = buf.data() + start;
    size_t n = buf.size() - start;
    uint32_t whole = crc32c::ExtendPortable(0, p, n);
    EXPECT_EQ(crc32c::Value(p, n), whole);
    for (size_t split = 0; split <= n; split += 13) {
      EXPECT_EQ(crc32c::Extend(crc32c::Value(p, split), p + split, n - split), whole);
      EXPECT_EQ(crc32c::ExtendPortable(crc32c::ExtendPortable(0, p, split), p + split, n - split),
                whole);
    }
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::string s = "the quick brown fox jumps over the lazy dog";
  uint32_t base = crc32c::Value(s.data(), s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string t = s;
      t[i] = static_cast<char>(t[i] ^ (1 << b));
      EXPECT_NE(crc32c::Value(t.data(), t.size()), base) << i << ":" << b;
    }
  }
}

}  // namespace
}  // namespace strata
