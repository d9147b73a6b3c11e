#include "runtime/checkpoint/checkpoint_manager.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/quote.h"
#include "base/status.h"
#include "runtime/checkpoint/checkpoint_format.h"
#include "runtime/checkpoint/checkpoint_writer.h"

namespace strata {
namespace {

namespace fmt = checkpoint_format;

constexpr char kCkptPrefix[] = "ckpt-";

// "ckpt-<digits>" (a checkpoint's prefix base name) -> step.
std::optional<int64_t> StepOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kCkptPrefix) || name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t step;
  if (!absl::SimpleAtoi(name, &step)) return std::nullopt;
  return step;
}

// "ckpt-<digits>.index" -> step.
std::optional<int64_t> StepOfIndexFile(absl::string_view name) {
  if (!absl::ConsumeSuffix(&name, fmt::kIndexSuffix)) return std::nullopt;
  return StepOfName(name);
}

// A checkpoint's "global_step" metadata (when it has one) must be the step
// of its name: a step that disagrees (a crafted 99999999999 would make a
// trainer believe it had finished) makes the checkpoint as unusable as a
// corrupt one.
absl::Status CheckStepMatchesName(const CheckpointReader& r) {
  absl::StatusOr<std::string> text = r.GetMetadata(CheckpointManager::kMetadataGlobalStep);
  if (!text.ok()) return absl::OkStatus();
  const std::optional<int64_t> named = StepOfName(io::BaseName(r.prefix()));
  int64_t step = -1;
  if (!named.has_value() || (absl::SimpleAtoi(*text, &step) && step == *named)) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat("checkpoint ", r.prefix(), ": its global_step ",
                                          QuoteForMessage(*text), " disagrees with its name"));
}

// The step a file of the directory belongs to: "ckpt-<digits>..." -> digits.
std::optional<int64_t> StepOfFile(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kCkptPrefix)) return std::nullopt;
  const size_t end = name.find_first_not_of("0123456789");
  int64_t step;
  if (end == 0 || !absl::SimpleAtoi(name.substr(0, end), &step)) return std::nullopt;
  return step;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(const std::string& dir,
                                                                             int max_to_keep,
                                                                             Env* env) {
  if (max_to_keep < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointManager: max_to_keep must be >= 0, got ", max_to_keep));
  }
  if (dir.empty()) return absl::InvalidArgumentError("CheckpointManager: empty directory");
  env = EnvOrDefault(env);
  STRATA_RETURN_IF_ERROR(env->CreateDirs(dir));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::unique_ptr<CheckpointManager> m(new CheckpointManager(dir, max_to_keep, env));
  std::lock_guard<std::mutex> l(m->mu_);
  for (const std::string& n : names) {
    if (auto step = StepOfIndexFile(n)) m->steps_.push_back(*step);
  }
  std::sort(m->steps_.begin(), m->steps_.end());
  return m;
}

std::string CheckpointManager::Prefix(int64_t step) const {
  return io::JoinPath(dir_, absl::StrCat(kCkptPrefix, step));
}

absl::StatusOr<std::string> CheckpointManager::Save(
    int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
    const std::map<std::string, std::string>& metadata, const CheckpointShards& shards) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CheckpointManager: negative step ", step));
  }
  std::map<std::string, std::string> md = metadata;
  md.emplace(kMetadataGlobalStep, absl::StrCat(step));
  std::lock_guard<std::mutex> l(mu_);
  const std::string prefix = Prefix(step);
  STRATA_RETURN_IF_ERROR(SaveCheckpoint(prefix, tensors, md, shards, env_));
  auto pos = std::lower_bound(steps_.begin(), steps_.end(), step);
  if (pos == steps_.end() || *pos != step) steps_.insert(pos, step);

  // The pointer file is rewritten before old checkpoints go, so it never
  // names a deleted one.
  std::vector<int64_t> doomed;
  if (max_to_keep_ > 0 && steps_.size() > static_cast<size_t>(max_to_keep_)) {
    const size_t n = steps_.size() - max_to_keep_;
    doomed.assign(steps_.begin(), steps_.begin() + n);
    steps_.erase(steps_.begin(), steps_.begin() + n);
  }
  STRATA_RETURN_IF_ERROR(WritePointerFile());
  for (int64_t s : doomed) STRATA_RETURN_IF_ERROR(DeleteCheckpoint(Prefix(s), env_));
  STRATA_RETURN_IF_ERROR(RemoveOrphans());
  return prefix;
}

std::string CheckpointManager::ShardPrefix(int64_t step, const std::string& name) const {
  return ::strata::ShardPrefix(Prefix(step), name);
}

absl::Status CheckpointManager::RemoveOrphans() {
  // Only the saving manager writes the directory, and its own save is
  // complete: every temporary file is a crashed write's, and every file of
  // a step without a kept checkpoint a crashed save's or rotation's.
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  for (const std::string& n : names) {
    const std::optional<int64_t> step = StepOfFile(n);
    const bool temporary = absl::StrContains(n, ".tmp");
    const bool orphan =
        (step.has_value() && (temporary || !std::binary_search(steps_.begin(), steps_.end(), *step))) ||
        absl::StartsWith(n, absl::StrCat(kPointerFile, ".tmp"));
    if (orphan) STRATA_RETURN_IF_ERROR(env_->DeleteFile(io::JoinPath(dir_, n)));
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::WritePointerFile() {
  std::string text;
  if (!steps_.empty()) {
    absl::StrAppend(&text, "model_checkpoint_path: \"", kCkptPrefix, steps_.back(), "\"\n");
  }
  for (int64_t s : steps_) {
    absl::StrAppend(&text, "all_model_checkpoint_paths: \"", kCkptPrefix, s, "\"\n");
  }
  return env_->WriteFileAtomically(io::JoinPath(dir_, kPointerFile), text);
}

std::optional<std::string> CheckpointManager::Latest() const {
  std::lock_guard<std::mutex> l(mu_);
  if (steps_.empty()) return std::nullopt;
  return Prefix(steps_.back());
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (int64_t s : steps_) out.push_back(Prefix(s));
  return out;
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointManager::LoadLatestValid(
    std::vector<absl::Status>* skipped) const {
  std::vector<std::string> all = checkpoints();
  if (all.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint in '", dir_, "'"));
  }
  std::string errors;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    auto r = CheckpointReader::Open(*it);
    absl::Status s = r.ok() ? (*r)->VerifyAll() : r.status();
    if (s.ok()) s = CheckStepMatchesName(**r);
    if (s.ok()) return r;
    if (skipped != nullptr) skipped->push_back(s);
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", s.message());
  }
  return absl::DataLossError(absl::StrCat("no intact checkpoint in '", dir_, "': ", errors));
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  const std::string path = io::JoinPath(dir, CheckpointManager::kPointerFile);
  auto text = io::ReadFileToString(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("no checkpoint pointer file '", path, "'"));
    }
    return text.status();
  }
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "model_checkpoint_path:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (line.size() < 2 || line.front() != '"' || line.back() != '"') break;
    line = line.substr(1, line.size() - 2);
    if (line.empty() || absl::StrContains(line, '"')) break;
    return line.front() == '/' ? std::string(line) : io::JoinPath(dir, line);
  }
  return absl::DataLossError(
      absl::StrCat("checkpoint pointer file '", path, "' has no valid model_checkpoint_path"));
}

}  // namespace strata
