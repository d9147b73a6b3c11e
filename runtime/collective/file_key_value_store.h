// FileKeyValueStore: a KeyValueStore kept in a directory, for tests and
// benchmarks whose ranks are separate processes on one machine and have no
// coordination service. Each key is one file; Insert creates it with link(),
// which fails if it exists, so keys stay insert-once across processes; Get
// polls for the file.
//
//   FileKeyValueStore kv("/tmp/run42");       // the directory must exist
//   STRATA_RETURN_IF_ERROR(kv.Insert("tcp/addr/0", "127.0.0.1:40123"));
//
// Thread-safety: thread- and process-safe. Ownership: files stay after the
// store is destroyed (the caller removes the directory).
#ifndef STRATA_RUNTIME_COLLECTIVE_FILE_KEY_VALUE_STORE_H_
#define STRATA_RUNTIME_COLLECTIVE_FILE_KEY_VALUE_STORE_H_

#include <string>

#include "runtime/coordination/key_value_store.h"

namespace strata {

class FileKeyValueStore : public KeyValueStore {
 public:
  explicit FileKeyValueStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Insert(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  std::string PathOf(const std::string& key) const;
  const std::string dir_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_FILE_KEY_VALUE_STORE_H_
