#include "base/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(QuoteForMessageTest, ShortPrintableInputIsQuotedAsIs) {
  EXPECT_EQ(QuoteForMessage("1.5e3"), "'1.5e3'");
  EXPECT_EQ(QuoteForMessage(""), "''");
}

TEST(QuoteForMessageTest, ControlCharactersAndQuotesAreEscaped) {
  EXPECT_EQ(QuoteForMessage("a\x1b[31mb\n"), "'a\\x1b[31mb\\n'");
  EXPECT_EQ(QuoteForMessage("it's"), "'it\\'s'");
  EXPECT_EQ(QuoteForMessage(std::string("\0\xff", 2)), "'\\x00\\xff'");
}

TEST(QuoteForMessageTest, LongInputIsCutAndItsSizeGiven) {
  const std::string big(200 << 20, 'x');
  const std::string q = QuoteForMessage(big);
  EXPECT_EQ(q, "'" + std::string(80, 'x') + "'... 209715200 bytes");
  EXPECT_EQ(QuoteForMessage("abcdef", 3), "'abc'... 6 bytes");
  // Escapes count after the cut: the excerpt stays bounded.
  EXPECT_LE(QuoteForMessage(std::string(1000, '\x01')).size(), 4 * kQuotedChars + 40);
}

}  // namespace
}  // namespace strata
