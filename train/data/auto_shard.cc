#include "train/data/auto_shard.h"

#include <algorithm>
#include <climits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "train/data/csv.h"

namespace strata {
namespace data {
namespace {

absl::Status BadArg(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("AutoShard: ", why));
}

// What FILE needs to know about a pipeline, gathered top-down.
struct Survey {
  bool has_batch = false;             // a Batch was reached through nodes
  int64_t file_sources = 0;
  int64_t min_files = INT64_MAX;      // over the file sources
  std::vector<std::string> files;     // of every file source, in walk order
  std::vector<std::string> blockers;  // where the walk stopped: not a file source
};

void Inspect(const DatasetPtr& ds, Survey* s) {
  std::optional<DatasetNode> node = ds->AsNode();
  if (!node.has_value()) {
    s->blockers.push_back(ds->DebugString());
    return;
  }
  if (node->op == "Batch") s->has_batch = true;
  if (node->inputs.empty()) {
    if (node->files.empty()) {
      s->blockers.push_back(ds->DebugString());
      return;
    }
    ++s->file_sources;
    s->min_files = std::min<int64_t>(s->min_files, static_cast<int64_t>(node->files.size()));
    s->files.insert(s->files.end(), node->files.begin(), node->files.end());
    return;
  }
  for (const DatasetPtr& in : node->inputs) Inspect(in, s);
}

// Why FILE does not apply to the surveyed pipeline ("" if it does).
std::string WhyNotFile(const Survey& s, int64_t num_workers) {
  if (!s.blockers.empty()) {
    return absl::StrCat("the pipeline does not read files only: ", s.blockers[0],
                        " is not a file source (sharding by file needs LoadCsv sources under "
                        "transformations of transforms.h)");
  }
  if (s.min_files < num_workers) {
    return absl::StrCat("a file source has ", s.min_files, " file(s), fewer than the ", num_workers,
                        " workers");
  }
  if (!s.has_batch) {
    return "the pipeline has no Batch to turn into per-worker batches";
  }
  return "";
}

struct RewriteArgs {
  int64_t num_workers;
  int64_t worker_index;
  bool shard_files;
  bool batch_pending = true;  // the outermost Batch is still to be rewritten
  std::vector<std::string> files;  // this worker's, gathered
};

// Rebuilds the nodes whose inputs or arguments change; everything else
// (and any dataset that is not a node) is kept as it is.
absl::StatusOr<DatasetPtr> Rewrite(const DatasetPtr& ds, RewriteArgs* a) {
  std::optional<DatasetNode> node = ds->AsNode();
  if (!node.has_value()) return ds;
  bool changed = false;
  if (node->inputs.empty()) {
    if (!a->shard_files || node->files.empty()) return ds;
    node->files = ShardFiles(node->files, a->num_workers, a->worker_index);
    a->files.insert(a->files.end(), node->files.begin(), node->files.end());
    changed = true;
  }
  if (a->batch_pending && node->op == "Batch") {
    a->batch_pending = false;
    if (node->batch_size % a->num_workers != 0) {
      return BadArg(absl::StrCat("the global batch of ", node->batch_size, " (", ds->DebugString(),
                                 ") does not split evenly over ", a->num_workers,
                                 " workers; use a global batch size that is a multiple of ",
                                 a->num_workers));
    }
    node->batch_size /= a->num_workers;
    changed = true;
  }
  for (DatasetPtr& in : node->inputs) {
    STRATA_ASSIGN_OR_RETURN(DatasetPtr rewritten, Rewrite(in, a));
    changed |= rewritten != in;
    in = std::move(rewritten);
  }
  if (!changed) return ds;
  absl::StatusOr<DatasetPtr> rebuilt = node->rebuild(*node);
  if (!rebuilt.ok()) {
    return AnnotateStatus(rebuilt.status(),
                          absl::StrCat("AutoShard: rebuilding ", node->op, " for worker ",
                                       a->worker_index, " of ", a->num_workers, ": "));
  }
  return rebuilt;
}

}  // namespace

const char* AutoShardPolicyName(AutoShardPolicy policy) {
  switch (policy) {
    case AutoShardPolicy::kOff: return "OFF";
    case AutoShardPolicy::kAuto: return "AUTO";
    case AutoShardPolicy::kFile: return "FILE";
    case AutoShardPolicy::kData: return "DATA";
  }
  return "?";
}

absl::StatusOr<AutoShardPolicy> ParseAutoShardPolicy(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "off") return AutoShardPolicy::kOff;
  if (t == "auto") return AutoShardPolicy::kAuto;
  if (t == "file") return AutoShardPolicy::kFile;
  if (t == "data") return AutoShardPolicy::kData;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown auto-shard policy '", text, "'; expected off, auto, file or data"));
}

absl::StatusOr<AutoShardPolicy> ResolveAutoShardPolicy(AutoShardPolicy requested,
                                                       int64_t num_files, int64_t num_workers) {
  if (num_workers < 1) return BadArg(absl::StrCat("num_workers must be >= 1, got ", num_workers));
  if (num_workers == 1) return AutoShardPolicy::kOff;
  switch (requested) {
    case AutoShardPolicy::kAuto:
      return num_files >= num_workers ? AutoShardPolicy::kFile : AutoShardPolicy::kData;
    case AutoShardPolicy::kFile:
      if (num_files < num_workers) {
        return BadArg(absl::StrCat("FILE sharding needs at least as many files as workers: ",
                                   num_files, " file(s) for ", num_workers,
                                   " workers (use AUTO or DATA to shard by example)"));
      }
      return AutoShardPolicy::kFile;
    default:
      return requested;
  }
}

absl::StatusOr<AutoShardResult> AutoShard(DatasetPtr dataset, int64_t num_workers,
                                          int64_t worker_index, AutoShardPolicy policy) {
  if (dataset == nullptr) return BadArg("null dataset");
  if (num_workers < 1 || worker_index < 0 || worker_index >= num_workers) {
    return BadArg(absl::StrCat("need 0 <= worker_index < num_workers, got worker ", worker_index,
                               " of ", num_workers));
  }
  AutoShardResult r;
  r.dataset = dataset;
  if (num_workers == 1) {
    r.policy = AutoShardPolicy::kOff;
    r.reason = "one worker: nothing to shard";
    return r;
  }
  if (policy == AutoShardPolicy::kData) {
    r.policy = AutoShardPolicy::kData;
    r.reason = "DATA requested: every worker reads every global batch and keeps its part";
    return r;
  }
  Survey survey;
  Inspect(dataset, &survey);
  RewriteArgs args{num_workers, worker_index, /*shard_files=*/false};
  if (policy == AutoShardPolicy::kOff) {
    if (!survey.has_batch) {
      return BadArg(absl::StrCat("OFF needs a Batch to turn into per-worker batches, and ",
                                 dataset->DebugString(), " has none that AutoShard can see"));
    }
    STRATA_ASSIGN_OR_RETURN(r.dataset, Rewrite(dataset, &args));
    r.policy = AutoShardPolicy::kOff;
    r.reason = "OFF requested: every worker reads every example, in per-worker batches";
    return r;
  }
  const std::string why_not = WhyNotFile(survey, num_workers);
  if (!why_not.empty()) {
    if (policy == AutoShardPolicy::kFile) {
      return BadArg(absl::StrCat("cannot shard by FILE: ", why_not));
    }
    r.policy = AutoShardPolicy::kData;
    r.reason = absl::StrCat("AUTO chose DATA: ", why_not);
    return r;
  }
  args.shard_files = true;
  STRATA_ASSIGN_OR_RETURN(r.dataset, Rewrite(dataset, &args));
  r.policy = AutoShardPolicy::kFile;
  r.files = std::move(args.files);
  r.reason = absl::StrCat(policy == AutoShardPolicy::kAuto ? "AUTO chose FILE: " : "FILE: ",
                          "worker ", worker_index, " reads ", r.files.size(), " of ",
                          survey.files.size(), " files");
  return r;
}

}  // namespace data
}  // namespace strata
