#include "runtime/collective/file_key_value_store.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace strata {

std::string FileKeyValueStore::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/", absl::StrReplaceAll(key, {{"%", "%25"}, {"/", "%2F"}}));
}

absl::Status FileKeyValueStore::Insert(const std::string& key, const std::string& value) {
  static std::atomic<int> counter{0};
  const std::string tmp = absl::StrCat(dir_, "/.tmp.", getpid(), ".", counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    f << value;
    if (!f) return absl::InternalError(absl::StrCat("key-value store: cannot write ", tmp));
  }
  // link() publishes the complete file atomically and fails if the key exists.
  const int rc = link(tmp.c_str(), PathOf(key).c_str());
  const int err = errno;
  unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("key-value store: key '", key, "' already exists"));
    }
    return absl::InternalError(absl::StrCat("key-value store: cannot insert '", key, "': ",
                                            std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileKeyValueStore::Get(const std::string& key, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string path = PathOf(key);
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("key-value store: key '", key,
                                                      "' not inserted within ",
                                                      absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace strata
