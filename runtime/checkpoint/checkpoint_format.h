// The on-disk format of a Strata checkpoint. A checkpoint is named by a
// prefix ("/ckpt/run1/ckpt-300") and made of two files in its directory:
//
//   <prefix>.data-<id>   the tensors' raw bytes (little-endian, row-major),
//                        each starting at a multiple of kDataAlignment; the
//                        gaps are zero padding that nothing reads.
//   <prefix>.index       the commit point: a CheckpointIndex proto
//                        (proto/checkpoint.proto) framed as
//                          "STRCKIDX" | payload length (u64 LE) | payload |
//                          CRC32C of everything before it (u32 LE)
//                        naming the data file by its <id>, recording its
//                        size and whole-file CRC32C, and giving per tensor
//                        its dtype, shape, byte range and CRC32C.
//
// Every byte of the index is covered by its CRC and every tensor byte by the
// tensor's CRC, so reading a tensor detects any flipped byte it uses
// (padding is never read); a full verification (the whole-file CRC) detects
// a flipped byte anywhere. The <id> is fresh per save, so
// overwriting a prefix never touches the data file the old index names: a
// crash leaves either the old checkpoint or the new one (see
// checkpoint_writer.h).
//
// A sharded checkpoint (version 2, written by several processes, each
// holding part of some tensors) adds shards: each is a version-1 checkpoint
// of its own, "<prefix>.shard-<name>", written by one process, holding
// 1-D pieces of the sliced tensors under their names. The index lists the
// shards with the CRC32C their index files end with, and each sliced
// tensor's slices (shard, element offset, element count), which cover its
// elements once, in order. The index is still the one commit point: the
// shards are written first, under fresh names, and an index whose shard is
// missing, or was replaced by another save's, is DataLoss naming the shard.
//
// Thread-safety: pure functions.
#ifndef STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_FORMAT_H_
#define STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"

namespace strata {
namespace checkpoint_format {

inline constexpr char kIndexMagic[8] = {'S', 'T', 'R', 'C', 'K', 'I', 'D', 'X'};
inline constexpr char kIndexSuffix[] = ".index";
inline constexpr char kDataInfix[] = ".data-";
inline constexpr char kShardInfix[] = ".shard-";
// A shard's metadata key (followed by a tensor's name) for the element
// offset of its piece of that tensor, in decimal.
inline constexpr char kPieceOffsetKey[] = "element_offset:";
inline constexpr uint32_t kVersion = 1;         // one data file
inline constexpr uint32_t kShardedVersion = 2;  // a data file and shards
inline constexpr uint64_t kDataAlignment = 64;

inline std::string IndexPath(absl::string_view prefix) {
  return std::string(prefix) + kIndexSuffix;
}

// The framed bytes of an index file.
std::string EncodeIndex(const ::strata::proto::CheckpointIndex& index);

// Parses and validates the bytes of `path`, the index of the checkpoint whose
// prefix has base name `prefix_base`: magic, length, CRC, proto, version, the
// data file's name, and per tensor a unique non-empty name (sorted), a
// dtype a Tensor can hold, a valid shape, size == elements * dtype size and a
// byte range inside data_size; for version 2 also the shards' names (under
// "<prefix_base>.shard-") and each sliced tensor's slices. DataLoss naming
// `path` (and the tensor) for anything else.
absl::StatusOr<::strata::proto::CheckpointIndex> DecodeIndex(absl::string_view bytes,
                                                             absl::string_view path,
                                                             absl::string_view prefix_base);

// The CRC32C an index file ends with (`bytes` passed DecodeIndex).
uint32_t StoredIndexCrc(absl::string_view bytes);

}  // namespace checkpoint_format
}  // namespace strata

#endif  // STRATA_RUNTIME_CHECKPOINT_CHECKPOINT_FORMAT_H_
