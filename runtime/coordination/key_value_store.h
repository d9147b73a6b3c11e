// KeyValueStore: the small shared dictionary the tasks of a cluster use to
// exchange set-up values (transport addresses, shared-memory segment names,
// NCCL unique ids) without talking to each other directly. Keys are
// insert-once: the first Insert of a key wins and later ones fail, so a value
// that every task reads is the same for all of them. Get blocks until the key
// exists or the timeout passes.
//
//   KeyValueStore& kv = ...;                 // the coordination client, or
//   InMemoryKeyValueStore kv;                // for tasks that are threads
//   STRATA_RETURN_IF_ERROR(kv.Insert("tcp/addr/1", "127.0.0.1:40123"));
//   absl::StatusOr<std::string> a = kv.Get("tcp/addr/0", absl::Seconds(30));
//
// Implementations: InMemoryKeyValueStore (below: every user in one process)
// and the coordination service's client (coordination_client.h), whose store
// lives on the chief.
//
// Thread-safety: every method may be called concurrently.
#ifndef STRATA_RUNTIME_COORDINATION_KEY_VALUE_STORE_H_
#define STRATA_RUNTIME_COORDINATION_KEY_VALUE_STORE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace strata {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // AlreadyExists naming the key if it was inserted before (even with the
  // same value).
  virtual absl::Status Insert(const std::string& key, const std::string& value) = 0;
  // The key's value once it exists; DeadlineExceeded naming the key after
  // `timeout`; other errors if the store itself failed (the coordination
  // service is gone, the cluster reported an error).
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

class InMemoryKeyValueStore : public KeyValueStore {
 public:
  absl::Status Insert(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COORDINATION_KEY_VALUE_STORE_H_
