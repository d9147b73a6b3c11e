#include "runtime/checkpoint/checkpoint_reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/file_io.h"
#include "base/status.h"
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
  for (const auto& e : index.tensors()) {
    Entry entry;
    // DecodeIndex validated the shape.
    entry.info.dtype = e.dtype();
    entry.info.shape = *TensorShape::FromProto(e.shape());
    entry.offset = e.offset();
    entry.size = e.size();
    entry.crc = e.crc32c();
    r->infos_[e.name()] = entry.info;
    r->entries_.emplace(e.name(), std::move(entry));
  }
  for (const auto& [k, v] : index.metadata()) r->metadata_[k] = v;
  return r;
}

absl::StatusOr<std::string> CheckpointReader::GetMetadata(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint '", prefix_, "' has no metadata key '", key, "'"));
  }
  return it->second;
}

absl::Status CheckpointReader::Read(const std::string& name, Tensor* out) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint '", prefix_, "' has no tensor '", name, "'"));
  }
  const Entry& e = it->second;
  // Check the range against the real file before allocating, so a truncated
  // file is reported (and never makes us allocate for bytes that are not there).
  if (e.offset > data_->size() || e.size > data_->size() - e.offset) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint data file '", data_path_, "' is truncated: tensor '", name, "' needs bytes [",
        e.offset, ", ", e.offset + e.size, ") but the file has ", data_->size()));
  }
  STRATA_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(CpuAllocator(), e.info.dtype, e.info.shape));
  if (e.size > 0) {
    absl::Status s = data_->Read(e.offset, e.size, static_cast<char*>(t.raw_data()));
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("reading tensor '", name, "': "));
  }
  const uint32_t crc = e.size == 0 ? 0 : crc32c::Value(t.raw_data(), e.size);
  if (crc != e.crc) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint data file '%s': tensor '%s' is corrupt (CRC32C 0x%08x, index says 0x%08x)",
        data_path_, name, crc, e.crc));
  }
  *out = std::move(t);
  return absl::OkStatus();
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
