#include "base/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, ParsesNestedDocument) {
  absl::StatusOr<JsonValue> v = ParseJson(
      R"( {"a": [1, -2.5e1, true, false, null], "b": {"c": "x\"\\\/\n\u00e9\ud83d\ude00"}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_object());
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 5u);
  EXPECT_TRUE(a->items()[0].is_integer());
  EXPECT_EQ(a->items()[0].number(), 1);
  EXPECT_FALSE(a->items()[1].is_integer());
  EXPECT_EQ(a->items()[1].number(), -25);
  EXPECT_TRUE(a->items()[2].boolean());
  EXPECT_TRUE(a->items()[3].is_bool());
  EXPECT_FALSE(a->items()[3].boolean());
  EXPECT_TRUE(a->items()[4].is_null());
  EXPECT_EQ(v->Find("b")->Find("c")->string(), "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v->Find("missing"), nullptr);
  EXPECT_EQ(v->members()[0].first, "a");  // order kept
}

TEST(JsonTest, EmptyContainers) {
  absl::StatusOr<JsonValue> v = ParseJson(R"({"a": [], "b": {}})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->Find("a")->items().empty());
  EXPECT_TRUE(v->Find("b")->members().empty());
}

void ExpectError(const std::string& text, const std::string& what, const std::string& where) {
  absl::StatusOr<JsonValue> v = ParseJson(text);
  ASSERT_FALSE(v.ok()) << text;
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr(what)) << text;
  EXPECT_THAT(std::string(v.status().message()), HasSubstr(where)) << text;
}

TEST(JsonTest, ErrorsNameThePosition) {
  // Python's json says "line 1 column 2 (char 1)" for this one.
  ExpectError("{bad json", "expected '\"' starting an object key", "line 1 column 2 (offset 1)");
  ExpectError("{\"a\": 1,\n \"b\" 2}", "expected ':'", "line 2 column 6 (offset 14)");
  ExpectError("[1, 2,]", "unexpected character ']'", "offset 6");
  ExpectError("{\"a\": 1,}", "expected '\"' starting an object key", "offset 8");
  ExpectError("", "text ended", "offset 0");
  ExpectError("[1] x", "unexpected text after", "offset 4");
  ExpectError("\"abc", "unterminated string", "offset 4");
  ExpectError("\"a\tb\"", "control character", "offset 2");
  ExpectError("\"\\x\"", "bad escape", "offset 2");
  ExpectError("\"\\ud83d\"", "lone high surrogate", "");
  ExpectError("01", "leading zero", "offset 1");
  ExpectError("1.", "after '.'", "offset 2");
  ExpectError("1e", "exponent", "offset 2");
  ExpectError("-", "expected a digit", "offset 1");
  ExpectError("NaN", "unexpected character 'N'", "offset 0");
  ExpectError("tru", "unexpected character 't'", "offset 0");
  ExpectError("{\"a\": 1, \"a\": 2}", "duplicate key \"a\"", "offset 9");
  ExpectError("// c\n{}", "unexpected character '/'", "offset 0");
}

TEST(JsonTest, RejectsDeepNesting) {
  ExpectError(std::string(200, '['), "nesting deeper than 100", "");
  EXPECT_TRUE(ParseJson(std::string(50, '[') + std::string(50, ']')).ok());
}

}  // namespace
}  // namespace strata
