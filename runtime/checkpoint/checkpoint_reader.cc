#include "runtime/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/file_io.h"
#include "base/status.h"
#include "proto/checkpoint.pb.h"
#include "runtime/checkpoint/checkpoint_format.h"

namespace strata {
namespace {

namespace fmt = checkpoint_format;

std::string Describe(const CheckpointReader::TensorInfo& info) {
  return absl::StrCat(DataTypeString(info.dtype), " ", info.shape.DebugString());
}

}  // namespace

CheckpointReader::~CheckpointReader() = default;

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& prefix) {
  const std::string index_path = fmt::IndexPath(prefix);
  auto bytes = io::ReadFileToString(index_path);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) {
      return absl::NotFoundError(
          absl::StrCat("no checkpoint at '", prefix, "' (", index_path, " does not exist)"));
    }
    return bytes.status();
  }
  STRATA_ASSIGN_OR_RETURN(proto::CheckpointIndex index,
                          fmt::DecodeIndex(*bytes, index_path, io::BaseName(prefix)));

  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  r->prefix_ = prefix;
  r->data_path_ = io::JoinPath(io::DirName(prefix), index.data_file());
  r->data_size_ = index.data_size();
  r->data_crc_ = index.data_crc32c();
  auto data = io::RandomAccessFile::Open(r->data_path_);
  if (!data.ok()) {
    // A committed index whose data file is gone is a damaged checkpoint.
    if (absl::IsNotFound(data.status())) {
      return absl::DataLossError(absl::StrCat("checkpoint '", prefix, "': data file '",
                                              r->data_path_, "' named by its index is missing"));
    }
    return data.status();
  }
  r->data_ = std::move(*data);
  r->index_crc_ = fmt::StoredIndexCrc(*bytes);
  for (const auto& e : index.tensors()) {
    Entry entry;
    // DecodeIndex validated the shape and the slices.
    entry.info.dtype = e.dtype();
    entry.info.shape = *TensorShape::FromProto(e.shape());
    entry.offset = e.offset();
    entry.size = e.size();
    entry.crc = e.crc32c();
    for (const auto& s : e.slices()) {
      entry.slices.push_back({static_cast<int>(s.shard()), s.element_offset(), s.num_elements()});
    }
    r->infos_[e.name()] = entry.info;
    r->entries_.emplace(e.name(), std::move(entry));
  }
  for (const auto& [k, v] : index.metadata()) r->metadata_[k] = v;
  STRATA_RETURN_IF_ERROR(r->OpenShards(index));
  return r;
}

absl::Status CheckpointReader::OpenShards(const proto::CheckpointIndex& index) {
  const std::string dir = io::DirName(prefix_);
  for (const auto& shard : index.shards()) {
    const std::string path = io::JoinPath(dir, shard.prefix());
    auto lost = [&](auto&&... parts) {
      return absl::DataLossError(absl::StrCat("checkpoint '", prefix_, "': shard '", path, "' ", parts...));
    };
    absl::StatusOr<std::unique_ptr<CheckpointReader>> r = Open(path);
    if (!r.ok()) {
      if (absl::IsNotFound(r.status())) return lost("is missing");
      return lost("cannot be opened: ", r.status().message());
    }
    if (!(*r)->shards_.empty()) return lost("has shards of its own");
    if ((*r)->index_crc() != shard.index_crc32c()) {
      return lost(absl::StrFormat(
          "is not the one this checkpoint was saved with (its index's CRC32C is 0x%08x, "
          "the checkpoint's index records 0x%08x): a shard of another save or run",
          (*r)->index_crc(), shard.index_crc32c()));
    }
    shards_.push_back(*std::move(r));
  }
  for (const auto& [name, e] : entries_) {
    for (const Slice& s : e.slices) {
      const CheckpointReader& shard = *shards_[s.shard];
      auto it = shard.entries_.find(name);
      const TensorInfo want{e.info.dtype, TensorShape{static_cast<int64_t>(s.num_elements)}};
      if (it == shard.entries_.end() || it->second.info.dtype != want.dtype ||
          it->second.info.shape != want.shape) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint '", prefix_, "': shard '", shard.prefix(), "' ",
            it == shard.entries_.end() ? "lacks" : absl::StrCat("holds ", Describe(it->second.info), " as"),
            " the slice of tensor '", name, "' its index names (", Describe(want), " at element ",
            s.element_offset, ")"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> CheckpointReader::shard_prefixes() const {
  std::vector<std::string> out;
  for (const auto& shard : shards_) out.push_back(shard->prefix());
  return out;
}

absl::StatusOr<std::string> CheckpointReader::GetMetadata(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint '", prefix_, "' has no metadata key '", key, "'"));
  }
  return it->second;
}

absl::Status CheckpointReader::CheckExtent(const std::string& name, const Entry& e) const {
  // Against the real file, so that a truncated file is reported (and never
  // makes us allocate for bytes that are not there).
  if (e.slices.empty() && (e.offset > data_->size() || e.size > data_->size() - e.offset)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint data file '", data_path_, "' is truncated: tensor '", name, "' needs bytes [",
        e.offset, ", ", e.offset + e.size, ") but the file has ", data_->size()));
  }
  for (const Slice& s : e.slices) {
    const Entry& piece = shards_[s.shard]->entries_.at(name);
    const uint64_t have = shards_[s.shard]->data_->size();
    if (piece.offset > have || piece.size > have - piece.offset) {
      return absl::DataLossError(absl::StrCat("checkpoint data file '", shards_[s.shard]->data_path_,
                                              "' is truncated: it lacks the slice of tensor '", name,
                                              "' at element ", s.element_offset));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::Read(const std::string& name, Tensor* out) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint '", prefix_, "' has no tensor '", name, "'"));
  }
  const Entry& e = it->second;
  STRATA_RETURN_IF_ERROR(CheckExtent(name, e));
  STRATA_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(CpuAllocator(), e.info.dtype, e.info.shape));
  STRATA_RETURN_IF_ERROR(ReadBytes(name, e, static_cast<char*>(t.raw_data())));
  *out = std::move(t);
  return absl::OkStatus();
}

absl::Status CheckpointReader::ReadElements(const std::string& name, int64_t first, int64_t count,
                                            Tensor* out) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint '", prefix_, "' has no tensor '", name, "'"));
  }
  const Entry& e = it->second;
  const int64_t n = e.info.shape.num_elements();
  if (first < 0 || count < 0 || first > n || count > n - first) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' of checkpoint '", prefix_,
                                                   "' has ", n, " elements; elements [", first,
                                                   ", ", first + count, ") were asked for"));
  }
  STRATA_RETURN_IF_ERROR(CheckExtent(name, e));
  STRATA_ASSIGN_OR_RETURN(Tensor t,
                          Tensor::Allocate(CpuAllocator(), e.info.dtype, TensorShape{count}));
  char* dst = static_cast<char*>(t.raw_data());
  const uint64_t element = DataTypeSize(e.info.dtype);
  const uint64_t lo = static_cast<uint64_t>(first), hi = lo + static_cast<uint64_t>(count);
  if (e.slices.empty()) {
    STRATA_RETURN_IF_ERROR(ReadByteRange(name, e, lo * element, hi * element, dst));
  }
  for (const Slice& s : e.slices) {
    const uint64_t begin = std::max(lo, s.element_offset);
    const uint64_t end = std::min(hi, s.element_offset + s.num_elements);
    if (begin >= end) continue;
    const CheckpointReader& shard = *shards_[s.shard];
    STRATA_RETURN_IF_ERROR(
        shard.ReadByteRange(name, shard.entries_.at(name), (begin - s.element_offset) * element,
                            (end - s.element_offset) * element, dst + (begin - lo) * element));
  }
  *out = std::move(t);
  return absl::OkStatus();
}

absl::Status CheckpointReader::ReadBytes(const std::string& name, const Entry& e, char* dst) const {
  if (!e.slices.empty()) {
    const uint64_t element = DataTypeSize(e.info.dtype);
    for (const Slice& s : e.slices) {
      const CheckpointReader& shard = *shards_[s.shard];
      STRATA_RETURN_IF_ERROR(shard.ReadBytes(name, shard.entries_.at(name), dst + s.element_offset * element));
    }
    return absl::OkStatus();
  }
  if (e.size > 0) {
    absl::Status s = data_->Read(e.offset, e.size, dst);
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("reading tensor '", name, "': "));
  }
  const uint32_t crc = e.size == 0 ? 0 : crc32c::Value(dst, e.size);
  return crc == e.crc ? absl::OkStatus() : Corrupt(name, e, crc);
}

absl::Status CheckpointReader::ReadByteRange(const std::string& name, const Entry& e,
                                             uint64_t begin, uint64_t end, char* dst) const {
  if (verified()) {
    absl::Status s =
        begin < end ? data_->Read(e.offset + begin, end - begin, dst) : absl::OkStatus();
    return s.ok() ? s : AnnotateStatus(s, absl::StrCat("reading tensor '", name, "': "));
  }
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::string buf(std::min(kChunk, e.size), '\0');
  uint32_t crc = 0;
  for (uint64_t off = 0; off < e.size;) {
    const uint64_t n = std::min(kChunk, e.size - off);
    absl::Status s = data_->Read(e.offset + off, n, buf.data());
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("reading tensor '", name, "': "));
    crc = crc32c::Extend(crc, buf.data(), n);
    const uint64_t lo = std::max(off, begin), hi = std::min(off + n, end);
    if (lo < hi) std::memcpy(dst + (lo - begin), buf.data() + (lo - off), hi - lo);
    off += n;
  }
  return crc == e.crc ? absl::OkStatus() : Corrupt(name, e, crc);
}

absl::Status CheckpointReader::Corrupt(const std::string& name, const Entry& e,
                                       uint32_t crc) const {
  return absl::DataLossError(absl::StrFormat(
      "checkpoint data file '%s': tensor '%s' is corrupt (CRC32C 0x%08x, index says 0x%08x)",
      data_path_, name, crc, e.crc));
}

absl::Status CheckpointReader::VerifyAll() const {
  if (data_->size() != data_size_) {
    return absl::DataLossError(absl::StrCat("checkpoint data file '", data_path_, "' has ",
                                            data_->size(), " bytes; its index says ", data_size_));
  }
  // One sequential pass over the whole file (padding included). Every
  // tensor's own CRC was computed from these same bytes at save time, so a
  // matching file CRC vouches for all of them.
  constexpr size_t kChunk = size_t{1} << 20;
  std::string buf(std::min<uint64_t>(kChunk, data_size_), '\0');
  uint32_t crc = 0;
  for (uint64_t off = 0; off < data_size_;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, data_size_ - off));
    STRATA_RETURN_IF_ERROR(data_->Read(off, n, buf.data()));
    crc = crc32c::Extend(crc, buf.data(), n);
    off += n;
  }
  if (crc != data_crc_) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint data file '%s' is corrupt (CRC32C 0x%08x, index says 0x%08x)", data_path_, crc,
        data_crc_));
  }
  for (const auto& shard : shards_) {
    absl::Status s = shard->VerifyAll();
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("checkpoint '", prefix_, "': shard: "));
  }
  verified_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status CheckpointReader::RestoreInto(const std::map<std::string, TensorInfo>& expected,
                                           std::map<std::string, Tensor>* out) const {
  // 1. Check everything the caller expects before reading anything.
  for (const auto& [name, want] : expected) {
    auto it = infos_.find(name);
    if (it == infos_.end()) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint '", prefix_, "' has no tensor '", name, "'"));
    }
    const TensorInfo& have = it->second;
    if (have.dtype != want.dtype || have.shape != want.shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': checkpoint '", prefix_,
                                                     "' has ", Describe(have), ", expected ",
                                                     Describe(want)));
    }
  }
  // 2. Read (and CRC-check) them all; commit to `out` only at the end.
  std::map<std::string, Tensor> values;
  for (const auto& [name, want] : expected) {
    STRATA_RETURN_IF_ERROR(Read(name, &values[name]));
  }
  for (auto& [name, t] : values) (*out)[name] = std::move(t);
  return absl::OkStatus();
}

}  // namespace strata
