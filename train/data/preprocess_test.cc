#include "train/data/preprocess.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"
#include "train/data/sources.h"
#include "train/data/test_util.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

using testing::AllIds;
using testing::Drain;
using testing::Iter;
using testing::Range;

// Features [n, 3]: column 0 = i, column 1 = 10 - 2 i, column 2 = 7 (constant).
DatasetPtr Table(int64_t n) {
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.insert(x.end(), {static_cast<float>(i), static_cast<float>(10 - 2 * i), 7.0f});
    y.push_back(static_cast<int32_t>(i % 2));
  }
  return *FromTensors({Tensor::FromVector<float>(x, TensorShape{n, 3}), Tensor::FromVector<int32_t>(y)});
}

TEST(PreprocessTest, FeatureStatsMatchClosedForm) {
  auto stats = ComputeFeatureStats(Table(5));
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->mean.shape(), TensorShape{3});
  // Column 0: 0..4, mean 2, population variance 2.
  EXPECT_FLOAT_EQ(stats->mean.data<float>()[0], 2.0f);
  EXPECT_FLOAT_EQ(stats->stddev.data<float>()[0], std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(stats->mean.data<float>()[1], 6.0f);
  EXPECT_FLOAT_EQ(stats->stddev.data<float>()[1], 2 * std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(stats->mean.data<float>()[2], 7.0f);
  EXPECT_FLOAT_EQ(stats->stddev.data<float>()[2], 0.0f);

  EXPECT_TRUE(absl::IsInvalidArgument(ComputeFeatureStats(Table(5), 1).status()));  // int32
  EXPECT_TRUE(absl::IsInvalidArgument(ComputeFeatureStats(Table(5), 5).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ComputeFeatureStats(*Repeat(Table(5))).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ComputeFeatureStats(*Take(Table(5), 0)).status()));
}

TEST(PreprocessTest, StandardizeGivesZeroMeanUnitVarianceAndZeroForConstants) {
  DatasetPtr t = Table(9);
  auto stats = ComputeFeatureStats(t);
  ASSERT_TRUE(stats.ok());
  auto z = Standardize(t, *stats);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE((*z)->RandomAccess());
  auto zstats = ComputeFeatureStats(*z);
  ASSERT_TRUE(zstats.ok());
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(zstats->mean.data<float>()[j], 0.0f, 1e-6);
    EXPECT_NEAR(zstats->stddev.data<float>()[j], 1.0f, 1e-6);
  }
  auto it = Iter(*z);
  for (const Example& e : Drain(it.get())) EXPECT_EQ(e[0].data<float>()[2], 0.0f);
  // The input is not modified (its buffers may be shared).
  Example raw;
  ASSERT_TRUE(t->Get(3, &raw).ok());
  EXPECT_EQ(raw[0].data<float>()[0], 3.0f);
  // An element of another shape is an error.
  FeatureStats wrong{Tensor::FromVector<float>({0, 0}), Tensor::FromVector<float>({1, 1})};
  auto bad = Iter(*Standardize(t, wrong));
  Example e;
  bool end;
  EXPECT_TRUE(absl::IsInvalidArgument(bad->GetNext(&e, &end)));
}

TEST(PreprocessTest, TrainTestSplitIsADisjointCoverFixedBySeed) {
  auto split = TrainTestSplit(Range(100), 0.25, 42);
  ASSERT_TRUE(split.ok()) << split.status();
  std::vector<int64_t> train = AllIds(split->first), test = AllIds(split->second);
  EXPECT_EQ(train.size(), 75u);
  EXPECT_EQ(test.size(), 25u);
  EXPECT_TRUE(std::is_sorted(train.begin(), train.end()));
  std::vector<int64_t> all = train;
  all.insert(all.end(), test.begin(), test.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(all[i], i);
  EXPECT_EQ(AllIds(TrainTestSplit(Range(100), 0.25, 42)->second), test);
  EXPECT_NE(AllIds(TrainTestSplit(Range(100), 0.25, 43)->second), test);
  EXPECT_NE(test, std::vector<int64_t>(train.begin(), train.begin() + 25));
  EXPECT_TRUE(TrainTestSplit(Range(10), 0.0, 1)->second->Cardinality() == 0);
  EXPECT_TRUE(absl::IsInvalidArgument(TrainTestSplit(Range(10), 1.5, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(TrainTestSplit(*Batch(Range(10), 2), 0.5, 1).status()));
}

TEST(PreprocessTest, SplitBatchGivesNearlyEqualConsecutiveParts) {
  auto batch = Drain(Iter(*Batch(Range(10), 10)).get())[0];
  auto parts = SplitBatch(batch, 4);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 4u);
  std::vector<std::vector<int64_t>> want = {{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(testing::Ids((*parts)[r]), want[r]) << r;
    EXPECT_EQ((*parts)[r][1].shape(), (TensorShape{static_cast<int64_t>(want[r].size()), 2}));
    EXPECT_EQ((*parts)[r][1].data<float>()[1], -static_cast<float>(want[r][0]));
  }
  EXPECT_EQ((*SplitBatch(batch, 1))[0][0].shape(), TensorShape{10});
  EXPECT_TRUE(absl::IsInvalidArgument(SplitBatch(batch, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      SplitBatch({Tensor::FromVector<float>({1, 2}), Tensor::FromVector<float>({1})}, 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(SplitBatch({Tensor::Scalar<float>(1)}, 2).status()));
}

TEST(PreprocessTest, SplitBatchRangeGivesThoseOfTheFullSplit) {
  auto batch = Drain(Iter(*Batch(Range(10), 10)).get())[0];
  auto parts = SplitBatch(batch, 4, 2, 2);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(testing::Ids((*parts)[0]), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(testing::Ids((*parts)[1]), (std::vector<int64_t>{8, 9}));
  auto middle = SplitBatch(batch, 4, 1, 1);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(testing::Ids((*middle)[0]), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(absl::IsInvalidArgument(SplitBatch(batch, 4, 3, 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(SplitBatch(batch, 4, -1, 1).status()));
}

}  // namespace
}  // namespace data
}  // namespace strata
