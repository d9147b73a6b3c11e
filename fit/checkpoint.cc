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
  for (const Entry& e : c->entries_) {
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
  for (const Entry& e : entries_) {
    if (e.name == name) return true;
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

std::vector<SlicedTensor> Checkpoint::sliced_tensors() const {
  std::vector<SlicedTensor> out;
  for (const Entry& e : entries_) {
    if (e.read.empty()) out.push_back({e.name, e.dtype, e.shape});
  }
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
  // Everything is read and checked before anything is assigned.
  std::map<std::string, CheckpointReader::TensorInfo> expected;
  for (const Entry& e : entries_) expected[e.name] = {e.dtype, e.shape};
  for (const TrackedTensor& t : tensors_) expected[t.name] = t.info;
  std::map<std::string, Tensor> values;
  absl::Status read = reader.RestoreInto(expected, &values);
  if (!read.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", reader.prefix(),
                                                      " does not fit this model: ", read.message()));
  }
  std::map<std::string, std::string> strings;
  for (const TrackedString& s : strings_) {
    STRATA_ASSIGN_OR_RETURN(strings[s.key], ReadTrackedString(reader, s.key));
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const Entry& e : entries_) feeds.emplace_back(e.feed, values[e.name]);
  STRATA_RETURN_IF_ERROR(session->Run(feeds, {}, {restore_target_}, nullptr));
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
  if (!checkpoint_->every_process_saves()) {
    STRATA_RETURN_IF_ERROR(checkpoint_->Collect(session, &tensors, &metadata));
    return files_->Save(step, tensors, metadata);
  }
  std::vector<TensorPiece> pieces;
  absl::Status read = checkpoint_->Collect(session, &tensors, &metadata, &pieces);
  STRATA_ASSIGN_OR_RETURN(std::vector<double> reports, WriteShard(session, step, read, pieces));
  CheckpointShards shards;
  shards.tensors = checkpoint_->sliced_tensors();
  for (size_t p = 0; p < reports.size() / 2; ++p) {
    if (reports[2 * p + 1] != 1) {
      return absl::AbortedError(absl::StrCat("checkpoint ", files_->ShardPrefix(step, "*"), ": worker ", p,
                                             " could not write its shard; its own error says why"));
    }
    shards.prefixes.push_back(files_->ShardPrefix(step, ShardName(reports[2 * p])));
  }
  return files_->Save(step, tensors, metadata, shards);
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

absl::StatusOr<std::vector<double>> CheckpointManager::WriteShard(Session* session, int64_t step,
                                                                  absl::Status status,
                                                                  const std::vector<TensorPiece>& pieces) {
  // A fresh name per save (48 random bits: exact in the double the exchange
  // carries), so that the shards of a committed checkpoint of this step
  // stay untouched until the new one commits.
  std::random_device random;
  const uint64_t name = ((uint64_t{random()} << 32) ^ random()) & ((uint64_t{1} << 48) - 1);
  if (status.ok()) status = SaveCheckpointShard(files_->ShardPrefix(step, ShardName(static_cast<double>(name))), pieces);
  // Every process reports, even after a failure of its own, so that none
  // waits for it in the exchange.
  absl::StatusOr<std::vector<double>> reports =
      checkpoint_->ExchangeReports(session, static_cast<double>(name), status.ok());
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
