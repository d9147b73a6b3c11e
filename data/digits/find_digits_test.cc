#include "data/digits/find_digits.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(FindDigitsTest, FindsTheDigitsInTheRunfiles) {
  auto found = FindDigitsCsv("", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(absl::EndsWith(*found, "data/digits/digits.csv.gz")) << *found;
  EXPECT_EQ(FindDigitsCsv("/no/such/digits.csv.gz", "").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata
