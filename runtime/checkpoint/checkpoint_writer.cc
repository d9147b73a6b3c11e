#include "runtime/checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/file_io.h"
#include "base/status.h"
#include "proto/checkpoint.pb.h"
#include "runtime/checkpoint/checkpoint_format.h"

namespace strata {
namespace {

namespace fmt = checkpoint_format;
using internal::SaveStage;

absl::Status Stopped(SaveStage stage) {
  return absl::AbortedError(
      absl::StrCat("checkpoint save stopped at stage ", static_cast<int>(stage), " (crash test)"));
}

absl::Status ValidateInputs(const std::string& prefix,
                            const std::vector<std::pair<std::string, Tensor>>& tensors) {
  if (io::BaseName(prefix).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint prefix '", prefix, "' has no file name part"));
  }
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) return absl::InvalidArgumentError("checkpoint tensor with an empty name");
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor '", name, "' given twice"));
    }
    if (!t.IsInitialized() || !DataTypeCanUseMemcpy(t.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor '", name, "' is ",
                       t.IsInitialized() ? DataTypeString(t.dtype()) : "uninitialized",
                       "; only numeric and bool tensors can be saved"));
    }
  }
  return absl::OkStatus();
}

// Writes the data file `path`, filling the entries of `index` (sorted by
// name) with byte ranges and CRCs.
absl::Status WriteData(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       proto::CheckpointIndex* index) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].first < tensors[b].first; });

  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> f, io::WritableFile::Create(path));
  static const std::string kZeros(fmt::kDataAlignment, '\0');
  uint32_t file_crc = 0;
  auto append = [&](absl::string_view bytes) {
    file_crc = crc32c::Extend(file_crc, bytes.data(), bytes.size());
    return f->Append(bytes);
  };
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    // Align each tensor so a future reader can map the file and use the
    // bytes in place.
    const uint64_t pad = (fmt::kDataAlignment - f->size() % fmt::kDataAlignment) % fmt::kDataAlignment;
    STRATA_RETURN_IF_ERROR(append(absl::string_view(kZeros.data(), pad)));
    const size_t n = t.TotalBytes();
    const char* bytes = static_cast<const char*>(t.raw_data());
    auto* e = index->add_tensors();
    e->set_name(name);
    e->set_dtype(t.dtype());
    t.shape().AsProto(e->mutable_shape());
    e->set_offset(f->size());
    e->set_size(n);
    e->set_crc32c(n == 0 ? 0 : crc32c::Value(bytes, n));
    if (n > 0) STRATA_RETURN_IF_ERROR(append(absl::string_view(bytes, n)));
  }
  index->set_data_size(f->size());
  index->set_data_crc32c(file_crc);
  STRATA_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

absl::Status WriteFileSynced(const std::string& path, absl::string_view contents) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> f, io::WritableFile::Create(path));
  STRATA_RETURN_IF_ERROR(f->Append(contents));
  STRATA_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

// Deletes `<base>.data-*` and `<base>.index.tmp-*` in dir except `keep`.
absl::Status DeleteDataFilesExcept(const std::string& dir, const std::string& base,
                                   const std::string& keep) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, io::ListDir(dir));
  const std::string data_prefix = absl::StrCat(base, fmt::kDataInfix);
  const std::string tmp_index_prefix = absl::StrCat(base, fmt::kIndexSuffix, ".tmp-");
  for (const std::string& n : names) {
    if (n == keep) continue;
    if (absl::StartsWith(n, data_prefix) || absl::StartsWith(n, tmp_index_prefix)) {
      STRATA_RETURN_IF_ERROR(io::DeleteFile(io::JoinPath(dir, n)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::Status SaveCheckpointUntil(const std::string& prefix,
                                 const std::vector<std::pair<std::string, Tensor>>& tensors,
                                 const std::map<std::string, std::string>& metadata,
                                 SaveStage stop) {
  STRATA_RETURN_IF_ERROR(ValidateInputs(prefix, tensors));
  const std::string dir = io::DirName(prefix);
  const std::string base = io::BaseName(prefix);
  STRATA_RETURN_IF_ERROR(io::CreateDirs(dir));

  const std::string id = io::UniqueId();
  const std::string data_name = absl::StrCat(base, fmt::kDataInfix, id);
  const std::string data_path = io::JoinPath(dir, data_name);
  const std::string data_tmp = data_path + ".tmp";
  const std::string index_path = fmt::IndexPath(prefix);
  const std::string index_tmp = absl::StrCat(index_path, ".tmp-", id);

  proto::CheckpointIndex index;
  index.set_version(fmt::kVersion);
  index.set_data_file(data_name);
  for (const auto& [k, v] : metadata) (*index.mutable_metadata())[k] = v;

  // On failure, remove what this save wrote; the previous checkpoint (if any)
  // is untouched because its index and data file have other names.
  auto fail = [&](absl::Status s) {
    io::DeleteFile(data_tmp).IgnoreError();
    io::DeleteFile(index_tmp).IgnoreError();
    // The new data file is only referenced once the index is renamed; until
    // then it is garbage.
    io::DeleteFile(data_path).IgnoreError();
    return AnnotateStatus(s, absl::StrCat("saving checkpoint '", prefix, "': "));
  };

  absl::Status s = WriteData(data_tmp, tensors, &index);
  if (!s.ok()) return fail(s);
  if (stop == SaveStage::kDataWritten) return Stopped(stop);
  s = io::RenameFile(data_tmp, data_path);
  if (!s.ok()) return fail(s);
  if (stop == SaveStage::kDataRenamed) return Stopped(stop);
  s = WriteFileSynced(index_tmp, fmt::EncodeIndex(index));
  if (!s.ok()) return fail(s);
  if (stop == SaveStage::kIndexWritten) return Stopped(stop);
  // The commit: after this rename (made durable by the directory fsync) the
  // prefix names the new checkpoint.
  s = io::RenameFile(index_tmp, index_path);
  if (!s.ok()) return fail(s);
  STRATA_RETURN_IF_ERROR(io::SyncDir(dir));
  if (stop == SaveStage::kCommitted) return Stopped(stop);
  return DeleteDataFilesExcept(dir, base, data_name);
}

}  // namespace internal

absl::Status SaveCheckpoint(const std::string& prefix,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  return internal::SaveCheckpointUntil(prefix, tensors, metadata, SaveStage::kDone);
}

absl::Status DeleteCheckpoint(const std::string& prefix) {
  const std::string dir = io::DirName(prefix);
  if (!io::FileExists(dir)) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(io::DeleteFile(fmt::IndexPath(prefix)));
  STRATA_RETURN_IF_ERROR(io::SyncDir(dir));
  return DeleteDataFilesExcept(dir, io::BaseName(prefix), "");
}

}  // namespace strata
