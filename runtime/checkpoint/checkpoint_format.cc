#include "runtime/checkpoint/checkpoint_format.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace checkpoint_format {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format stores host bytes and assumes a little-endian host");

constexpr size_t kHeaderSize = sizeof(kIndexMagic) + 8;  // magic + payload length
constexpr size_t kTrailerSize = 4;                      // CRC32C

void PutFixed(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t GetFixed(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace

std::string EncodeIndex(const ::strata::proto::CheckpointIndex& index) {
  std::string payload;
  index.SerializeToString(&payload);
  std::string out(kIndexMagic, sizeof(kIndexMagic));
  PutFixed(&out, payload.size(), 8);
  out += payload;
  PutFixed(&out, crc32c::Value(out.data(), out.size()), 4);
  return out;
}

absl::StatusOr<::strata::proto::CheckpointIndex> DecodeIndex(absl::string_view bytes,
                                                             absl::string_view path,
                                                             absl::string_view prefix_base) {
  auto loss = [&](auto&&... parts) {
    return absl::DataLossError(absl::StrCat("checkpoint index '", path, "': ", parts...));
  };
  // 1. Frame: magic, then a length that accounts for the whole file exactly.
  if (bytes.size() < kHeaderSize + kTrailerSize) {
    return loss("truncated (", bytes.size(), " bytes)");
  }
  if (std::memcmp(bytes.data(), kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return loss("bad magic (not a Strata checkpoint index)");
  }
  const uint64_t len = GetFixed(bytes.data() + sizeof(kIndexMagic), 8);
  if (len != bytes.size() - kHeaderSize - kTrailerSize) {
    return loss("payload length ", len, " does not match the file size ", bytes.size());
  }
  // 2. CRC over header and payload.
  const size_t body = kHeaderSize + len;
  const uint32_t stored = static_cast<uint32_t>(GetFixed(bytes.data() + body, 4));
  const uint32_t actual = crc32c::Value(bytes.data(), body);
  if (stored != actual) {
    return loss(absl::StrFormat("CRC32C mismatch (stored 0x%08x, computed 0x%08x)", stored, actual));
  }
  ::strata::proto::CheckpointIndex index;
  if (!index.ParseFromArray(bytes.data() + kHeaderSize, static_cast<int>(len))) {
    return loss("payload is not a CheckpointIndex proto");
  }
  // 3. Contents. The CRC matched, so anything wrong here was written wrong
  // (or crafted); it is still corrupt input, never a crash.
  if (index.version() != kVersion && index.version() != kShardedVersion) {
    return loss("unsupported format version ", index.version(), " (this reader knows ", kVersion,
                " and ", kShardedVersion, ")");
  }
  if (index.version() == kVersion && index.shards_size() > 0) {
    return loss("a version ", kVersion, " index names shards");
  }
  const std::string shard_prefix = absl::StrCat(prefix_base, kShardInfix);
  for (const auto& shard : index.shards()) {
    if (!absl::StartsWith(shard.prefix(), shard_prefix) ||
        shard.prefix().size() == shard_prefix.size() ||
        shard.prefix().find('/') != std::string::npos) {
      return loss("shard '", shard.prefix(), "' does not start with '", shard_prefix, "'");
    }
  }
  const std::string data_prefix = absl::StrCat(prefix_base, kDataInfix);
  if (!absl::StartsWith(index.data_file(), data_prefix) ||
      index.data_file().size() == data_prefix.size() ||
      index.data_file().find('/') != std::string::npos) {
    return loss("data file name '", index.data_file(), "' does not start with '", data_prefix, "'");
  }
  const std::string* prev = nullptr;
  for (const auto& e : index.tensors()) {
    if (e.name().empty()) return loss("a tensor has an empty name");
    if (prev != nullptr && !(*prev < e.name())) {
      return loss("tensor '", e.name(), "' is out of order or duplicated");
    }
    prev = &e.name();
    if (!DataTypeCanUseMemcpy(e.dtype())) {
      return loss("tensor '", e.name(), "' has dtype ", DataTypeString(e.dtype()),
                  " which a checkpoint cannot hold");
    }
    auto shape = TensorShape::FromProto(e.shape());
    if (!shape.ok()) return loss("tensor '", e.name(), "' has a bad shape: ", shape.status().message());
    const uint64_t want = static_cast<uint64_t>(shape->num_elements()) * DataTypeSize(e.dtype());
    if (shape->num_elements() > 0 &&
        want / static_cast<uint64_t>(shape->num_elements()) != DataTypeSize(e.dtype())) {
      return loss("tensor '", e.name(), "' is too large");
    }
    if (e.slices_size() > 0) {
      if (index.version() != kShardedVersion) {
        return loss("tensor '", e.name(), "' is sliced in a version ", index.version(), " index");
      }
      if (e.offset() != 0 || e.size() != 0 || e.crc32c() != 0) {
        return loss("sliced tensor '", e.name(), "' also has bytes in the data file");
      }
      uint64_t next = 0;
      for (const auto& slice : e.slices()) {
        if (slice.shard() >= static_cast<uint32_t>(index.shards_size())) {
          return loss("tensor '", e.name(), "' has a slice in shard ", slice.shard(), " of ",
                      index.shards_size());
        }
        if (slice.element_offset() != next || slice.num_elements() == 0 ||
            slice.num_elements() > static_cast<uint64_t>(shape->num_elements()) - next) {
          return loss("tensor '", e.name(), "' has slices that do not cover its ",
                      shape->num_elements(), " elements once, in order (slice at ",
                      slice.element_offset(), " of ", slice.num_elements(), ")");
        }
        next += slice.num_elements();
      }
      if (next != static_cast<uint64_t>(shape->num_elements())) {
        return loss("tensor '", e.name(), "' has slices covering ", next, " of its ",
                    shape->num_elements(), " elements");
      }
      continue;
    }
    if (e.size() != want) {
      return loss("tensor '", e.name(), "' has ", e.size(), " bytes but ", DataTypeString(e.dtype()),
                  " ", shape->DebugString(), " needs ", want);
    }
    if (e.offset() > index.data_size() || e.size() > index.data_size() - e.offset()) {
      return loss("tensor '", e.name(), "' byte range [", e.offset(), ", +", e.size(),
                  ") lies outside the data file's ", index.data_size(), " bytes");
    }
  }
  return index;
}

uint32_t StoredIndexCrc(absl::string_view bytes) {
  return bytes.size() < kTrailerSize
             ? 0
             : static_cast<uint32_t>(GetFixed(bytes.data() + bytes.size() - kTrailerSize, 4));
}

}  // namespace checkpoint_format
}  // namespace strata
