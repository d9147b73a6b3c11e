// Helpers for the input pipeline tests: small datasets and comparisons.
#ifndef STRATA_TRAIN_DATA_TEST_UTIL_H_
#define STRATA_TRAIN_DATA_TEST_UTIL_H_

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "train/data/dataset.h"
#include "train/data/sources.h"

namespace strata {
namespace data {
namespace testing {

// `name` in the test's scratch directory (TEST_TMPDIR, else /tmp).
inline std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/", name);
}

// Element i is (int64 scalar i, float [2] {i, -i}).
inline DatasetPtr Range(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> feats;
  for (int64_t i = 0; i < n; ++i) {
    feats.push_back(static_cast<float>(i));
    feats.push_back(static_cast<float>(-i));
  }
  auto ds = FromTensors({Tensor::FromVector<int64_t>(ids), Tensor::FromVector<float>(feats, TensorShape{n, 2})});
  EXPECT_TRUE(ds.ok()) << ds.status();
  return *ds;
}

// The ids of component 0 (int64, any shape) of an element or batch.
inline std::vector<int64_t> Ids(const Example& e) {
  const Tensor& t = e.at(0);
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.NumElements());
}

inline bool SameExample(const Example& a, const Example& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].TotalBytes()) != 0) {
      return false;
    }
  }
  return true;
}

// Up to `max` elements (all if max < 0) from `it`.
inline std::vector<Example> Drain(DatasetIterator* it, int64_t max = -1) {
  std::vector<Example> out;
  while (max < 0 || static_cast<int64_t>(out.size()) < max) {
    Example e;
    bool end = false;
    absl::Status s = it->GetNext(&e, &end);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok() || end) break;
    out.push_back(std::move(e));
  }
  return out;
}

inline std::unique_ptr<DatasetIterator> Iter(const DatasetPtr& ds) {
  auto it = DatasetIterator::Create(ds);
  EXPECT_TRUE(it.ok()) << it.status();
  return std::move(*it);
}

// All ids of a finite dataset, flattened.
inline std::vector<int64_t> AllIds(const DatasetPtr& ds) {
  std::vector<int64_t> ids;
  auto it = Iter(ds);
  for (const Example& e : Drain(it.get())) {
    for (int64_t id : Ids(e)) ids.push_back(id);
  }
  return ids;
}

}  // namespace testing
}  // namespace data
}  // namespace strata

#endif  // STRATA_TRAIN_DATA_TEST_UTIL_H_
