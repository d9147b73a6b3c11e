#include "runtime/coordination/key_value_store.h"

#include "absl/strings/str_cat.h"

namespace strata {

absl::Status InMemoryKeyValueStore::Insert(const std::string& key, const std::string& value) {
  MutexLock l(&mu_);
  if (!values_.emplace(key, value).second) {
    return absl::AlreadyExistsError(absl::StrCat("key-value store: key '", key, "' already exists"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key,
                                                       absl::Duration timeout) {
  MutexLock l(&mu_);
  const bool found =
      mu_.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return values_.count(key) > 0; },
                           timeout);
  if (!found) {
    return absl::DeadlineExceededError(absl::StrCat("key-value store: key '", key,
                                                    "' not inserted within ",
                                                    absl::FormatDuration(timeout)));
  }
  return values_.at(key);
}

}  // namespace strata
