#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "train/data/dataset.h"
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

// A Map that counts its calls, optionally sleeping in each.
DatasetPtr Counted(DatasetPtr in, std::atomic<int>* calls, int sleep_ms = 0) {
  return *Map(std::move(in), [calls, sleep_ms](Example*) {
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    calls->fetch_add(1);
    return absl::OkStatus();
  }, "counted");
}

bool WaitFor(const std::atomic<int>& v, int want) {
  for (int i = 0; i < 2000 && v.load() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return v.load() >= want;
}

TEST(PrefetchTest, SameSequenceAsWithout) {
  DatasetPtr base = *Repeat(*Batch(*Shuffle(Range(37), 3), 5), 3);
  EXPECT_EQ(AllIds(*Prefetch(base, 1)), AllIds(base));
  EXPECT_EQ(AllIds(*Prefetch(base, 16)), AllIds(base));
  EXPECT_EQ(AllIds(*Prefetch(*Prefetch(base, 2), 3)), AllIds(base));
  EXPECT_TRUE(absl::IsInvalidArgument(Prefetch(base, 0).status()));
}

// The producer fills the buffer before anyone asks, and no further.
TEST(PrefetchTest, FillsAheadInTheBackgroundUpToTheBufferSize) {
  std::atomic<int> calls{0};
  auto it = Iter(*Prefetch(Counted(Range(100), &calls), 4));
  ASSERT_TRUE(WaitFor(calls, 4)) << "the producer did not fill the buffer";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls.load(), 4) << "the producer ran past the buffer size";
  std::vector<Example> got = Drain(it.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Ids(got[1]), (std::vector<int64_t>{1}));
  ASSERT_TRUE(WaitFor(calls, 6));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls.load(), 6);
}

TEST(PrefetchTest, ErrorsArriveInOrderAndStick) {
  auto failing = *Map(Range(10), [](Example* e) {
    return *(*e)[0].data<int64_t>() == 3 ? absl::DataLossError("bad record 3") : absl::OkStatus();
  }, "fail3");
  auto it = Iter(*Prefetch(failing, 5));
  std::vector<Example> ok = Drain(it.get(), 3);
  ASSERT_EQ(ok.size(), 3u);
  Example e;
  bool end = false;
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::IsDataLoss(it->GetNext(&e, &end)));
  EXPECT_FALSE(it->SaveState().ok());
}

TEST(PrefetchTest, DestructionStopsABlockedOrBusyProducer) {
  std::atomic<int> calls{0};
  {
    auto full = Iter(*Prefetch(Counted(*Repeat(Range(3)), &calls), 2));
    ASSERT_TRUE(WaitFor(calls, 2));  // blocked on a full buffer
  }
  {
    auto busy = Iter(*Prefetch(Counted(Range(1000), &calls, 20), 8));
    Drain(busy.get(), 1);  // the producer is mid-sleep
  }
  {
    // Never consumed, and at the end of its input.
    auto done = Iter(*Prefetch(Range(2), 8));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  SUCCEED();
}

TEST(PrefetchTest, RestoreDiscardsTheBufferAndResumes) {
  DatasetPtr ds = *Prefetch(*Repeat(*Shuffle(Range(10), 9), 2), 6);
  auto ref = Iter(ds);
  std::vector<int64_t> ref_ids;
  for (const Example& e : Drain(ref.get())) ref_ids.push_back(Ids(e)[0]);
  ASSERT_EQ(ref_ids.size(), 20u);

  auto it = Iter(ds);
  Drain(it.get(), 13);
  const std::string state = *it->SaveState();
  Drain(it.get(), 4);  // move on, the buffer full of later elements
  ASSERT_TRUE(it->RestoreState(state).ok());
  std::vector<int64_t> rest;
  for (const Example& e : Drain(it.get())) rest.push_back(Ids(e)[0]);
  EXPECT_EQ(rest, std::vector<int64_t>(ref_ids.begin() + 13, ref_ids.end()));

  // State saved with one buffer size restores with another.
  auto other = Iter(*Prefetch(*Repeat(*Shuffle(Range(10), 9), 2), 1));
  ASSERT_TRUE(other->RestoreState(state).ok());
  EXPECT_EQ(Ids(Drain(other.get(), 1)[0])[0], ref_ids[13]);
}

}  // namespace
}  // namespace data
}  // namespace strata
