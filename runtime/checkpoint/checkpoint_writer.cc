#include "runtime/checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/env.h"
#include "base/file_io.h"
#include "base/status.h"
#include "proto/checkpoint.pb.h"
#include "runtime/checkpoint/checkpoint_format.h"
#include "runtime/checkpoint/checkpoint_reader.h"

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

// A tensor to write: its bytes, given to `write`'s append in order (all of
// them at once for a tensor in memory, a block at a time for a streamed
// piece).
using Append = std::function<absl::Status(absl::string_view)>;
struct Source {
  std::string name;
  DataType dtype = DT_INVALID;
  TensorShape shape;
  std::function<absl::Status(const Append&)> write;
};

std::vector<Source> SourcesOf(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<Source> out;
  for (const auto& [name, t] : tensors) {
    const Tensor* tensor = &t;
    out.push_back({name, t.dtype(), t.shape(), [tensor](const Append& append) {
                     const size_t n = tensor->TotalBytes();
                     if (n == 0) return absl::OkStatus();
                     return append(
                         absl::string_view(static_cast<const char*>(tensor->raw_data()), n));
                   }});
  }
  return out;
}

// Writes the data file `path`, filling the entries of `index` (sorted by
// name) with byte ranges and CRCs.
absl::Status WriteData(Env* env, const std::string& path, const std::vector<Source>& sources,
                       proto::CheckpointIndex* index) {
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return sources[a].name < sources[b].name; });

  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> f, env->NewWritableFile(path));
  static const std::string kZeros(fmt::kDataAlignment, '\0');
  uint32_t file_crc = 0;
  auto append = [&](absl::string_view bytes) {
    file_crc = crc32c::Extend(file_crc, bytes.data(), bytes.size());
    return f->Append(bytes);
  };
  for (size_t i : order) {
    const Source& source = sources[i];
    // Align each tensor so a future reader can map the file and use the
    // bytes in place.
    const uint64_t pad = (fmt::kDataAlignment - f->size() % fmt::kDataAlignment) % fmt::kDataAlignment;
    STRATA_RETURN_IF_ERROR(append(absl::string_view(kZeros.data(), pad)));
    auto* e = index->add_tensors();
    e->set_name(source.name);
    e->set_dtype(source.dtype);
    source.shape.AsProto(e->mutable_shape());
    e->set_offset(f->size());
    uint64_t n = 0;
    uint32_t crc = 0;
    STRATA_RETURN_IF_ERROR(source.write([&](absl::string_view bytes) {
      crc = crc32c::Extend(crc, bytes.data(), bytes.size());
      n += bytes.size();
      return append(bytes);
    }));
    const uint64_t want =
        static_cast<uint64_t>(source.shape.num_elements()) * DataTypeSize(source.dtype);
    if (n != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint tensor '", source.name, "' gave ", n, " bytes; its ",
          DataTypeString(source.dtype), " ", source.shape.DebugString(), " needs ", want));
    }
    e->set_size(n);
    e->set_crc32c(crc);
  }
  index->set_data_size(f->size());
  index->set_data_crc32c(file_crc);
  STRATA_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

absl::Status WriteFileSynced(Env* env, const std::string& path, absl::string_view contents) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> f, env->NewWritableFile(path));
  STRATA_RETURN_IF_ERROR(f->Append(contents));
  STRATA_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

// Deletes `<base>.data-*`, `<base>.index.tmp-*` and the files of shards
// `<base>.shard-*` in dir, except the data file `keep` and the files of the
// shards `keep_shards` (base names).
absl::Status DeleteDataFilesExcept(Env* env, const std::string& dir, const std::string& base,
                                   const std::string& keep,
                                   const std::vector<std::string>& keep_shards = {}) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  const std::string data_prefix = absl::StrCat(base, fmt::kDataInfix);
  const std::string tmp_index_prefix = absl::StrCat(base, fmt::kIndexSuffix, ".tmp-");
  const std::string shard_prefix = absl::StrCat(base, fmt::kShardInfix);
  for (const std::string& n : names) {
    if (n == keep) continue;
    bool kept_shard = false;
    for (const std::string& shard : keep_shards) kept_shard |= absl::StartsWith(n, shard + ".");
    if (kept_shard) continue;
    if (absl::StartsWith(n, data_prefix) || absl::StartsWith(n, tmp_index_prefix) ||
        absl::StartsWith(n, shard_prefix)) {
      STRATA_RETURN_IF_ERROR(env->DeleteFile(io::JoinPath(dir, n)));
    }
  }
  return absl::OkStatus();
}

// Adds to `index` (version 2) the shards and one sliced entry per tensor
// of `shards`, checking that the shards' pieces cover each exactly; the
// shards' base names go to `bases`.
absl::Status AddShards(const std::string& prefix, const CheckpointShards& shards,
                       proto::CheckpointIndex* index, std::vector<std::string>* bases) {
  struct Piece {
    uint64_t offset;
    uint64_t count;
    uint32_t shard;
  };
  std::map<std::string, std::vector<Piece>> pieces;
  std::map<std::string, const SlicedTensor*> sliced;
  for (const SlicedTensor& t : shards.tensors) {
    if (t.name.empty() || !sliced.emplace(t.name, &t).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sliced tensor '", t.name, "' has no name or is given twice"));
    }
  }
  const std::string base = io::BaseName(prefix);
  for (size_t i = 0; i < shards.prefixes.size(); ++i) {
    const std::string& shard = shards.prefixes[i];
    auto lost = [&](auto&&... parts) {
      return absl::DataLossError(absl::StrCat("shard '", shard, "' ", parts...));
    };
    if (io::DirName(shard) != io::DirName(prefix) ||
        !absl::StartsWith(io::BaseName(shard), absl::StrCat(base, fmt::kShardInfix))) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", shard, "' is not a shard prefix of '", prefix, "'"));
    }
    absl::StatusOr<std::unique_ptr<CheckpointReader>> r = CheckpointReader::Open(shard);
    if (!r.ok()) return lost("cannot be read: ", r.status().message());
    if (!(*r)->shard_prefixes().empty()) return lost("has shards of its own");
    for (const auto& [name, info] : (*r)->tensors()) {
      auto it = sliced.find(name);
      absl::StatusOr<std::string> offset_text = (*r)->GetMetadata(absl::StrCat(fmt::kPieceOffsetKey, name));
      uint64_t offset = 0;
      if (it == sliced.end()) return lost("holds '", name, "', which is not a sliced tensor");
      if (!offset_text.ok() || !absl::SimpleAtoi(*offset_text, &offset) || info.shape.dims() != 1 ||
          info.dtype != it->second->dtype) {
        return lost("holds '", name, "' as ", DataTypeString(info.dtype), " ", info.shape.DebugString(),
                    " without a valid offset; a piece of a ", DataTypeString(it->second->dtype),
                    " tensor is 1-D with one");
      }
      if (info.shape.num_elements() > 0) {
        pieces[name].push_back({offset, static_cast<uint64_t>(info.shape.num_elements()),
                                static_cast<uint32_t>(i)});
      }
    }
    auto* entry = index->add_shards();
    entry->set_prefix(io::BaseName(shard));
    entry->set_index_crc32c((*r)->index_crc());
    bases->push_back(io::BaseName(shard));
  }
  for (const SlicedTensor& t : shards.tensors) {
    std::vector<Piece>& p = pieces[t.name];
    std::sort(p.begin(), p.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    auto* e = index->add_tensors();
    e->set_name(t.name);
    e->set_dtype(t.dtype);
    t.shape.AsProto(e->mutable_shape());
    uint64_t next = 0;
    for (const Piece& piece : p) {
      if (piece.offset != next) {
        return absl::DataLossError(absl::StrCat(
            "the shards of '", prefix, "' do not hold tensor '", t.name, "' once: ",
            piece.offset < next ? "two hold" : "none holds", " element ", std::min(next, piece.offset),
            " (shard '", shards.prefixes[piece.shard], "' starts at ", piece.offset, ")"));
      }
      auto* slice = e->add_slices();
      slice->set_shard(piece.shard);
      slice->set_element_offset(piece.offset);
      slice->set_num_elements(piece.count);
      next += piece.count;
    }
    if (next != static_cast<uint64_t>(t.shape.num_elements())) {
      return absl::DataLossError(absl::StrCat("the shards of '", prefix, "' hold ", next, " of the ",
                                              t.shape.num_elements(), " elements of tensor '", t.name, "'"));
    }
  }
  index->set_version(fmt::kShardedVersion);
  std::sort(index->mutable_tensors()->begin(), index->mutable_tensors()->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  for (int i = 1; i < index->tensors_size(); ++i) {
    if (index->tensors(i - 1).name() == index->tensors(i).name()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor '", index->tensors(i).name(), "' is both saved and sliced"));
    }
  }
  return absl::OkStatus();
}

// The save of `sources` (checked by the caller); see SaveCheckpointUntil.
absl::Status SaveSources(Env* env, const std::string& prefix, const std::vector<Source>& sources,
                         const std::map<std::string, std::string>& metadata,
                         const CheckpointShards& shards, SaveStage stop) {
  const std::string dir = io::DirName(prefix);
  const std::string base = io::BaseName(prefix);
  STRATA_RETURN_IF_ERROR(env->CreateDirs(dir));

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
    env->DeleteFile(data_tmp).IgnoreError();
    env->DeleteFile(index_tmp).IgnoreError();
    // The new data file is only referenced once the index is renamed; until
    // then it is garbage.
    env->DeleteFile(data_path).IgnoreError();
    return AnnotateStatus(s, absl::StrCat("saving checkpoint '", prefix, "': "));
  };

  absl::Status s = WriteData(env, data_tmp, sources, &index);
  if (!s.ok()) return fail(s);
  std::vector<std::string> shard_bases;
  if (!shards.prefixes.empty() || !shards.tensors.empty()) {
    s = AddShards(prefix, shards, &index, &shard_bases);
    if (!s.ok()) return fail(s);
  }
  if (stop == SaveStage::kDataWritten) return Stopped(stop);
  s = env->RenameFile(data_tmp, data_path);
  if (!s.ok()) return fail(s);
  if (stop == SaveStage::kDataRenamed) return Stopped(stop);
  s = WriteFileSynced(env, index_tmp, fmt::EncodeIndex(index));
  if (!s.ok()) return fail(s);
  if (stop == SaveStage::kIndexWritten) return Stopped(stop);
  // The commit: after this rename (made durable by the directory fsync) the
  // prefix names the new checkpoint.
  s = env->RenameFile(index_tmp, index_path);
  if (!s.ok()) return fail(s);
  STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  if (stop == SaveStage::kCommitted) return Stopped(stop);
  return DeleteDataFilesExcept(env, dir, base, data_name, shard_bases);
}

}  // namespace

namespace internal {

absl::Status SaveCheckpointUntil(const std::string& prefix,
                                 const std::vector<std::pair<std::string, Tensor>>& tensors,
                                 const std::map<std::string, std::string>& metadata,
                                 const CheckpointShards& shards, SaveStage stop, Env* env) {
  STRATA_RETURN_IF_ERROR(ValidateInputs(prefix, tensors));
  return SaveSources(EnvOrDefault(env), prefix, SourcesOf(tensors), metadata, shards, stop);
}

}  // namespace internal

absl::Status SaveCheckpoint(const std::string& prefix,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::map<std::string, std::string>& metadata,
                            const CheckpointShards& shards, Env* env) {
  return internal::SaveCheckpointUntil(prefix, tensors, metadata, shards, SaveStage::kDone, env);
}

std::string ShardPrefix(const std::string& prefix, const std::string& name) {
  return absl::StrCat(prefix, fmt::kShardInfix, name);
}

absl::Status SaveCheckpointShard(const std::string& shard_prefix,
                                 const std::vector<TensorPiece>& pieces, Env* env) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  for (const TensorPiece& p : pieces) {
    if (p.element_offset < 0 || !p.values.IsInitialized()) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", shard_prefix, "': piece '", p.name,
                                                     "' has a negative offset or no values"));
    }
    absl::StatusOr<Tensor> flat = p.values.Reshaped(TensorShape{p.values.NumElements()});
    if (!flat.ok()) return AnnotateStatus(flat.status(), absl::StrCat("shard '", shard_prefix, "': piece '", p.name, "': "));
    tensors.emplace_back(p.name, *std::move(flat));
    metadata[absl::StrCat(fmt::kPieceOffsetKey, p.name)] = absl::StrCat(p.element_offset);
  }
  return SaveCheckpoint(shard_prefix, tensors, metadata, {}, env);
}

absl::Status SaveCheckpointShard(const std::string& shard_prefix, const StreamedPiece& piece,
                                 Env* env) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard '", shard_prefix, "': piece '", piece.name, "' ", parts...));
  };
  if (io::BaseName(shard_prefix).empty() || piece.name.empty())
    return bad("has no file name or no name");
  if (piece.element_offset < 0 || piece.num_elements < 0 || piece.block <= 0 || !piece.read) {
    return bad("needs an offset and a count >= 0, a block > 0 and a read");
  }
  if (!DataTypeCanUseMemcpy(piece.dtype))
    return bad("is ", DataTypeString(piece.dtype), ", not numeric");
  Source source{
      piece.name, piece.dtype, TensorShape{piece.num_elements}, [&](const Append& append) {
        for (int64_t first = 0; first < piece.num_elements; first += piece.block) {
          const int64_t count = std::min(piece.block, piece.num_elements - first);
          Tensor values;
          absl::Status s = piece.read(first, count, &values);
          if (!s.ok())
            return AnnotateStatus(
                s, absl::StrCat("piece '", piece.name, "' at element ", first, ": "));
          if (!values.IsInitialized() || values.dtype() != piece.dtype ||
              values.NumElements() != count) {
            return bad("read at element ", first, " gave ", values.DebugString(), ", not ", count,
                       " elements of ", DataTypeString(piece.dtype));
          }
          STRATA_RETURN_IF_ERROR(append(
              absl::string_view(static_cast<const char*>(values.raw_data()), values.TotalBytes())));
        }
        return absl::OkStatus();
      }};
  return SaveSources(
      EnvOrDefault(env), shard_prefix, {source},
      {{absl::StrCat(fmt::kPieceOffsetKey, piece.name), absl::StrCat(piece.element_offset)}}, {},
      SaveStage::kDone);
}

absl::Status DeleteCheckpoint(const std::string& prefix, Env* env) {
  env = EnvOrDefault(env);
  const std::string dir = io::DirName(prefix);
  if (!env->FileExists(dir)) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(env->DeleteFile(fmt::IndexPath(prefix)));
  STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  return DeleteDataFilesExcept(env, dir, io::BaseName(prefix), "");
}

}  // namespace strata
