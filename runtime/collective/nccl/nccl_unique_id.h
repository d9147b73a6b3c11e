// The NCCL unique-id exchange of a multi-process clique, through the
// cluster's KeyValueStore: rank 0 makes the id (ncclGetUniqueId, 128 opaque
// bytes) and publishes it under a key; every other rank blocks on Get until it
// appears. This part needs neither CUDA nor NCCL, so it is built and tested in
// every configuration; NcclClique::CreateRanks (nccl_communicator.h) passes
// ncclGetUniqueId as `make_id`.
//
//   // rank 0 and rank 1 of a 2-rank clique, each in its own process:
//   absl::StatusOr<std::string> id = ExchangeNcclUniqueId(
//       &coordination_client, "nccl/group/1/0", rank, /*nranks=*/2, absl::Seconds(60),
//       [] { return MakeIdWithNccl(); });
//
// Values in the store are lowercase hex (the coordination service's values
// travel as proto strings, which must be UTF-8), prefixed with "nccl-id:".
// A value that does not decode to exactly kNcclUniqueIdBytes bytes is
// InvalidArgument naming the key, never a crash.
//
// Thread-safety: pure functions of their arguments (the store is called
// concurrently-safe per its own contract). Ownership: `store` is borrowed for
// the call.
#ifndef STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_UNIQUE_ID_H_
#define STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_UNIQUE_ID_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {

// NCCL_UNIQUE_ID_BYTES; nccl_communicator.cc static_asserts that they agree.
inline constexpr size_t kNcclUniqueIdBytes = 128;

// "nccl-id:" + hex of `id`; `id` must be kNcclUniqueIdBytes long.
std::string EncodeNcclUniqueId(absl::string_view id);
// The raw bytes; InvalidArgument naming `key` (where the value came from)
// if the prefix, the hex or the length is wrong.
absl::StatusOr<std::string> DecodeNcclUniqueId(absl::string_view value, absl::string_view key);

// Rank 0 calls `make_id` (which must return kNcclUniqueIdBytes bytes) and
// inserts it under `key`; ranks 1..nranks-1 wait up to `timeout` for it.
// Returns the raw id on every rank. Errors:
//   InvalidArgument: bad rank/nranks/key, a null store, a malformed value;
//   DeadlineExceeded: rank 0 never published (naming the key and rank 0);
//   AlreadyExists: the key was used before (keys are insert-once: a new
//     clique needs a new key);
//   whatever `make_id` or the store returns, with context.
absl::StatusOr<std::string> ExchangeNcclUniqueId(
    KeyValueStore* store, const std::string& key, int rank, int nranks, absl::Duration timeout,
    const std::function<absl::StatusOr<std::string>()>& make_id);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_UNIQUE_ID_H_
