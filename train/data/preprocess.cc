#include "train/data/preprocess.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The examples of a random-access input at the given (ascending) indices.
class IndexSubsetDataset : public RandomAccessDataset {
 public:
  IndexSubsetDataset(DatasetPtr input, std::vector<int64_t> indices, std::string what)
      : input_(std::move(input)), indices_(std::move(indices)), what_(std::move(what)) {}
  int64_t Cardinality() const override { return static_cast<int64_t>(indices_.size()); }
  absl::Status Get(int64_t index, Example* out) const override {
    if (index < 0 || index >= Cardinality()) {
      return absl::OutOfRangeError(absl::StrCat("index ", index, " outside ", DebugString()));
    }
    return input_->Get(indices_[index], out);
  }
  std::string DebugString() const override { return absl::StrCat(what_, "<-", input_->DebugString()); }

 private:
  const DatasetPtr input_;
  const std::vector<int64_t> indices_;
  const std::string what_;
};

}  // namespace

absl::StatusOr<FeatureStats> ComputeFeatureStats(const DatasetPtr& dataset, int component) {
  if (dataset == nullptr) return absl::InvalidArgumentError("ComputeFeatureStats: null dataset");
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> it, DatasetIterator::Create(dataset));
  if (dataset->Cardinality() == kInfiniteCardinality) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputeFeatureStats: infinite dataset ", dataset->DebugString()));
  }
  TensorShape shape;
  std::vector<double> mean, m2;
  int64_t count = 0;
  while (true) {
    Example e;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&e, &end));
    if (end) break;
    if (component < 0 || component >= static_cast<int>(e.size()) ||
        e[component].dtype() != DT_FLOAT) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ComputeFeatureStats: element ", count, " has no float32 component ", component));
    }
    const Tensor& x = e[component];
    if (count == 0) {
      shape = x.shape();
      mean.assign(static_cast<size_t>(x.NumElements()), 0.0);
      m2.assign(mean.size(), 0.0);
    } else if (x.shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat("ComputeFeatureStats: element ", count,
                                                     " has shape ", x.shape().DebugString(),
                                                     ", element 0 has ", shape.DebugString()));
    }
    ++count;
    const float* p = x.data<float>();
    for (size_t j = 0; j < mean.size(); ++j) {
      const double delta = p[j] - mean[j];
      mean[j] += delta / static_cast<double>(count);
      m2[j] += delta * (p[j] - mean[j]);
    }
  }
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputeFeatureStats: empty dataset ", dataset->DebugString()));
  }
  FeatureStats stats{Tensor(DT_FLOAT, shape), Tensor(DT_FLOAT, shape)};
  for (size_t j = 0; j < mean.size(); ++j) {
    stats.mean.data<float>()[j] = static_cast<float>(mean[j]);
    stats.stddev.data<float>()[j] = static_cast<float>(std::sqrt(m2[j] / static_cast<double>(count)));
  }
  return stats;
}

absl::StatusOr<DatasetPtr> Standardize(DatasetPtr dataset, const FeatureStats& stats, int component) {
  if (stats.mean.dtype() != DT_FLOAT || stats.stddev.dtype() != DT_FLOAT ||
      stats.mean.shape() != stats.stddev.shape()) {
    return absl::InvalidArgumentError("Standardize: mean and stddev must be float32 of one shape");
  }
  // Precompute 1/stddev once; the map only multiplies.
  Tensor mean = stats.mean.DeepCopy();
  Tensor inv(DT_FLOAT, stats.stddev.shape());
  for (int64_t j = 0; j < inv.NumElements(); ++j) {
    const float s = stats.stddev.data<float>()[j];
    inv.data<float>()[j] = s < 1e-6f ? 1.0f : 1.0f / s;
  }
  // The statistics are part of the name, so state saved under other
  // statistics is not restored into this pipeline.
  uint64_t h = 0;
  for (int64_t j = 0; j < mean.NumElements(); ++j) {
    uint32_t a, b;
    std::memcpy(&a, mean.data<float>() + j, 4);
    std::memcpy(&b, inv.data<float>() + j, 4);
    h = Mix(h ^ ((uint64_t{a} << 32) | b));
  }
  MapFn fn = [mean, inv, component](Example* e) -> absl::Status {
    if (component < 0 || component >= static_cast<int>(e->size()) ||
        (*e)[component].dtype() != DT_FLOAT || (*e)[component].shape() != mean.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "element has no float32 component ", component, " of shape ", mean.shape().DebugString()));
    }
    // Write a fresh tensor: the input's buffer may be shared.
    const Tensor& x = (*e)[component];
    Tensor y(DT_FLOAT, x.shape());
    const float* xp = x.data<float>();
    const float* mp = mean.data<float>();
    const float* ip = inv.data<float>();
    float* yp = y.data<float>();
    for (int64_t j = 0; j < y.NumElements(); ++j) yp[j] = (xp[j] - mp[j]) * ip[j];
    (*e)[component] = std::move(y);
    return absl::OkStatus();
  };
  return Map(std::move(dataset), std::move(fn),
             absl::StrFormat("Standardize(c=%d,%016x)", component, h));
}

absl::StatusOr<std::pair<DatasetPtr, DatasetPtr>> TrainTestSplit(DatasetPtr dataset,
                                                                 double test_fraction,
                                                                 uint64_t seed) {
  if (dataset == nullptr) return absl::InvalidArgumentError("TrainTestSplit: null dataset");
  if (!dataset->RandomAccess() || dataset->Cardinality() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TrainTestSplit: needs a finite random-access dataset, got ", dataset->DebugString()));
  }
  if (!(test_fraction >= 0.0 && test_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainTestSplit: test_fraction must be in [0, 1], got ", test_fraction));
  }
  const int64_t n = dataset->Cardinality();
  const int64_t n_test = static_cast<int64_t>(std::llround(static_cast<double>(n) * test_fraction));
  // Mark a seeded random subset of size n_test (partial Fisher-Yates).
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = Mix(seed ^ 0x7E57);
  for (int64_t i = 0; i < n_test; ++i) {
    state = Mix(state);
    const int64_t j =
        i + static_cast<int64_t>((static_cast<unsigned __int128>(state) * static_cast<uint64_t>(n - i)) >> 64);
    std::swap(perm[i], perm[j]);
  }
  std::vector<bool> is_test(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n_test; ++i) is_test[perm[i]] = true;
  std::vector<int64_t> train_idx, test_idx;
  for (int64_t i = 0; i < n; ++i) (is_test[i] ? test_idx : train_idx).push_back(i);
  const std::string tag = absl::StrCat("(fraction=", test_fraction, ",seed=", seed, ")");
  DatasetPtr train = std::make_shared<IndexSubsetDataset>(dataset, std::move(train_idx),
                                                          absl::StrCat("TrainSplit", tag));
  DatasetPtr test = std::make_shared<IndexSubsetDataset>(dataset, std::move(test_idx),
                                                         absl::StrCat("TestSplit", tag));
  return std::make_pair(std::move(train), std::move(test));
}

Example SliceRows(const Example& batch, int64_t begin, int64_t count) {
  Example out;
  for (const Tensor& t : batch) {
    DimVector dims(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
    dims[0] = count;
    Tensor part(t.dtype(), *TensorShape::FromDims(dims));
    const size_t row_bytes = t.dim_size(0) == 0 ? 0 : t.TotalBytes() / static_cast<size_t>(t.dim_size(0));
    if (count > 0 && row_bytes > 0) {
      std::memcpy(part.raw_data(), static_cast<const char*>(t.raw_data()) + begin * row_bytes,
                  static_cast<size_t>(count) * row_bytes);
    }
    out.push_back(std::move(part));
  }
  return out;
}

absl::StatusOr<std::vector<Example>> SplitBatch(const Example& batch, int num_replicas) {
  return SplitBatch(batch, num_replicas, 0, num_replicas);
}

absl::StatusOr<std::vector<Example>> SplitBatch(const Example& batch, int num_replicas, int first,
                                                int count) {
  if (num_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SplitBatch: num_replicas must be >= 1, got ", num_replicas));
  }
  if (first < 0 || count < 0 || first > num_replicas - count) {
    return absl::InvalidArgumentError(absl::StrCat("SplitBatch: parts [", first, ", ",
                                                   first + count, ") are not within the ",
                                                   num_replicas, " parts"));
  }
  if (batch.empty()) return absl::InvalidArgumentError("SplitBatch: empty batch");
  for (size_t c = 0; c < batch.size(); ++c) {
    if (batch[c].dims() < 1 || batch[c].dim_size(0) != batch[0].dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SplitBatch: component ", c, " has shape ", batch[c].shape().DebugString(),
          "; every component needs the batch size ", batch[0].dims() < 1 ? 0 : batch[0].dim_size(0),
          " as its first dimension"));
    }
  }
  const int64_t b = batch[0].dim_size(0);
  std::vector<Example> out(static_cast<size_t>(count));
  int64_t start = 0;
  for (int r = 0; r < first + count; ++r) {
    const int64_t rows = b / num_replicas + (r < b % num_replicas ? 1 : 0);
    if (r >= first) out[r - first] = SliceRows(batch, start, rows);
    start += rows;
  }
  return out;
}

}  // namespace data
}  // namespace strata
