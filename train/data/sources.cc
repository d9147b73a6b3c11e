#include "train/data/sources.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata {
namespace data {
namespace {

class TensorSliceDataset : public RandomAccessDataset {
 public:
  TensorSliceDataset(std::vector<Tensor> components, std::string name)
      : components_(std::move(components)), name_(std::move(name)) {
    for (const Tensor& t : components_) {
      DimVector dims(t.shape().dim_sizes().begin() + 1, t.shape().dim_sizes().end());
      slice_shapes_.push_back(*TensorShape::FromDims(dims));
      slice_bytes_.push_back(slice_shapes_.back().num_elements() * DataTypeSize(t.dtype()));
    }
  }

  int64_t Cardinality() const override { return components_[0].dim_size(0); }

  absl::Status Get(int64_t index, Example* out) const override {
    if (index < 0 || index >= Cardinality()) {
      return absl::OutOfRangeError(absl::StrCat("index ", index, " outside ", DebugString()));
    }
    out->clear();
    for (size_t c = 0; c < components_.size(); ++c) {
      Tensor t(components_[c].dtype(), slice_shapes_[c]);
      if (slice_bytes_[c] > 0) {
        std::memcpy(t.raw_data(),
                    static_cast<const char*>(components_[c].raw_data()) + index * slice_bytes_[c],
                    slice_bytes_[c]);
      }
      out->push_back(std::move(t));
    }
    return absl::OkStatus();
  }

  std::string DebugString() const override { return name_; }

 private:
  const std::vector<Tensor> components_;
  const std::string name_;
  std::vector<TensorShape> slice_shapes_;  // const after construction
  std::vector<size_t> slice_bytes_;        // const after construction
};

// SplitMix64: a counter-based generator, so value (seed, i, k) needs no
// state and examples can be made in any order.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A standard normal for stream `stream`, draw `k` (Box-Muller on two
// uniforms in (0, 1]).
float Normal(uint64_t seed, uint64_t stream, uint64_t k) {
  const uint64_t base = Mix(seed ^ Mix(stream));
  const double u1 = (static_cast<double>(Mix(base + 2 * k) >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(Mix(base + 2 * k + 1) >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

class SyntheticDataset : public RandomAccessDataset {
 public:
  explicit SyntheticDataset(const SyntheticOptions& o) : o_(o) {
    // The teacher matrix uses stream 0; example i uses stream i + 1.
    w_.resize(static_cast<size_t>(o.num_classes * o.num_features));
    for (size_t k = 0; k < w_.size(); ++k) w_[k] = Normal(o.seed, 0, k);
  }

  int64_t Cardinality() const override { return o_.num_examples; }

  absl::Status Get(int64_t index, Example* out) const override {
    if (index < 0 || index >= o_.num_examples) {
      return absl::OutOfRangeError(absl::StrCat("index ", index, " outside ", DebugString()));
    }
    Tensor x(DT_FLOAT, TensorShape{o_.num_features});
    float* xp = x.data<float>();
    for (int64_t j = 0; j < o_.num_features; ++j) {
      xp[j] = Normal(o_.seed, static_cast<uint64_t>(index) + 1, static_cast<uint64_t>(j));
    }
    int32_t best = 0;
    double best_score = 0;
    for (int c = 0; c < o_.num_classes; ++c) {
      double score = 0;
      for (int64_t j = 0; j < o_.num_features; ++j) score += double{w_[c * o_.num_features + j]} * xp[j];
      if (c == 0 || score > best_score) {
        best = c;
        best_score = score;
      }
    }
    out->clear();
    out->push_back(std::move(x));
    out->push_back(Tensor::Scalar<int32_t>(best));
    return absl::OkStatus();
  }

  std::string DebugString() const override {
    return absl::StrCat("Synthetic(n=", o_.num_examples, ",d=", o_.num_features,
                        ",classes=", o_.num_classes, ",seed=", o_.seed, ")");
  }

 private:
  const SyntheticOptions o_;
  std::vector<float> w_;  // const after construction
};

}  // namespace

absl::StatusOr<DatasetPtr> FromTensors(std::vector<Tensor> components, std::string name) {
  if (components.empty()) return absl::InvalidArgumentError("FromTensors: no components");
  std::vector<std::string> parts;
  for (size_t c = 0; c < components.size(); ++c) {
    const Tensor& t = components[c];
    if (!t.IsInitialized() || !DataTypeCanUseMemcpy(t.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromTensors: component ", c, " is not an initialized numeric tensor"));
    }
    if (t.dims() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FromTensors: component ", c, " is a scalar; each needs a leading example dimension"));
    }
    if (t.dim_size(0) != components[0].dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FromTensors: component ", c, " has ", t.dim_size(0), " examples (shape ",
          t.shape().DebugString(), ") but component 0 has ", components[0].dim_size(0)));
    }
    parts.push_back(absl::StrCat(DataTypeString(t.dtype()), t.shape().DebugString()));
  }
  if (name.empty()) name = absl::StrCat("Tensors(", absl::StrJoin(parts, ","), ")");
  return DatasetPtr(std::make_shared<TensorSliceDataset>(std::move(components), std::move(name)));
}

absl::StatusOr<DatasetPtr> Synthetic(const SyntheticOptions& o) {
  if (o.num_examples < 0 || o.num_features < 1 || o.num_classes < 1 ||
      o.num_features > (int64_t{1} << 24) || o.num_classes > (1 << 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Synthetic: need num_examples >= 0, 1 <= num_features <= 2^24, 1 <= num_classes <= 2^16; got ",
        o.num_examples, ", ", o.num_features, ", ", o.num_classes));
  }
  return DatasetPtr(std::make_shared<SyntheticDataset>(o));
}

}  // namespace data
}  // namespace strata
