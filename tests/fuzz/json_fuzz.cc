// base/json.h's parser on arbitrary text: an error or a tree, never a
// crash, and never a tree deeper than the parser's nesting limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/json.h"

namespace {

// Walks the tree (bounded depth: the parser refuses deeper nesting).
size_t Walk(const strata::JsonValue& v, int depth) {
  if (depth > 200) __builtin_trap();
  size_t n = 1;
  if (v.is_array()) {
    for (const strata::JsonValue& e : v.items()) n += Walk(e, depth + 1);
  } else if (v.is_object()) {
    for (const auto& [key, e] : v.members()) n += key.size() + Walk(e, depth + 1);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto v = strata::ParseJson(text);
  if (v.ok()) Walk(*v, 0);
  return 0;
}
