#include "runtime/device_name.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata {

namespace {

bool IsJobName(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool IsTypeName(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

// A non-negative int, or "*" (has = false).
bool ParseIndex(absl::string_view s, bool* has, int* v) {
  if (s == "*") {
    *has = false;
    *v = 0;
    return true;
  }
  if (s.empty() || !absl::ascii_isdigit(s[0])) return false;
  if (!absl::SimpleAtoi(s, v) || *v < 0) return false;
  *has = true;
  return true;
}

}  // namespace

absl::StatusOr<DeviceName> DeviceName::Parse(absl::string_view s) {
  DeviceName n;
  if (s.empty()) return n;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad device name '", s, "': ", why,
        " (expected e.g. '/job:worker/replica:0/task:1/device:CPU:0', '/device:GPU:1' or '/cpu:0')"));
  };
  if (s[0] != '/') return bad("it must start with '/'");
  std::vector<absl::string_view> parts = absl::StrSplit(s.substr(1), '/');
  bool seen_job = false, seen_replica = false, seen_task = false, seen_device = false;
  for (absl::string_view part : parts) {
    if (part.empty()) return bad("empty component");
    const size_t colon = part.find(':');
    if (colon == absl::string_view::npos) {
      return bad(absl::StrCat("component '", part, "' has no ':'"));
    }
    const absl::string_view key = part.substr(0, colon);
    const absl::string_view value = part.substr(colon + 1);
    if (key == "job") {
      if (seen_job) return bad("job given twice");
      seen_job = true;
      if (!IsJobName(value)) return bad(absl::StrCat("bad job name '", value, "'"));
      n.has_job = true;
      n.job = std::string(value);
    } else if (key == "replica" || key == "task") {
      bool& seen = key == "replica" ? seen_replica : seen_task;
      if (seen) return bad(absl::StrCat(key, " given twice"));
      seen = true;
      bool* has = key == "replica" ? &n.has_replica : &n.has_task;
      int* v = key == "replica" ? &n.replica : &n.task;
      if (!ParseIndex(value, has, v)) {
        return bad(absl::StrCat(key, " '", value, "' is not a non-negative integer or '*'"));
      }
    } else if (key == "device" || absl::EqualsIgnoreCase(key, "cpu") ||
               absl::EqualsIgnoreCase(key, "gpu")) {
      if (seen_device) return bad("device given twice");
      seen_device = true;
      absl::string_view type, id;
      if (key == "device") {
        // "device:TYPE", "device:TYPE:ID" or "device:TYPE:*".
        const size_t c2 = value.find(':');
        type = value.substr(0, c2);
        if (c2 != absl::string_view::npos) {
          id = value.substr(c2 + 1);
          if (id.empty()) return bad("empty device id");
        }
      } else {
        type = key;  // legacy "/cpu:0", "/gpu:1"
        id = value;
        if (id.empty()) return bad("empty device id");
      }
      if (!IsTypeName(type)) return bad(absl::StrCat("bad device type '", type, "'"));
      n.has_type = true;
      n.type = absl::AsciiStrToUpper(type);
      if (!id.empty() && !ParseIndex(id, &n.has_id, &n.id)) {
        return bad(absl::StrCat("device id '", id, "' is not a non-negative integer or '*'"));
      }
    } else {
      return bad(absl::StrCat("unknown component '", key, "'"));
    }
  }
  return n;
}

DeviceName DeviceName::Full(std::string job, int replica, int task, std::string type, int id) {
  DeviceName n;
  n.has_job = n.has_replica = n.has_task = n.has_type = n.has_id = true;
  n.job = std::move(job);
  n.replica = replica;
  n.task = task;
  n.type = std::move(type);
  n.id = id;
  return n;
}

bool DeviceName::Matches(const DeviceName& o) const {
  if (has_job && (!o.has_job || job != o.job)) return false;
  if (has_replica && (!o.has_replica || replica != o.replica)) return false;
  if (has_task && (!o.has_task || task != o.task)) return false;
  if (has_type && (!o.has_type || type != o.type)) return false;
  if (has_id && (!o.has_id || id != o.id)) return false;
  return true;
}

void DeviceName::MergeFrom(const DeviceName& d) {
  if (!has_job && d.has_job) {
    has_job = true;
    job = d.job;
  }
  if (!has_replica && d.has_replica) {
    has_replica = true;
    replica = d.replica;
  }
  if (!has_task && d.has_task) {
    has_task = true;
    task = d.task;
  }
  if (!has_type && d.has_type) {
    has_type = true;
    type = d.type;
  }
  // An id only makes sense with the type it came with.
  if (!has_id && d.has_id && type == d.type) {
    has_id = true;
    id = d.id;
  }
}

std::string DeviceName::ToString() const {
  std::string s;
  if (has_job) absl::StrAppend(&s, "/job:", job);
  if (has_replica) absl::StrAppend(&s, "/replica:", replica);
  if (has_task) absl::StrAppend(&s, "/task:", task);
  if (has_type) {
    absl::StrAppend(&s, "/device:", type, ":");
    if (has_id) {
      absl::StrAppend(&s, id);
    } else {
      s += "*";
    }
  }
  return s;
}

bool DeviceName::operator==(const DeviceName& o) const {
  return has_job == o.has_job && job == o.job && has_replica == o.has_replica &&
         replica == o.replica && has_task == o.has_task && task == o.task &&
         has_type == o.has_type && type == o.type && has_id == o.has_id && id == o.id;
}

}  // namespace strata
