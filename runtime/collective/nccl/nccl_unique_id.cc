#include "runtime/collective/nccl/nccl_unique_id.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {
namespace {

constexpr absl::string_view kPrefix = "nccl-id:";
constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string EncodeNcclUniqueId(absl::string_view id) {
  std::string out(kPrefix);
  out.reserve(kPrefix.size() + 2 * id.size());
  for (unsigned char c : id) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

absl::StatusOr<std::string> DecodeNcclUniqueId(absl::string_view value, absl::string_view key) {
  // Shows what was found without dumping a long or binary value into the
  // error.
  auto found = [&] {
    std::string shown;
    for (char c : value.substr(0, 24)) shown.push_back(c >= 32 && c < 127 ? c : '?');
    return absl::StrCat("'", shown, value.size() > 24 ? "...'" : "'", " (", value.size(),
                        " characters)");
  };
  if (!absl::StartsWith(value, kPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the NCCL unique id under key '", key, "' is malformed: expected '", kPrefix,
        "' followed by ", 2 * kNcclUniqueIdBytes, " hex digits, found ", found()));
  }
  absl::string_view hex = value.substr(kPrefix.size());
  if (hex.size() != 2 * kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the NCCL unique id under key '", key, "' has ", hex.size() / 2.0, " bytes, expected ",
        kNcclUniqueIdBytes, " (was it written by another NCCL version or another program?): ",
        found()));
  }
  std::string id(kNcclUniqueIdBytes, '\0');
  for (size_t i = 0; i < kNcclUniqueIdBytes; ++i) {
    const int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(absl::StrCat("the NCCL unique id under key '", key,
                                                     "' is malformed: a non-hex character at offset ",
                                                     kPrefix.size() + 2 * i, ": ", found()));
    }
    id[i] = static_cast<char>(hi << 4 | lo);
  }
  return id;
}

absl::StatusOr<std::string> ExchangeNcclUniqueId(
    KeyValueStore* store, const std::string& key, int rank, int nranks, absl::Duration timeout,
    const std::function<absl::StatusOr<std::string>()>& make_id) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("NCCL unique-id exchange: no key-value store");
  }
  if (key.empty()) return absl::InvalidArgumentError("NCCL unique-id exchange: the key is empty");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique-id exchange under key '", key,
                                                   "': rank ", rank, " of ", nranks,
                                                   " ranks is out of range"));
  }
  if (rank == 0) {
    if (!make_id) return absl::InvalidArgumentError("NCCL unique-id exchange: no id maker");
    absl::StatusOr<std::string> id = make_id();
    if (!id.ok()) {
      return AnnotateStatus(id.status(), absl::StrCat("rank 0 making the NCCL unique id for key '",
                                                      key, "': "));
    }
    if (id->size() != kNcclUniqueIdBytes) {
      return absl::InternalError(absl::StrCat("the NCCL unique id made for key '", key, "' has ",
                                              id->size(), " bytes, expected ", kNcclUniqueIdBytes));
    }
    // Single-rank cliques need no exchange, but publishing keeps the key
    // insert-once semantics identical for every clique size.
    absl::Status s = store->Insert(key, EncodeNcclUniqueId(*id));
    if (!s.ok()) {
      return AnnotateStatus(s, absl::StrCat("rank 0 publishing the NCCL unique id under key '", key,
                                            "' (a key names one clique; a new clique needs a new key): "));
    }
    return id;
  }
  absl::StatusOr<std::string> value = store->Get(key, timeout);
  if (absl::IsDeadlineExceeded(value.status())) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", rank, " of ", nranks, " waited ", absl::FormatDuration(timeout),
        " for the NCCL unique id under key '", key,
        "', which rank 0 never published (is rank 0 running and creating the same clique?): ",
        value.status().message()));
  }
  if (!value.ok()) {
    return AnnotateStatus(value.status(), absl::StrCat("rank ", rank, " of ", nranks,
                                                       " reading the NCCL unique id under key '",
                                                       key, "': "));
  }
  return DecodeNcclUniqueId(*value, key);
}

}  // namespace strata
