#include "strategy/slurm_hostlist.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"

namespace strata {
namespace {

absl::Status Bad(absl::string_view what, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", text, "\": ", why));
}

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "01-03" or "7" -> the numeric parts of names, zero-padded to the width of
// the first bound.
absl::Status ExpandRange(absl::string_view whole, absl::string_view range,
                         std::vector<std::string>* out) {
  const size_t dash = range.find('-');
  absl::string_view lo_text = range.substr(0, dash);
  absl::string_view hi_text = dash == absl::string_view::npos ? lo_text : range.substr(dash + 1);
  int lo = 0, hi = 0;
  if (!AllDigits(lo_text) || !AllDigits(hi_text) || !absl::SimpleAtoi(lo_text, &lo) ||
      !absl::SimpleAtoi(hi_text, &hi)) {
    return Bad("hostlist", whole,
               absl::StrCat("\"", range, "\" is not a number or a range such as 1-4"));
  }
  if (hi < lo) return Bad("hostlist", whole, absl::StrCat("the range \"", range, "\" descends"));
  if (hi - lo >= kMaxHostlistEntries) {
    return Bad(
        "hostlist", whole,
        absl::StrCat("the range \"", range, "\" has more than ", kMaxHostlistEntries, " entries"));
  }
  for (int v = lo; v <= hi; ++v) {
    std::string digits = absl::StrCat(v);
    if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
    out->push_back(std::move(digits));
  }
  return absl::OkStatus();
}

// One item without a top-level comma, such as "r[1-2]n[1,3]": the product
// of its bracket groups, in order, appended to `out`.
absl::Status ExpandItem(absl::string_view whole, absl::string_view item,
                        std::vector<std::string>* out) {
  if (item.empty()) {
    return Bad("hostlist", whole, "an empty host name (two commas, or a comma at an end)");
  }
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') return Bad("hostlist", whole, "a ']' without its '['");
    if (item[i] != '[') {
      size_t next = item.find_first_of("[]", i);
      if (next == absl::string_view::npos) next = item.size();
      for (std::string& n : names) absl::StrAppend(&n, item.substr(i, next - i));
      i = next;
      continue;
    }
    const size_t close = item.find(']', i);
    if (close == absl::string_view::npos) return Bad("hostlist", whole, "a '[' without its ']'");
    absl::string_view group = item.substr(i + 1, close - i - 1);
    if (group.find('[') != absl::string_view::npos) return Bad("hostlist", whole, "nested '['");
    std::vector<std::string> parts;
    for (absl::string_view range : absl::StrSplit(group, ',')) {
      STRATA_RETURN_IF_ERROR(ExpandRange(whole, range, &parts));
    }
    if (names.size() * parts.size() + out->size() > kMaxHostlistEntries) {
      return Bad("hostlist", whole,
                 absl::StrCat("expands to more than ", kMaxHostlistEntries, " hosts"));
    }
    std::vector<std::string> product;
    product.reserve(names.size() * parts.size());
    for (const std::string& n : names) {
      for (const std::string& p : parts) product.push_back(absl::StrCat(n, p));
    }
    names = std::move(product);
    i = close + 1;
  }
  for (std::string& n : names) out->push_back(std::move(n));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist) {
  if (hostlist.empty()) return Bad("hostlist", hostlist, "empty");
  std::vector<std::string> out;
  // Split at commas outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= hostlist.size(); ++i) {
    if (i < hostlist.size()) {
      const char c = hostlist[i];
      if (c == '[') ++depth;
      if (c == ']') --depth;
      if (depth < 0) return Bad("hostlist", hostlist, "a ']' without its '['");
      if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
        return Bad("hostlist", hostlist, "a space inside the list");
      }
      if (c != ',' || depth > 0) continue;
    }
    STRATA_RETURN_IF_ERROR(ExpandItem(hostlist, hostlist.substr(start, i - start), &out));
    start = i + 1;
  }
  return out;
}

absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view tasks_per_node) {
  if (tasks_per_node.empty()) return Bad("tasks per node", tasks_per_node, "empty");
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(tasks_per_node, ',')) {
    absl::string_view count_text = item;
    int repeat = 1;
    const size_t paren = item.find('(');
    if (paren != absl::string_view::npos) {
      count_text = item.substr(0, paren);
      absl::string_view rest = item.substr(paren);
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')' ||
          !AllDigits(rest.substr(2, rest.size() - 3)) ||
          !absl::SimpleAtoi(rest.substr(2, rest.size() - 3), &repeat) || repeat < 1) {
        return Bad("tasks per node", tasks_per_node,
                   absl::StrCat("\"", item, "\" is not N or N(xR) with R >= 1"));
      }
    }
    int count = 0;
    if (!AllDigits(count_text) || !absl::SimpleAtoi(count_text, &count) || count < 1) {
      return Bad("tasks per node", tasks_per_node,
                 absl::StrCat("\"", item, "\" does not start with a task count >= 1"));
    }
    if (out.size() + static_cast<size_t>(repeat) > kMaxHostlistEntries) {
      return Bad("tasks per node", tasks_per_node,
                 absl::StrCat("lists more than ", kMaxHostlistEntries, " nodes"));
    }
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

}  // namespace strata
