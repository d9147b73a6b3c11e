#include "tools/trainer_data.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <set>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "tools/trainer_lib.h"
#include "train/data/csv.h"
#include "train/data/preprocess.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"

namespace strata {
namespace trainer {
namespace {

// Limits that keep absurd input an error instead of a failed allocation:
// 2^31 feature values (8 GiB) and a million classes.
constexpr int64_t kMaxElements = int64_t{1} << 31;
constexpr int64_t kMaxClasses = 1000000;

bool IsFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::Status LabelError(const SourceSpec& spec, int64_t index, int32_t label) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--data=", spec.description, ": example ", index, " has label ", label,
      "; labels must be class indices 0, 1, 2, ..."));
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Shuffle -> Batch -> Repeat over in-memory [n, d] / [n] tensors in one
// stage: each batch is gathered straight into its two tensors (two
// allocations per batch instead of several per example, which the
// per-example pipeline costs an overhead-bound step). The order of epoch e
// is a permutation drawn from (seed, e); the state is (epoch, batch within
// the epoch), so a restored iterator continues exactly. With
// layout.num_shards > 1 each element is shard `shard` of the global batch
// (the rows of its replicas in the batch's even split, trainer_data.h),
// gathered alone: the shards of one position are the global batch cut in
// order, and their states are the global one (a state from any shard, or
// from the unsharded pipeline, restores any other).
class ShuffledBatchDataset : public data::Dataset {
 public:
  ShuffledBatchDataset(Tensor x, Tensor y, uint64_t seed, std::string name, int64_t start,
                       BatchLayout layout)
      : x_(std::move(x)), y_(std::move(y)), seed_(seed), name_(std::move(name)), start_(start),
        layout_(std::move(layout)) {}

  int64_t Cardinality() const override { return data::kInfiniteCardinality; }
  // The pipeline's identity, which a restored state must match: the shard
  // is left out (every shard walks the same positions).
  std::string DebugString() const override {
    return absl::StrCat("ShuffledBatches(batch=", layout_.batch, ",seed=", seed_,
                        layout_.keep_remainder ? ",keep_remainder" : "", ")<-", name_, "[",
                        x_.dim_size(0), "x", x_.dim_size(1), "]");
  }
  absl::StatusOr<std::unique_ptr<data::IteratorBase>> MakeIterator(int64_t) const override {
    return std::unique_ptr<data::IteratorBase>(new Iterator(this));
  }

 private:
  class Iterator : public data::IteratorBase {
   public:
    explicit Iterator(const ShuffledBatchDataset* ds) : ds_(ds), per_epoch_(ds->layout_.EpochSteps(ds->x_.dim_size(0))) {
      SetEpoch(ds->start_ / per_epoch_);
      index_ = ds->start_ % per_epoch_;
    }

    absl::Status GetNext(data::Example* out, bool* end_of_sequence) override {
      if (index_ == per_epoch_) {
        SetEpoch(epoch_ + 1);
        index_ = 0;
      }
      const BatchLayout& l = ds_->layout_;
      const int64_t n = ds_->x_.dim_size(0);
      // This element's rows of the epoch's order: [begin, begin + count),
      // of the step's `total` examples over every worker.
      int64_t begin = 0, count = 0, total = 0;
      if (l.epoch_steps > 0) {
        // A worker's own shard (FILE): its next batch, fewer at its end.
        begin = index_ * l.batch;
        count = std::clamp<int64_t>(n - begin, 0, l.batch);
        for (int64_t w : l.worker_examples) total += std::clamp<int64_t>(w - begin, 0, l.batch);
      } else {
        // The global batch, or this shard's replicas' part of it.
        const int64_t first = index_ * l.batch;
        total = std::min(l.batch, n - first);
        const int64_t replicas = l.num_shards * l.replicas_per_shard;
        const int64_t r0 = l.shard * l.replicas_per_shard, r1 = r0 + l.replicas_per_shard;
        auto start_of = [&](int64_t r) { return r * (total / replicas) + std::min(r, total % replicas); };
        begin = first + start_of(r0);
        count = start_of(r1) - start_of(r0);
      }
      // No examples of its own: one placeholder row, weighted 0 by the step.
      const int64_t b = std::max<int64_t>(count, 1);
      const int64_t* rows = perm_.data() + (count > 0 ? begin : 0);
      const int64_t d = ds_->x_.dim_size(1);
      Tensor x(DT_FLOAT, TensorShape{b, d}), y(DT_INT32, TensorShape{b});
      const float* src = ds_->x_.data<float>();
      const int32_t* labels = ds_->y_.data<int32_t>();
      float* dst = x.data<float>();
      int32_t* yd = y.data<int32_t>();
      for (int64_t i = 0; i < b; ++i) {
        std::memcpy(dst + i * d, src + rows[i] * d, sizeof(float) * d);
        yd[i] = labels[rows[i]];
      }
      ++index_;
      out->clear();
      out->push_back(std::move(x));
      out->push_back(std::move(y));
      if (l.counts) out->push_back(Tensor::FromVector(std::vector<int64_t>{count, total}));
      *end_of_sequence = false;
      return absl::OkStatus();
    }
    absl::Status Save(data::StateWriter* w) const override {
      w->WriteInt(epoch_);
      w->WriteInt(index_);
      return absl::OkStatus();
    }
    absl::Status Restore(data::StateReader* r) override {
      int64_t epoch, index;
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, INT64_MAX, "epoch", &epoch));
      STRATA_RETURN_IF_ERROR(r->ReadIntInRange(0, per_epoch_, "batch index", &index));
      if (epoch != epoch_) SetEpoch(epoch);
      index_ = index;
      return absl::OkStatus();
    }

   private:
    // Fisher-Yates from (seed, epoch) by SplitMix64.
    void SetEpoch(int64_t epoch) {
      epoch_ = epoch;
      const int64_t n = ds_->x_.dim_size(0);
      perm_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) perm_[i] = i;
      uint64_t state = SplitMix(ds_->seed_ ^ SplitMix(static_cast<uint64_t>(epoch)));
      for (int64_t i = n - 1; i > 0; --i) {
        state = SplitMix(state);
        const int64_t j = static_cast<int64_t>(
            (static_cast<unsigned __int128>(state) * static_cast<uint64_t>(i + 1)) >> 64);
        std::swap(perm_[i], perm_[j]);
      }
    }

    const ShuffledBatchDataset* const ds_;
    const int64_t per_epoch_;
    int64_t epoch_ = 0;
    int64_t index_ = 0;  // next batch within the epoch
    std::vector<int64_t> perm_;
  };

  const Tensor x_, y_;
  const uint64_t seed_;
  const std::string name_;
  const int64_t start_;  // the first batch a new iterator yields
  const BatchLayout layout_;
};

}  // namespace

absl::StatusOr<SourceSpec> ParseDataSpec(const std::string& text) {
  SourceSpec spec;
  spec.description = text;
  if (text == "digits") return spec;
  if (absl::StartsWith(text, "csv:")) {
    spec.kind = SourceSpec::Kind::kCsv;
    spec.paths = absl::StrSplit(text.substr(4), ',');
    for (const std::string& p : spec.paths) {
      if (p.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--data=", text, ": an empty path (csv:PATH[,PATH...]; a PATH may be a file, a "
            "directory or a glob pattern)"));
      }
    }
    return spec;
  }
  if (absl::StartsWith(text, "synthetic:")) {
    spec.kind = SourceSpec::Kind::kSynthetic;
    const std::vector<std::string> parts = absl::StrSplit(text.substr(10), ':');
    int64_t* fields[] = {&spec.num_examples, &spec.num_features, &spec.num_classes};
    if (parts.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data=", text, ": expected synthetic:N[:FEATURES[:CLASSES]]"));
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!absl::SimpleAtoi(parts[i], fields[i]) || *fields[i] < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--data=", text, ": '", parts[i], "' is not a positive integer (synthetic:N[:FEATURES[:CLASSES]])"));
      }
    }
    if (spec.num_classes < 2) {
      return absl::InvalidArgumentError(absl::StrCat("--data=", text, ": needs at least 2 classes"));
    }
    // Refuse what cannot be held rather than fail an allocation.
    if (spec.num_examples > kMaxElements / spec.num_features || spec.num_classes > kMaxClasses) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data=", text, ": too large (at most ", kMaxElements, " feature values and ",
          kMaxClasses, " classes)"));
    }
    return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--data=", text, ": expected digits, csv:PATH or synthetic:N[:FEATURES[:CLASSES]]"));
}

absl::StatusOr<std::vector<std::string>> ExpandCsvPaths(const SourceSpec& spec) {
  std::vector<std::string> out;
  const std::string flag = absl::StrCat("--data=", spec.description, ": ");
  for (const std::string& p : spec.paths) {
    std::vector<std::string> found;
    struct stat st;
    if (p.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      const int rc = glob(p.c_str(), GLOB_ERR, nullptr, &g);
      if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
          if (IsFile(g.gl_pathv[i])) found.emplace_back(g.gl_pathv[i]);
        }
      }
      globfree(&g);
      if (rc != 0 && rc != GLOB_NOMATCH) {
        return absl::InvalidArgumentError(absl::StrCat(flag, "cannot expand the pattern '", p, "'"));
      }
      if (found.empty()) return absl::NotFoundError(absl::StrCat(flag, "no file matches '", p, "'"));
    } else if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* dir = opendir(p.c_str());
      if (dir == nullptr) {
        return absl::ErrnoToStatus(errno, absl::StrCat(flag, "cannot list the directory '", p, "'"));
      }
      while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const std::string path = absl::StrCat(p, absl::EndsWith(p, "/") ? "" : "/", e->d_name);
        if (IsFile(path)) found.push_back(path);
      }
      closedir(dir);
      if (found.empty()) return absl::NotFoundError(absl::StrCat(flag, "the directory '", p, "' holds no file"));
    } else {
      found.push_back(p);  // LoadCsv names it if it is missing
    }
    // Sorted, so that every worker sees the files in one order.
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  std::set<std::string> seen;
  for (const std::string& f : out) {
    if (!seen.insert(f).second) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "the file '", f, "' is listed twice"));
    }
  }
  return out;
}

absl::StatusOr<TrainerData> LoadTrainerData(const SourceSpec& spec, const std::string& digits_path,
                                            double test_fraction, uint64_t seed,
                                            const std::vector<std::string>* files,
                                            bool check_classes) {
  data::DatasetPtr all;
  switch (spec.kind) {
    case SourceSpec::Kind::kDigits: {
      STRATA_ASSIGN_OR_RETURN(all, data::LoadCsv({digits_path}));
      break;
    }
    case SourceSpec::Kind::kCsv: {
      std::vector<std::string> expanded;
      if (files == nullptr) {
        STRATA_ASSIGN_OR_RETURN(expanded, ExpandCsvPaths(spec));
      }
      STRATA_ASSIGN_OR_RETURN(all, data::LoadCsv(files != nullptr ? *files : expanded));
      break;
    }
    case SourceSpec::Kind::kSynthetic: {
      data::SyntheticOptions o;
      o.num_examples = spec.num_examples;
      o.num_features = spec.num_features;
      o.num_classes = static_cast<int>(spec.num_classes);
      o.seed = seed;
      STRATA_ASSIGN_OR_RETURN(all, data::Synthetic(o));
      break;
    }
  }
  auto split = data::TrainTestSplit(all, test_fraction, seed);
  if (!split.ok()) return AnnotateStatus(split.status(), absl::StrCat("--data=", spec.description, ": "));
  TrainerData out;
  out.name = absl::StrCat("Trainer(", spec.description, ",test=", test_fraction, ",seed=", seed, ")");
  // Materialize both splits as [n, d] / [n] tensors: batches are then
  // copies of rows, and evaluation feeds the test set as is.
  int32_t max_label = 0;
  for (int part = 0; part < 2; ++part) {
    const data::DatasetPtr& ds = part == 0 ? split->first : split->second;
    const int64_t n = ds->Cardinality();
    Tensor x, y(DT_INT32, TensorShape{n});
    data::Example e;
    for (int64_t i = 0; i < n; ++i) {
      STRATA_RETURN_IF_ERROR(ds->Get(i, &e));
      if (e.size() != 2 || e[0].dtype() != DT_FLOAT || e[0].dims() != 1 ||
          e[1].dtype() != DT_INT32 || e[1].dims() != 0) {
        return absl::InternalError(absl::StrCat("--data=", spec.description,
                                                ": examples are not (float [d], int32 label)"));
      }
      if (!x.IsInitialized()) {
        if (out.num_features == 0) out.num_features = e[0].dim_size(0);
        x = Tensor(DT_FLOAT, TensorShape{n, out.num_features});
      }
      if (e[0].dim_size(0) != out.num_features) {
        return absl::InvalidArgumentError(absl::StrCat("--data=", spec.description, ": example ", i,
                                                       " has ", e[0].dim_size(0), " features, not ",
                                                       out.num_features));
      }
      std::memcpy(x.data<float>() + i * out.num_features, e[0].data<float>(),
                  sizeof(float) * out.num_features);
      const int32_t label = *e[1].data<int32_t>();
      if (label < 0) return LabelError(spec, i, label);
      max_label = std::max(max_label, label);
      y.data<int32_t>()[i] = label;
    }
    if (!x.IsInitialized()) x = Tensor(DT_FLOAT, TensorShape{0, out.num_features});
    (part == 0 ? out.train_x : out.test_x) = x;
    (part == 0 ? out.train_y : out.test_y) = y;
  }
  out.num_classes = spec.kind == SourceSpec::Kind::kSynthetic ? spec.num_classes
                                                               : int64_t{max_label} + 1;
  if (out.num_classes > kMaxClasses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data=", spec.description, ": the largest label is ", max_label,
        "; labels must be class indices 0, 1, 2, ... (at most ", kMaxClasses, " classes)"));
  }
  if (check_classes && out.num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data=", spec.description, ": every label is 0; a classifier needs at least 2 classes"));
  }
  if (out.num_features < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--data=", spec.description, ": no features"));
  }
  return out;
}

absl::StatusOr<std::pair<Tensor, Tensor>> ComputeStats(const TrainerData& d) {
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({d.train_x, d.train_y}, d.name));
  STRATA_ASSIGN_OR_RETURN(data::FeatureStats stats, data::ComputeFeatureStats(ds));
  return std::make_pair(stats.mean, stats.stddev);
}

std::vector<double> FeatureSums(const TrainerData& d) {
  const int64_t n = d.train_x.dim_size(0), f = d.num_features;
  std::vector<double> sums(static_cast<size_t>(f), 0.0);
  const float* x = d.train_x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) sums[j] += x[i * f + j];
  }
  return sums;
}

std::vector<double> SquaredDeviationSums(const TrainerData& d, const std::vector<double>& mean) {
  const int64_t n = d.train_x.dim_size(0), f = d.num_features;
  std::vector<double> sums(static_cast<size_t>(f), 0.0);
  const float* x = d.train_x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double dev = x[i * f + j] - mean[j];
      sums[j] += dev * dev;
    }
  }
  return sums;
}

Tensor MeanFromSums(const std::vector<double>& sums, double count) {
  Tensor t(DT_FLOAT, TensorShape{static_cast<int64_t>(sums.size())});
  for (size_t j = 0; j < sums.size(); ++j) t.data<float>()[j] = static_cast<float>(sums[j] / count);
  return t;
}

Tensor StddevFromSums(const std::vector<double>& squared_deviation_sums, double count) {
  Tensor t(DT_FLOAT, TensorShape{static_cast<int64_t>(squared_deviation_sums.size())});
  for (size_t j = 0; j < squared_deviation_sums.size(); ++j) {
    t.data<float>()[j] = static_cast<float>(std::sqrt(squared_deviation_sums[j] / count));
  }
  return t;
}

absl::Status StandardizeInPlace(TrainerData* d, const Tensor& mean, const Tensor& stddev) {
  const int64_t f = d->num_features;
  if (mean.dtype() != DT_FLOAT || stddev.dtype() != DT_FLOAT || mean.NumElements() != f ||
      stddev.NumElements() != f) {
    return absl::InvalidArgumentError(absl::StrCat("feature statistics must be float [", f, "]"));
  }
  std::vector<float> scale(static_cast<size_t>(f));
  for (int64_t j = 0; j < f; ++j) {
    // The rule data::Standardize uses: a constant feature becomes 0.
    const float s = stddev.data<float>()[j];
    scale[j] = s < 1e-6f ? 1.0f : s;
  }
  for (Tensor* x : {&d->train_x, &d->test_x}) {
    // Fresh buffers: the loaded tensors may be shared with datasets.
    Tensor out(DT_FLOAT, x->shape());
    const float* in = x->data<float>();
    float* o = out.data<float>();
    const int64_t rows = x->dim_size(0);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < f; ++j) o[i * f + j] = (in[i * f + j] - mean.data<float>()[j]) / scale[j];
    }
    *x = std::move(out);
  }
  d->name = absl::StrCat(d->name, "+standardized");
  return absl::OkStatus();
}

int64_t BatchLayout::EpochSteps(int64_t examples) const {
  if (epoch_steps > 0) return epoch_steps;
  return keep_remainder ? (examples + batch - 1) / batch : examples / batch;
}

absl::StatusOr<data::DatasetPtr> MakeUnevenTrainBatches(const TrainerData& d, int64_t batch,
                                                        int64_t epoch_steps, uint64_t seed,
                                                        int64_t prefetch, int64_t start_batch,
                                                        std::vector<int64_t> worker_examples) {
  const int64_t n = d.train_x.dim_size(0);
  bool listed = false;
  for (int64_t w : worker_examples) listed = listed || w == n;
  if (batch < 1 || n < 1 || epoch_steps < (n + batch - 1) / batch || !listed) {
    return absl::InvalidArgumentError(absl::StrCat("uneven batches: ", n, " examples in batches of ",
                                                   batch, " do not fit ", epoch_steps,
                                                   " steps, or are not among the workers' (",
                                                   absl::StrJoin(worker_examples, ", "), ")"));
  }
  BatchLayout layout;
  layout.batch = batch;
  layout.epoch_steps = epoch_steps;
  layout.worker_examples = std::move(worker_examples);
  layout.counts = true;
  data::DatasetPtr ds = std::make_shared<ShuffledBatchDataset>(
      d.train_x, d.train_y, seed * 0x9E3779B97F4A7C15ull + 1, d.name, std::max<int64_t>(0, start_batch),
      std::move(layout));
  if (prefetch > 0) {
    STRATA_ASSIGN_OR_RETURN(ds, data::Prefetch(ds, prefetch));
  }
  return ds;
}

absl::StatusOr<data::DatasetPtr> MakeTrainBatches(const TrainerData& d, int64_t batch,
                                                  uint64_t seed, int64_t prefetch,
                                                  int64_t start_batch, int64_t shard,
                                                  int64_t num_shards, bool keep_remainder,
                                                  int64_t replicas_per_shard) {
  const int64_t n = d.train_x.dim_size(0);
  if (batch < 1 || (n < batch && !keep_remainder) || n < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--global_batch_size=", batch, " is larger than the ",
                                                   n, " training examples"));
  }
  if (num_shards < 1 || shard < 0 || shard >= num_shards || replicas_per_shard < 1 ||
      (!keep_remainder && batch % num_shards != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " of ", num_shards,
                                                   " of a batch of ", batch,
                                                   ": the shards must split the batch evenly"));
  }
  BatchLayout layout;
  layout.batch = batch;
  layout.keep_remainder = keep_remainder;
  layout.shard = shard;
  layout.num_shards = num_shards;
  // Without partial batches every shard gets batch / num_shards rows, cut
  // as its replicas would cut them.
  layout.replicas_per_shard = keep_remainder ? replicas_per_shard : 1;
  layout.counts = keep_remainder && num_shards > 1;
  // The shuffle's seed differs from the split's so that the epoch-0 order
  // is not a function of the split's permutation.
  data::DatasetPtr ds = std::make_shared<ShuffledBatchDataset>(
      d.train_x, d.train_y, seed * 0x9E3779B97F4A7C15ull + 1, d.name, std::max<int64_t>(0, start_batch),
      std::move(layout));
  if (prefetch > 0) {
    STRATA_ASSIGN_OR_RETURN(ds, data::Prefetch(ds, prefetch));
  }
  return ds;
}

absl::StatusOr<std::unique_ptr<data::DatasetIterator>> MakeTrainIterator(const TrainerData& d,
                                                                         int64_t batch,
                                                                         uint64_t seed,
                                                                         int64_t prefetch) {
  STRATA_ASSIGN_OR_RETURN(data::DatasetPtr ds, MakeTrainBatches(d, batch, seed, prefetch));
  return data::DatasetIterator::Create(ds);
}

}  // namespace trainer
}  // namespace strata
