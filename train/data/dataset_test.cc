#include "train/data/dataset.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "train/data/sources.h"
#include "train/data/test_util.h"
#include "train/data/transforms.h"

namespace strata {
namespace data {
namespace {

using testing::AllIds;
using testing::Drain;
using testing::Ids;
using testing::Iter;
using testing::Range;
using testing::SameExample;

std::vector<int64_t> Iota(int64_t lo, int64_t hi, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t i = lo; i < hi; i += step) v.push_back(i);
  return v;
}

TEST(SourcesTest, FromTensorsSlicesEveryComponent) {
  DatasetPtr ds = Range(5);
  EXPECT_EQ(ds->Cardinality(), 5);
  EXPECT_TRUE(ds->RandomAccess());
  Example e;
  ASSERT_TRUE(ds->Get(3, &e).ok());
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].shape(), TensorShape());
  EXPECT_EQ(*e[0].data<int64_t>(), 3);
  EXPECT_EQ(e[1].shape(), TensorShape{2});
  EXPECT_EQ(e[1].data<float>()[1], -3.0f);
  EXPECT_TRUE(absl::IsOutOfRange(ds->Get(5, &e)));
  EXPECT_EQ(AllIds(ds), Iota(0, 5));
}

TEST(SourcesTest, FromTensorsRejectsBadComponents) {
  EXPECT_TRUE(absl::IsInvalidArgument(FromTensors({}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FromTensors({Tensor::Scalar<float>(1)}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FromTensors({Tensor()}).status()));
  absl::Status s =
      FromTensors({Tensor::FromVector<float>({1, 2, 3}), Tensor::FromVector<int32_t>({1, 2})}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "component 1")) << s;
}

TEST(SourcesTest, SyntheticIsDeterministicAndLabelled) {
  SyntheticOptions o;
  o.num_examples = 300;
  o.num_features = 5;
  o.num_classes = 3;
  o.seed = 11;
  auto a = Synthetic(o), b = Synthetic(o);
  ASSERT_TRUE(a.ok() && b.ok());
  o.seed = 12;
  auto c = Synthetic(o);
  ASSERT_TRUE(c.ok());
  std::set<int32_t> labels;
  double sum = 0, sumsq = 0;
  int differs = 0;
  for (int64_t i = 0; i < 300; ++i) {
    Example ea, eb, ec;
    ASSERT_TRUE((*a)->Get(i, &ea).ok() && (*b)->Get(i, &eb).ok() && (*c)->Get(i, &ec).ok());
    EXPECT_TRUE(SameExample(ea, eb));
    differs += !SameExample(ea, ec);
    ASSERT_EQ(ea[0].dtype(), DT_FLOAT);
    ASSERT_EQ(ea[0].shape(), TensorShape{5});
    ASSERT_EQ(ea[1].dtype(), DT_INT32);
    ASSERT_EQ(ea[1].shape(), TensorShape());
    labels.insert(*ea[1].data<int32_t>());
    for (float v : ea[0].span<float>()) {
      sum += v;
      sumsq += double{v} * v;
    }
  }
  EXPECT_EQ(labels, (std::set<int32_t>{0, 1, 2}));
  EXPECT_GT(differs, 290);
  EXPECT_NEAR(sum / 1500, 0.0, 0.1);       // N(0, 1) features
  EXPECT_NEAR(sumsq / 1500, 1.0, 0.15);
  o.num_features = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Synthetic(o).status()));
}

TEST(TransformsTest, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  auto s1 = Shuffle(Range(50), 7);
  ASSERT_TRUE(s1.ok());
  std::vector<int64_t> e0 = AllIds(*s1);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(0, 50));
  EXPECT_NE(e0, Iota(0, 50));
  EXPECT_EQ(AllIds(*Shuffle(Range(50), 7)), e0);   // same seed, same order
  EXPECT_NE(AllIds(*Shuffle(Range(50), 8)), e0);   // another seed
  // Epoch 1 (the second pass of a Repeat) is a different permutation.
  auto rep = Repeat(*s1, 2);
  ASSERT_TRUE(rep.ok());
  std::vector<int64_t> both = AllIds(*rep);
  ASSERT_EQ(both.size(), 100u);
  std::vector<int64_t> e1(both.begin() + 50, both.end());
  EXPECT_EQ(std::vector<int64_t>(both.begin(), both.begin() + 50), e0);
  EXPECT_NE(e1, e0);
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, Iota(0, 50));

  auto batched = Batch(Range(4), 2);
  ASSERT_TRUE(batched.ok());
  absl::Status s = Shuffle(*batched, 1).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "Batch")) << s;
}

TEST(TransformsTest, BatchStacksAndHandlesTheRemainder) {
  auto b = Batch(Range(7), 3);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Cardinality(), 3);
  auto it = Iter(*b);
  std::vector<Example> batches = Drain(it.get());
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0][0].shape(), TensorShape{3});
  EXPECT_EQ(batches[0][1].shape(), (TensorShape{3, 2}));
  EXPECT_EQ(Ids(batches[1]), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(batches[1][1].data<float>()[5], -5.0f);
  EXPECT_EQ(Ids(batches[2]), (std::vector<int64_t>{6}));

  auto d = Batch(Range(7), 3, /*drop_remainder=*/true);
  EXPECT_EQ((*d)->Cardinality(), 2);
  EXPECT_EQ(AllIds(*d), Iota(0, 6));
  EXPECT_TRUE(absl::IsInvalidArgument(Batch(Range(3), 0).status()));

  // Elements of different shapes cannot be stacked.
  auto ragged = Map(Range(4), [](Example* e) {
    if (*(*e)[0].data<int64_t>() == 2) (*e)[1] = Tensor::FromVector<float>({1, 2, 3});
    return absl::OkStatus();
  }, "ragged");
  auto rb = Batch(*ragged, 4);
  auto rit = Iter(*rb);
  Example out;
  bool end;
  absl::Status s = rit->GetNext(&out, &end);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "component 1")) << s;
}

TEST(TransformsTest, RepeatCountsForeverAndStopsOnEmptyInput) {
  EXPECT_EQ(AllIds(*Repeat(Range(3), 2)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ((*Repeat(Range(3), 2))->Cardinality(), 6);
  EXPECT_TRUE(AllIds(*Repeat(Range(3), 0)).empty());
  auto forever = Repeat(Range(3));
  EXPECT_EQ((*forever)->Cardinality(), kInfiniteCardinality);
  EXPECT_EQ(AllIds(*Take(*forever, 7)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_TRUE(AllIds(*Repeat(Range(0))).empty());
  EXPECT_TRUE(absl::IsInvalidArgument(Repeat(Range(1), -2).status()));
}

TEST(TransformsTest, TakeSkipShardRandomAccessAndStreaming) {
  EXPECT_EQ(AllIds(*Take(Range(10), 3)), Iota(0, 3));
  EXPECT_EQ(AllIds(*Skip(Range(10), 7)), Iota(7, 10));
  EXPECT_EQ(AllIds(*Take(Range(2), 5)), Iota(0, 2));
  EXPECT_TRUE(AllIds(*Skip(Range(2), 5)).empty());
  EXPECT_EQ((*Skip(Range(2), 5))->Cardinality(), 0);
  EXPECT_EQ(AllIds(*Shard(Range(10), 3, 1)), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ((*Shard(Range(10), 3, 0))->Cardinality(), 4);
  EXPECT_TRUE((*Shard(Range(10), 3, 0))->RandomAccess());
  // The shards partition the data.
  std::vector<int64_t> all;
  for (int i = 0; i < 3; ++i) {
    auto part = AllIds(*Shard(Range(10), 3, i));
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Iota(0, 10));
  // Streaming versions (over a Repeat, which has no random access).
  auto rep = *Repeat(Range(5), 2);
  EXPECT_FALSE((*Shard(rep, 4, 3))->RandomAccess());
  EXPECT_EQ(AllIds(*Shard(rep, 4, 3)), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(AllIds(*Skip(rep, 8)), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(AllIds(*Take(rep, 6)), (std::vector<int64_t>{0, 1, 2, 3, 4, 0}));
  EXPECT_TRUE(absl::IsInvalidArgument(Shard(Range(3), 2, 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Take(Range(3), -1).status()));
}

TEST(TransformsTest, MapAppliesAndReportsErrors) {
  auto doubled = Map(Range(4), [](Example* e) {
    *(*e)[0].data<int64_t>() *= 2;
    return absl::OkStatus();
  }, "double");
  ASSERT_TRUE(doubled.ok());
  EXPECT_TRUE((*doubled)->RandomAccess());
  EXPECT_EQ(AllIds(*Shuffle(*doubled, 3)).size(), 4u);
  EXPECT_EQ(AllIds(*doubled), (std::vector<int64_t>{0, 2, 4, 6}));
  auto failing = Map(Range(4), [](Example* e) {
    return *(*e)[0].data<int64_t>() == 2 ? absl::InvalidArgumentError("bad two") : absl::OkStatus();
  }, "fail");
  auto it = Iter(*failing);
  Example e;
  bool end;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "Map(fail)")) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(Map(Range(1), nullptr, "x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Map(Range(1), [](Example*) { return absl::OkStatus(); }, "").status()));
}

// The training pipeline shape: shard, shuffle, batch, repeat, prefetch.
DatasetPtr TrainingPipeline(bool prefetch) {
  DatasetPtr ds = *Shard(Range(103), 2, 1);  // 51 examples
  ds = *Shuffle(ds, 1234);
  ds = *Batch(ds, 8, /*drop_remainder=*/false);  // 7 batches per epoch, the last of 3
  ds = *Repeat(ds, 4);
  if (prefetch) ds = *Prefetch(ds, 3);
  return ds;
}

// Restoring a state saved after k batches continues with exactly the
// batches an uninterrupted run produces after k, for every k (across epoch
// boundaries and at the very end).
TEST(IteratorStateTest, RestoreContinuesTheSameSequenceAtEveryPosition) {
  for (bool prefetch : {false, true}) {
    auto ref_it = Iter(TrainingPipeline(prefetch));
    std::vector<Example> ref;
    std::vector<std::string> states;
    while (true) {
      states.push_back(*ref_it->SaveState());
      Example e;
      bool end = false;
      ASSERT_TRUE(ref_it->GetNext(&e, &end).ok());
      if (end) break;
      ref.push_back(std::move(e));
    }
    ASSERT_EQ(ref.size(), 28u);
    for (size_t k = 0; k < states.size(); ++k) {
      // A fresh pipeline, as in a restarted process.
      auto it = Iter(TrainingPipeline(prefetch));
      Drain(it.get(), 2);  // its own position does not matter
      ASSERT_TRUE(it->RestoreState(states[k]).ok()) << k;
      std::vector<Example> rest = Drain(it.get());
      ASSERT_EQ(rest.size(), ref.size() - k) << "prefetch " << prefetch << " k " << k;
      for (size_t i = 0; i < rest.size(); ++i) {
        EXPECT_TRUE(SameExample(rest[i], ref[k + i])) << "prefetch " << prefetch << " k " << k << " i " << i;
      }
    }
  }
}

TEST(IteratorStateTest, StreamingTakeSkipShardRestore) {
  auto make = [] {
    DatasetPtr ds = *Repeat(*Shuffle(Range(9), 5), 3);
    ds = *Skip(ds, 2);
    ds = *Shard(ds, 2, 0);
    return *Take(ds, 10);
  };
  auto ref_it = Iter(make());
  std::vector<Example> ref = Drain(ref_it.get());
  ASSERT_EQ(ref.size(), 10u);
  for (size_t k = 0; k <= ref.size(); ++k) {
    auto a = Iter(make());
    Drain(a.get(), static_cast<int64_t>(k));
    std::string state = *a->SaveState();
    auto b = Iter(make());
    ASSERT_TRUE(b->RestoreState(state).ok());
    std::vector<Example> rest = Drain(b.get());
    ASSERT_EQ(rest.size(), ref.size() - k);
    for (size_t i = 0; i < rest.size(); ++i) EXPECT_TRUE(SameExample(rest[i], ref[k + i]));
  }
}

TEST(IteratorStateTest, RejectsForeignOrMalformedStateAndKeepsPosition) {
  auto it = Iter(TrainingPipeline(false));
  Drain(it.get(), 3);
  const std::string state = *it->SaveState();
  Example next_before;
  {
    auto probe = Iter(TrainingPipeline(false));
    ASSERT_TRUE(probe->RestoreState(state).ok());
    next_before = Drain(probe.get(), 1)[0];
  }
  // Another pipeline (different seed) refuses the state.
  DatasetPtr other = *Repeat(*Batch(*Shuffle(*Shard(Range(103), 2, 1), 999), 8), 4);
  auto oit = Iter(other);
  absl::Status s = oit->RestoreState(state);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "different pipeline")) << s;
  // Every truncation and a byte flip of the payload are refused or, if the
  // bytes still decode, never crash; a refused restore leaves the position.
  for (size_t n = 0; n < state.size(); ++n) {
    EXPECT_FALSE(it->RestoreState(state.substr(0, n)).ok()) << n;
  }
  std::string bad = state;
  bad.back() = static_cast<char>(0xFF);  // an unterminated varint
  EXPECT_TRUE(absl::IsInvalidArgument(it->RestoreState(bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(it->RestoreState(state + "x")));
  EXPECT_TRUE(SameExample(Drain(it.get(), 1)[0], next_before));
}

}  // namespace
}  // namespace data
}  // namespace strata
