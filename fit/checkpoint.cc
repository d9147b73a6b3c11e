#include "fit/checkpoint.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/state_ops.h"
#include "train/initializers.h"

namespace strata {
namespace fit {


absl::Status Checkpoint::AddSharded(const Scope& save, const Scope& restore, train::Variable* v,
                                    std::vector<Node*>* assigns) {
  const train::ShardedContents& c = *v->sharded_contents();
  bool remote = false;
  for (int component : c.component_of_block) {
    if (component >= v->num_replicas()) {
      return absl::InternalError(absl::StrCat("Checkpoint: sharded variable '", v->name(),
                                              "' names copy ", component, " of ",
                                              v->num_replicas()));
    }
    remote |= component < 0;
  }
  if (remote && !c.gather_processes) {
    return absl::InternalError(absl::StrCat("Checkpoint: sharded variable '", v->name(),
                                            "' has blocks in other processes and no gather"));
  }
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const TensorShape& shape : c.shapes) {
    sizes.push_back(shape.num_elements());
    total += shape.num_elements();
  }
  const int64_t padded = c.block * static_cast<int64_t>(c.component_of_block.size());
  // Save: this process's blocks in order (a run of consecutive blocks
  // [first, end): where other processes hold the rest, each writes the
  // pieces of the logical tensors it holds to its shard); else cut into the
  // logical tensors.
  OutputList blocks;
  int64_t first = -1, end = -1;
  for (size_t b = 0; b < c.component_of_block.size(); ++b) {
    if (c.component_of_block[b] < 0) continue;
    if (end >= 0 && end != static_cast<int64_t>(b)) {
      return absl::InternalError(absl::StrCat("Checkpoint: sharded variable '", v->name(),
                                              "' has blocks ", first, "..", end - 1, " and ", b,
                                              " here: not one run"));
    }
    if (first < 0) first = static_cast<int64_t>(b);
    end = static_cast<int64_t>(b) + 1;
    blocks.push_back(v->replica(c.component_of_block[b])->Read(save));
  }
  if (blocks.empty()) {
    return absl::InternalError(absl::StrCat("Checkpoint: sharded variable '", v->name(), "' has no block here"));
  }
  Output all = blocks.size() == 1 ? blocks[0] : ops::Concat(save, blocks, ops::Const(save, 0));
  if (remote && report_fetch_.empty()) {
    // The exchange after the shards are written: every process's report
    // (its shard's name, whether it was written), gathered in process order.
    Output report = ops::Placeholder(save.WithOpName("shard_report"), DT_DOUBLE, PartialTensorShape({2}));
    Output reports = c.gather_processes(save.WithOpName("shard_reports"), report);
    STRATA_RETURN_IF_ERROR(save.status());
    report_feed_ = report.name();
    report_fetch_ = reports.name();
  }
  every_process_saves_ |= remote;
  const int64_t here_begin = first * c.block, here_end = end * c.block;
  // Restore: the logical tensors, flattened, padded and cut into blocks.
  OutputList flat;
  int64_t offset = 0;
  for (size_t i = 0; i < c.names.size(); ++i) {
    std::vector<int64_t> dims(c.shapes[i].dim_sizes().begin(), c.shapes[i].dim_sizes().end());
    std::string read;
    if (!remote) {
      Output piece = ops::Slice(save, all, ops::Const<int64_t>(save, {offset}), ops::Const<int64_t>(save, {sizes[i]}));
      read = ops::Reshape(save.WithOpName(c.names[i]), piece, ops::Const<int64_t>(save, dims)).name();
    } else if (const int64_t lo = std::max(offset, here_begin), hi = std::min(offset + sizes[i], here_end); lo < hi) {
      Output piece = ops::Slice(save.WithOpName(c.names[i]), all, ops::Const<int64_t>(save, {lo - here_begin}),
                                ops::Const<int64_t>(save, {hi - lo}));
      pieces_.push_back({c.names[i], piece.name(), lo - offset});
    }
    offset += sizes[i];
    Output value = ops::Placeholder(restore.WithOpName(c.names[i]), v->dtype(),
                                    PartialTensorShape(c.shapes[i]));
    flat.push_back(ops::Reshape(restore, value, ops::Const<int64_t>(restore, {-1})));
    entries_.push_back({c.names[i], v->dtype(), c.shapes[i], read, value.name()});
  }
  if (padded > total) {
    flat.push_back(ops::Fill(restore, ops::Const<int64_t>(restore, {padded - total}),
                             train::ScalarConst(restore, v->dtype(), 0)));
  }
  Output joined = flat.size() == 1 ? flat[0] : ops::Concat(restore, flat, ops::Const(restore, 0));
  for (size_t b = 0; b < c.component_of_block.size(); ++b) {
    if (c.component_of_block[b] < 0) continue;  // another process restores it
    Output block = ops::Slice(restore, joined, ops::Const<int64_t>(restore, {static_cast<int64_t>(b) * c.block}),
                              ops::Const<int64_t>(restore, {c.block}));
    assigns->push_back(v->replica(c.component_of_block[b])->Assign(restore, block));
  }
  return restore.status();
}

absl::Status Checkpoint::AddPartitioned(const Scope& save, const Scope& restore,
                                        train::Variable* v) {
  int64_t next_row = 0;
  for (int p = 0; p < v->num_partitions(); ++p) {
    const train::Variable* part = v->partition(p);
    const TensorShape& shape = part->shape();
    if (v->partition_offset(p) != next_row || shape.dims() != v->shape().dims() ||
        shape.dims() == 0) {
      return absl::InternalError(absl::StrCat("Checkpoint: partition ", p, " of '", v->name(),
                                              "' is not the next rows of it"));
    }
    next_row += shape.dim_size(0);
    Part r;
    r.name = v->name();
    r.dtype = v->dtype();
    r.dims = shape.dims();
    r.rows = shape.dim_size(0);
    r.row_elements = shape.num_elements() / std::max<int64_t>(r.rows, 1);
    r.element_offset = v->partition_offset(p) * r.row_elements;
    r.row_bytes = r.row_elements * static_cast<int64_t>(DataTypeSize(v->dtype()));
    // Save: rows [first, first + count) as a slice, on the partition's
    // device, flattened.
    const Scope on_part = save.WithDevice(part->device());
    Output begin = ops::Placeholder(save.WithOpName(part->name() + "/begin"), DT_INT64,
                                    PartialTensorShape({shape.dims()}));
    Output size = ops::Placeholder(save.WithOpName(part->name() + "/size"), DT_INT64,
                                   PartialTensorShape({shape.dims()}));
    Output rows = ops::Slice(on_part, part->Read(save), begin, size);
    r.read = ops::Reshape(on_part.WithOpName(part->name()), rows, ops::Const<int64_t>(save, {-1}))
                 .name();
    r.begin_feed = begin.name();
    r.size_feed = size.name();
    // Restore: zeros, then rows [first, limit) written from a flat feed.
    const Scope to_part = restore.WithDevice(part->device());
    std::vector<int64_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
    Node* zero = part->Assign(restore, ops::Fill(to_part, ops::Const<int64_t>(to_part, dims),
                                                 train::ScalarConst(to_part, v->dtype(), 0)));
    Output first = ops::Placeholder(restore.WithOpName(part->name() + "/first"), DT_INT64,
                                    PartialTensorShape({}));
    Output limit = ops::Placeholder(restore.WithOpName(part->name() + "/limit"), DT_INT64,
                                    PartialTensorShape({}));
    Output values =
        ops::Placeholder(restore.WithOpName(part->name()), v->dtype(), PartialTensorShape({-1}));
    dims[0] = -1;
    Node* write = ops::ResourceScatterUpdate(
        to_part, part->handle(), ops::Range(to_part, first, limit, ops::Const<int64_t>(to_part, 1)),
        ops::Reshape(to_part, values, ops::Const<int64_t>(to_part, dims)));
    STRATA_RETURN_IF_ERROR(save.status());
    STRATA_RETURN_IF_ERROR(restore.status());
    if (zero == nullptr || write == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("Checkpoint: partition '", part->name(), "' cannot be written"));
    }
    r.zero = zero->name();
    r.first_feed = first.name();
    r.limit_feed = limit.name();
    r.values_feed = values.name();
    r.write = write->name();
    parts_.push_back(std::move(r));
  }
  if (next_row != v->shape().dim_size(0)) {
    return absl::InternalError(absl::StrCat("Checkpoint: the partitions of '", v->name(), "' hold ",
                                            next_row, " of its ", v->shape().dim_size(0), " rows"));
  }
  partitioned_.push_back({v->name(), v->dtype(), v->shape(), "", ""});
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Create(const Scope& scope,
                                                               const std::vector<train::Variable*>& variables) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (variables.empty()) return absl::InvalidArgumentError("Checkpoint: no variables to track");
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  absl::flat_hash_set<std::string> names;
  for (train::Variable* v : variables) {
    if (v == nullptr) return absl::InvalidArgumentError("Checkpoint: a null variable");
    if (!names.insert(v->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("Checkpoint: two variables are named '", v->name(), "'"));
    }
  }
  // A read of each variable (a mirrored one reads its first copy); a
  // placeholder and an assignment of each (a mirrored one assigns every
  // copy), grouped by one NoOp. A sharded variable (ZeRO's slots) is saved
  // as the tensors it holds blocks of, and scratch is left out: a restore
  // runs its initializer instead (PowerSGD's error and Q start afresh).
  const Scope root = scope.NewSubScope("checkpoint");
  const Scope save = root.NewSubScope("save");
  const Scope restore = root.NewSubScope("restore");
  std::vector<Node*> assigns;
  for (train::Variable* v : variables) {
    if (const train::ShardedContents* sharded = v->sharded_contents(); sharded != nullptr) {
      if (sharded->saved) {
        STRATA_RETURN_IF_ERROR(c->AddSharded(save, restore, v, &assigns));
      } else if (v->initializer() != nullptr) {
        assigns.push_back(v->initializer());
      }
      continue;
    }
    if (v->num_partitions() > 1) {
      STRATA_RETURN_IF_ERROR(c->AddPartitioned(save, restore, v));
      continue;
    }
    Output read = v->Read(save);
    Output value = ops::Placeholder(restore.WithOpName(v->name()), v->dtype(), PartialTensorShape(v->shape()));
    Node* assign = v->Assign(restore, value);
    STRATA_RETURN_IF_ERROR(root.status());
    if (!read.ok() || assign == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("Checkpoint: variable '", v->name(), "' cannot be read or assigned"));
    }
    c->entries_.push_back({v->name(), v->dtype(), v->shape(), read.name(), value.name()});
    assigns.push_back(assign);
  }
  names.clear();
  std::vector<Entry> saved = c->entries_;
  saved.insert(saved.end(), c->partitioned_.begin(), c->partitioned_.end());
  for (const Entry& e : saved) {
    if (!names.insert(e.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Checkpoint: two tensors are saved as '", e.name, "'"));
    }
  }
  Node* all = ops::NoOp(restore.WithOpName("all").WithControlDependencies(assigns));
  STRATA_RETURN_IF_ERROR(root.status());
  c->restore_target_ = all->name();
  c->variables_ = variables;
  return c;
}

bool Checkpoint::Taken(const std::string& name) const {
  for (const std::vector<Entry>* list : {&entries_, &partitioned_}) {
    for (const Entry& e : *list) {
      if (e.name == name) return true;
    }
  }
  for (const TrackedString& s : strings_) {
    if (s.key == name) return true;
  }
  for (const TrackedTensor& t : tensors_) {
    if (t.name == name) return true;
  }
  return name == ::strata::CheckpointManager::kMetadataGlobalStep;
}

absl::Status Checkpoint::TrackString(const std::string& key, std::function<absl::StatusOr<std::string>()> save,
                                     std::function<absl::Status(const std::string&)> restore) {
  if (key.empty() || !save || !restore) {
    return absl::InvalidArgumentError("Checkpoint::TrackString: a key, a save and a restore function are needed");
  }
  if (Taken(key)) return absl::InvalidArgumentError(absl::StrCat("Checkpoint: '", key, "' is tracked already"));
  strings_.push_back({key, std::move(save), std::move(restore)});
  return absl::OkStatus();
}

absl::Status Checkpoint::TrackTensor(const std::string& name, DataType dtype, const TensorShape& shape,
                                     std::function<absl::StatusOr<Tensor>()> save,
                                     std::function<absl::Status(const Tensor&)> restore) {
  if (name.empty() || !save || !restore) {
    return absl::InvalidArgumentError("Checkpoint::TrackTensor: a name, a save and a restore function are needed");
  }
  if (Taken(name)) return absl::InvalidArgumentError(absl::StrCat("Checkpoint: '", name, "' is tracked already"));
  tensors_.push_back({name, {dtype, shape}, std::move(save), std::move(restore)});
  return absl::OkStatus();
}

absl::Status Checkpoint::Collect(Session* session, std::vector<std::pair<std::string, Tensor>>* tensors,
                                 std::map<std::string, std::string>* metadata,
                                 std::vector<TensorPiece>* pieces) const {
  if (!pieces_.empty() && pieces == nullptr) {
    return absl::FailedPreconditionError(
        "Checkpoint::Collect: the state is sharded over the processes; each writes its pieces");
  }
  std::vector<Tensor> values;
  STRATA_RETURN_IF_ERROR(ReadEntries(session, /*entries=*/true, &values));
  tensors->clear();
  size_t at = 0;
  for (const Entry& e : entries_) {
    if (!e.read.empty()) tensors->emplace_back(e.name, std::move(values[at++]));
  }
  if (pieces != nullptr) {
    pieces->clear();
    for (const Piece& p : pieces_) pieces->push_back({p.name, p.element_offset, std::move(values[at++])});
  }
  for (const TrackedTensor& t : tensors_) {
    absl::StatusOr<Tensor> value = t.save();
    if (!value.ok()) return AnnotateStatus(value.status(), absl::StrCat("checkpoint state '", t.name, "': "));
    if (value->dtype() != t.info.dtype || value->shape() != t.info.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint state '", t.name, "': saves a ", DataTypeString(value->dtype()), " ",
          value->shape().DebugString(), " tensor, tracked as ", DataTypeString(t.info.dtype), " ",
          t.info.shape.DebugString()));
    }
    tensors->emplace_back(t.name, *std::move(value));
  }
  metadata->clear();
  for (const TrackedString& s : strings_) {
    absl::StatusOr<std::string> value = s.save();
    if (!value.ok()) return AnnotateStatus(value.status(), absl::StrCat("checkpoint state '", s.key, "': "));
    (*metadata)[s.key] = absl::Base64Escape(*value);
  }
  return absl::OkStatus();
}

absl::Status Checkpoint::ReadEntries(Session* session, bool entries, std::vector<Tensor>* values) const {
  std::vector<std::string> reads;
  for (const Entry& e : entries_) {
    if (entries && !e.read.empty()) reads.push_back(e.read);
  }
  for (const Piece& p : pieces_) reads.push_back(p.read);
  return session->Run({}, reads, {}, values);
}

absl::Status Checkpoint::ReadPieces(Session* session, std::vector<TensorPiece>* pieces) const {
  std::vector<Tensor> values;
  STRATA_RETURN_IF_ERROR(ReadEntries(session, /*entries=*/false, &values));
  pieces->clear();
  for (size_t i = 0; i < pieces_.size(); ++i) {
    pieces->push_back({pieces_[i].name, pieces_[i].element_offset, std::move(values[i])});
  }
  return absl::OkStatus();
}

absl::Status Checkpoint::set_block_bytes(int64_t bytes) {
  if (bytes < 1)
    return absl::InvalidArgumentError(absl::StrCat("Checkpoint: block of ", bytes, " bytes"));
  block_bytes_ = bytes;
  return absl::OkStatus();
}

int64_t Checkpoint::BlockRows(const Part& p) const {
  return p.row_bytes == 0 ? std::max<int64_t>(p.rows, 1)
                          : std::max<int64_t>(block_bytes_ / p.row_bytes, 1);
}

std::vector<StreamedPiece> Checkpoint::PartitionPieces(Session* session) const {
  std::vector<StreamedPiece> out;
  for (const Part& p : parts_) {
    const int dims = p.dims;
    auto read = [session, &p, dims](int64_t first, int64_t count, Tensor* values) {
      // Element ranges are whole rows (the block is).
      Tensor begin(DT_INT64, TensorShape{dims}), size(DT_INT64, TensorShape{dims});
      for (int d = 0; d < dims; ++d) {
        begin.data<int64_t>()[d] = 0;
        size.data<int64_t>()[d] = -1;
      }
      begin.data<int64_t>()[0] = first / std::max<int64_t>(p.row_elements, 1);
      size.data<int64_t>()[0] = count / std::max<int64_t>(p.row_elements, 1);
      std::vector<Tensor> out;
      STRATA_RETURN_IF_ERROR(
          session->Run({{p.begin_feed, begin}, {p.size_feed, size}}, {p.read}, {}, &out));
      *values = std::move(out[0]);
      return absl::OkStatus();
    };
    out.push_back({p.name, p.dtype, p.element_offset, p.rows * p.row_elements,
                   std::max<int64_t>(BlockRows(p) * p.row_elements, 1), read});
  }
  return out;
}

std::vector<SlicedTensor> Checkpoint::sliced_tensors() const {
  std::vector<SlicedTensor> out;
  for (const Entry& e : entries_) {
    if (e.read.empty()) out.push_back({e.name, e.dtype, e.shape});
  }
  for (const Entry& e : partitioned_) out.push_back({e.name, e.dtype, e.shape});
  return out;
}

absl::StatusOr<std::vector<double>> Checkpoint::ExchangeReports(Session* session, double name,
                                                                bool written) const {
  if (report_feed_.empty()) return absl::FailedPreconditionError("Checkpoint: nothing is sharded over processes");
  Tensor report(DT_DOUBLE, TensorShape{2});
  report.data<double>()[0] = name;
  report.data<double>()[1] = written ? 1 : 0;
  std::vector<Tensor> out;
  STRATA_RETURN_IF_ERROR(session->Run({{report_feed_, report}}, {report_fetch_}, {}, &out));
  const auto values = out[0].span<double>();
  if (out[0].dtype() != DT_DOUBLE || values.size() % 2 != 0 || values.empty()) {
    return absl::InternalError(absl::StrCat("Checkpoint: the shard reports came back as ", out[0].DebugString()));
  }
  return std::vector<double>(values.begin(), values.end());
}

absl::Status Checkpoint::Restore(Session* session, const CheckpointReader& reader) const {
  // Everything is checked before anything is assigned, and all but the
  // partitions (restored a partition at a time, last) read.
  std::map<std::string, CheckpointReader::TensorInfo> expected;
  for (const Entry& e : entries_) expected[e.name] = {e.dtype, e.shape};
  for (const TrackedTensor& t : tensors_) expected[t.name] = t.info;
  std::map<std::string, Tensor> values;
  absl::Status read = reader.RestoreInto(expected, &values);
  if (!read.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", reader.prefix(),
                                                      " does not fit this model: ", read.message()));
  }
  for (const Entry& e : partitioned_) {
    auto it = reader.tensors().find(e.name);
    if (it == reader.tensors().end() || it->second.dtype != e.dtype ||
        it->second.shape != e.shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", reader.prefix(), " does not fit this model: tensor '", e.name, "': ",
          it == reader.tensors().end()
              ? "absent"
              : absl::StrCat("the checkpoint has ", DataTypeString(it->second.dtype), " ",
                             it->second.shape.DebugString()),
          ", expected ", DataTypeString(e.dtype), " ", e.shape.DebugString()));
    }
  }
  std::map<std::string, std::string> strings;
  for (const TrackedString& s : strings_) {
    STRATA_ASSIGN_OR_RETURN(strings[s.key], ReadTrackedString(reader, s.key));
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const Entry& e : entries_) feeds.emplace_back(e.feed, values[e.name]);
  STRATA_RETURN_IF_ERROR(session->Run(feeds, {}, {restore_target_}, nullptr));
  STRATA_RETURN_IF_ERROR(RestorePartitions(session, reader));
  for (const TrackedTensor& t : tensors_) {
    absl::Status s = t.restore(values[t.name]);
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("checkpoint ", reader.prefix(), ": state '", t.name, "': "));
  }
  for (const TrackedString& t : strings_) {
    absl::Status s = t.restore(strings[t.key]);
    if (!s.ok()) return AnnotateStatus(s, absl::StrCat("checkpoint ", reader.prefix(), ": state '", t.key, "': "));
  }
  return absl::OkStatus();
}

absl::Status Checkpoint::RestorePartitions(Session* session, const CheckpointReader& reader) const {
  // A block of rows at a time (Restore checked the tensors first; the
  // checkpoint manager verified every byte when it opened the checkpoint).
  for (const Part& p : parts_) {
    const int64_t block = BlockRows(p);
    absl::Status s = session->Run({}, {}, {p.zero}, nullptr);
    for (int64_t first = 0; s.ok() && first < p.rows && p.row_elements > 0; first += block) {
      const int64_t limit = std::min(p.rows, first + block);
      Tensor rows;
      s = reader.ReadElements(p.name, p.element_offset + first * p.row_elements,
                              (limit - first) * p.row_elements, &rows);
      if (s.ok()) {
        s = session->Run({{p.first_feed, Tensor::Scalar<int64_t>(first)},
                          {p.limit_feed, Tensor::Scalar<int64_t>(limit)},
                          {p.values_feed, rows}},
                         {}, {p.write}, nullptr);
      }
    }
    if (!s.ok()) {
      return AnnotateStatus(s, absl::StrCat("checkpoint ", reader.prefix(), ": restoring '", p.name,
                                            "' at element ", p.element_offset, ": "));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTrackedString(const CheckpointReader& reader, const std::string& key) {
  absl::StatusOr<std::string> encoded = reader.GetMetadata(key);
  if (!encoded.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", reader.prefix(), " has no state '", key, "' (written by another program?)"));
  }
  std::string value;
  if (!absl::Base64Unescape(*encoded, &value)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", reader.prefix(), ": state '", key, "' is not base64"));
  }
  return value;
}

absl::StatusOr<int64_t> CheckpointStep(const CheckpointReader& reader) {
  absl::StatusOr<std::string> text = reader.GetMetadata(::strata::CheckpointManager::kMetadataGlobalStep);
  int64_t step = -1;
  if (!text.ok() || !absl::SimpleAtoi(*text, &step) || step < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", reader.prefix(), ": no valid global_step"));
  }
  return step;
}

absl::StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(const Checkpoint* checkpoint,
                                                                             const std::string& dir,
                                                                             int max_to_keep) {
  if (checkpoint == nullptr) return absl::InvalidArgumentError("CheckpointManager: no checkpoint");
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<::strata::CheckpointManager> files,
                          ::strata::CheckpointManager::Create(dir, max_to_keep));
  return std::unique_ptr<CheckpointManager>(new CheckpointManager(checkpoint, std::move(files)));
}

absl::StatusOr<std::string> CheckpointManager::Save(Session* session, int64_t step) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  CheckpointShards shards;
  shards.tensors = checkpoint_->sliced_tensors();
  if (!checkpoint_->every_process_saves()) {
    STRATA_RETURN_IF_ERROR(checkpoint_->Collect(session, &tensors, &metadata));
    STRATA_RETURN_IF_ERROR(WritePartitions(session, step, &shards.prefixes));
    if (shards.prefixes.empty()) shards.tensors.clear();
    return files_->Save(step, tensors, metadata, shards);
  }
  std::vector<TensorPiece> pieces;
  absl::Status read = checkpoint_->Collect(session, &tensors, &metadata, &pieces);
  STRATA_ASSIGN_OR_RETURN(std::vector<double> reports, WriteShard(session, step, read, pieces));
  for (size_t p = 0; p < reports.size() / 2; ++p) {
    if (reports[2 * p + 1] != 1) {
      return absl::AbortedError(absl::StrCat("checkpoint ", files_->ShardPrefix(step, "*"), ": worker ", p,
                                             " could not write its shard; its own error says why"));
    }
    shards.prefixes.push_back(files_->ShardPrefix(step, ShardName(reports[2 * p])));
  }
  // After the exchange, so that a failure here keeps no worker waiting.
  STRATA_RETURN_IF_ERROR(WritePartitions(session, step, &shards.prefixes));
  return files_->Save(step, tensors, metadata, shards);
}

absl::Status CheckpointManager::WritePartitions(Session* session, int64_t step,
                                                std::vector<std::string>* prefixes) {
  for (const StreamedPiece& piece : checkpoint_->PartitionPieces(session)) {
    const std::string prefix = files_->ShardPrefix(step, ShardName(FreshShardName()));
    STRATA_RETURN_IF_ERROR(SaveCheckpointShard(prefix, piece));
    prefixes->push_back(prefix);
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::SaveShard(Session* session, int64_t step) {
  if (!checkpoint_->every_process_saves()) return absl::OkStatus();
  std::vector<TensorPiece> pieces;
  absl::Status read = checkpoint_->ReadPieces(session, &pieces);
  return WriteShard(session, step, read, pieces).status();
}

std::string CheckpointManager::ShardName(double name) {
  return absl::StrFormat("%012x", static_cast<uint64_t>(name));
}

double CheckpointManager::FreshShardName() {
  std::random_device random;
  return static_cast<double>(((uint64_t{random()} << 32) ^ random()) & ((uint64_t{1} << 48) - 1));
}

absl::StatusOr<std::vector<double>> CheckpointManager::WriteShard(Session* session, int64_t step,
                                                                  absl::Status status,
                                                                  const std::vector<TensorPiece>& pieces) {
  // A fresh name per save (48 random bits: exact in the double the exchange
  // carries), so that the shards of a committed checkpoint of this step
  // stay untouched until the new one commits.
  const double name = FreshShardName();
  if (status.ok()) status = SaveCheckpointShard(files_->ShardPrefix(step, ShardName(name)), pieces);
  // Every process reports, even after a failure of its own, so that none
  // waits for it in the exchange.
  absl::StatusOr<std::vector<double>> reports =
      checkpoint_->ExchangeReports(session, name, status.ok());
  STRATA_RETURN_IF_ERROR(status);
  return reports;
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointManager::OpenLatest(
    std::vector<absl::Status>* skipped) const {
  return files_->LoadLatestValid(skipped);
}

absl::StatusOr<Restored> CheckpointManager::RestoreOrInitialize(Session* session, const Node* init) {
  Restored r;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> latest = OpenLatest(&r.skipped);
  if (!latest.ok() && latest.status().code() != absl::StatusCode::kNotFound) {
    return AnnotateStatus(latest.status(), absl::StrCat(directory(), ": "));
  }
  if (!latest.ok()) {
    if (init == nullptr) return absl::InvalidArgumentError("RestoreOrInitialize: no checkpoint and no initializer");
    STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
    return r;
  }
  STRATA_ASSIGN_OR_RETURN(r.step, CheckpointStep(**latest));
  STRATA_RETURN_IF_ERROR(checkpoint_->Restore(session, **latest));
  r.prefix = (*latest)->prefix();
  return r;
}

}  // namespace fit
}  // namespace strata
