// Quoting untrusted input in error messages: a bounded, printable excerpt.
//
//   return absl::InvalidArgumentError(
//       absl::StrCat("column 3 (", QuoteForMessage(field), ") is not a number"));
//   // column 3 ('12\x1b[31m') is not a number
//   // column 3 ('aaaaaaaa...aaa'... 209715200 bytes) is not a number
//
// Input from a file, a peer or an outsider may be huge or hold terminal
// escape sequences; echoing it whole turns one bad field into a 200 MB log
// line. The excerpt holds at most `max_chars` characters of `s`, with every
// byte outside printable ASCII (and the quote and backslash) written as a C
// escape, so the result is at most about 4 * max_chars + 40 bytes.
//
// Thread-safety: a pure function.
#ifndef STRATA_BASE_QUOTE_H_
#define STRATA_BASE_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace strata {

inline constexpr size_t kQuotedChars = 80;

// 'text' with escapes; longer input ends in "'... N bytes".
std::string QuoteForMessage(absl::string_view s, size_t max_chars = kQuotedChars);

}  // namespace strata

#endif  // STRATA_BASE_QUOTE_H_
