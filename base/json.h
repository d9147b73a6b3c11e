// A small strict JSON (RFC 8259) parser for configuration strings such as
// TF_CONFIG and --cluster_spec. It builds a tree of JsonValue; object members
// keep their order. Errors say where the text went wrong.
//
//   absl::StatusOr<JsonValue> v = ParseJson(R"({"task": {"index": 1}})");
//   const JsonValue* task = v->Find("task");        // nullptr if absent
//   task->Find("index")->number();                  // 1.0
//   ParseJson("{bad").status();
//     // InvalidArgument: "JSON: expected '\"' starting an object key at
//     //                   line 1 column 2 (offset 1)"
//
// Strictness: no comments, no trailing commas, no NaN/Infinity, no duplicate
// keys in one object (Python's json keeps the last one; for a configuration a
// duplicated key is a mistake), nothing but whitespace after the value.
// Nesting deeper than 100 levels is rejected rather than recursing further.
//
// Value type; no shared state; safe to use from any thread.
#ifndef STRATA_BASE_JSON_H_
#define STRATA_BASE_JSON_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue Bool(bool b);
  static JsonValue Number(double d, bool is_integer);
  static JsonValue String(std::string s);
  static JsonValue Array(std::vector<JsonValue> items);
  static JsonValue Object(std::vector<std::pair<std::string, JsonValue>> members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  // A number written without fraction or exponent ("3", "-1", not "3.0").
  bool is_integer() const { return kind_ == Kind::kNumber && is_integer_; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors are valid only for the matching kind (empty/zero otherwise).
  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

  // The member named `key` of an object, or nullptr (also for non-objects).
  const JsonValue* Find(absl::string_view key) const;

  // "null", "boolean", "number", "string", "array" or "object".
  static const char* KindName(Kind kind);

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses one JSON document. InvalidArgument naming the line, column and byte
// offset of the first error.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace strata

#endif  // STRATA_BASE_JSON_H_
