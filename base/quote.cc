#include "base/quote.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace strata {

std::string QuoteForMessage(absl::string_view s, size_t max_chars) {
  const bool cut = s.size() > max_chars;
  std::string out = absl::StrCat("'", absl::CHexEscape(s.substr(0, max_chars)), "'");
  if (cut) absl::StrAppend(&out, "... ", s.size(), " bytes");
  return out;
}

}  // namespace strata
