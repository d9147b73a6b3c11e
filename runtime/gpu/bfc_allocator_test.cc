#include "runtime/gpu/bfc_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

constexpr size_t kKiB = 1024;

// Host regions, counted; refuses once `refuse_above` bytes are out.
class CountingSubAllocator : public SubAllocator {
 public:
  struct Counts {
    std::atomic<int> allocs{0};
    std::atomic<int> frees{0};
    std::atomic<size_t> out{0};
    size_t refuse_above = 0;  // 0: never refuse
  };
  explicit CountingSubAllocator(Counts* c) : c_(c) {}
  void* Alloc(size_t bytes) override {
    if (c_->refuse_above > 0 && c_->out + bytes > c_->refuse_above) return nullptr;
    ++c_->allocs;
    c_->out += bytes;
    return host_.Alloc(bytes);
  }
  void Free(void* p, size_t bytes) override {
    ++c_->frees;
    c_->out -= bytes;
    host_.Free(p, bytes);
  }

 private:
  Counts* c_;
  HostSubAllocator host_;
};

std::unique_ptr<BfcAllocator> Make(CountingSubAllocator::Counts* c, size_t region,
                                   size_t limit = 0) {
  BfcAllocator::Options o;
  o.initial_region_bytes = region;
  o.bytes_limit = limit;
  return std::make_unique<BfcAllocator>(std::make_unique<CountingSubAllocator>(c), "test_bfc", o);
}

TEST(BfcAllocatorTest, ChoosesTheSmallestFreeChunkThatFits) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB);
  void* p1 = a->AllocateRaw(64, 1 * kKiB);
  void* big = a->AllocateRaw(64, 4 * kKiB);
  void* p2 = a->AllocateRaw(64, 1 * kKiB);
  void* mid = a->AllocateRaw(64, 2 * kKiB);
  void* p3 = a->AllocateRaw(64, 1 * kKiB);
  ASSERT_TRUE(p1 && big && p2 && mid && p3);
  // Two holes between used chunks (4 KiB and 2 KiB) and the region's tail.
  a->DeallocateRaw(big, 4 * kKiB);
  a->DeallocateRaw(mid, 2 * kKiB);
  EXPECT_EQ(a->AllocateRaw(64, 2 * kKiB), mid) << "the 2 KiB hole is the best fit";
  EXPECT_EQ(a->AllocateRaw(64, 3 * kKiB), big) << "the 4 KiB hole is the best fit for 3 KiB";
  EXPECT_EQ(c.allocs, 1) << "everything fitted in the first region";
}

TEST(BfcAllocatorTest, FreeingEverythingCoalescesIntoOneChunkPerRegion) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 256 * kKiB);
  std::mt19937 rng(7);
  std::vector<std::pair<void*, size_t>> live;
  for (int i = 0; i < 200; ++i) {
    const size_t n = 1 + rng() % 1000;
    void* p = a->AllocateRaw(64, n);
    ASSERT_NE(p, nullptr);
    live.emplace_back(p, n);
  }
  BfcAllocator::Stats mid = a->GetDetailedStats();
  EXPECT_EQ(mid.num_regions, 1);
  std::shuffle(live.begin(), live.end(), rng);
  for (auto [p, n] : live) a->DeallocateRaw(p, n);
  BfcAllocator::Stats s = a->GetDetailedStats();
  EXPECT_EQ(s.base.bytes_in_use, 0);
  EXPECT_EQ(s.num_free_chunks, s.num_regions);
  EXPECT_EQ(s.largest_free_chunk, static_cast<int64_t>(256 * kKiB));
  // The whole region can be handed out in one piece again, without a new one.
  void* whole = a->AllocateRaw(64, 256 * kKiB);
  EXPECT_NE(whole, nullptr);
  EXPECT_EQ(c.allocs, 1);
  a->DeallocateRaw(whole, 256 * kKiB);
}

TEST(BfcAllocatorTest, FragmentedRegionCannotServeABigRequestUntilNeighboursAreFreed) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB, /*limit=*/64 * kKiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(a->AllocateRaw(64, 4 * kKiB));
  for (void* p : blocks) ASSERT_NE(p, nullptr);
  // Every other block free: 32 KiB free, but no two adjacent.
  for (int i = 0; i < 16; i += 2) a->DeallocateRaw(blocks[i], 4 * kKiB);
  BfcAllocator::Stats s = a->GetDetailedStats();
  EXPECT_EQ(s.num_free_chunks, 8);
  EXPECT_EQ(s.largest_free_chunk, static_cast<int64_t>(4 * kKiB));
  EXPECT_EQ(a->AllocateRaw(64, 8 * kKiB), nullptr) << "fragmented and at the limit";
  // Freeing block 1 joins blocks 0, 1 and 2 into one 12 KiB chunk.
  a->DeallocateRaw(blocks[1], 4 * kKiB);
  EXPECT_EQ(a->GetDetailedStats().largest_free_chunk, static_cast<int64_t>(12 * kKiB));
  EXPECT_EQ(a->AllocateRaw(64, 8 * kKiB), blocks[0]);
}

TEST(BfcAllocatorTest, LimitBoundsReservedMemory) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB, /*limit=*/256 * kKiB);
  EXPECT_EQ(a->GetStats().bytes_limit, static_cast<int64_t>(256 * kKiB));
  EXPECT_EQ(a->AllocateRaw(64, 257 * kKiB), nullptr);
  EXPECT_EQ(c.allocs, 0) << "a request over the limit never reaches the SubAllocator";
  std::vector<void*> ps;
  for (void* p; (p = a->AllocateRaw(64, 32 * kKiB)) != nullptr;) ps.push_back(p);
  EXPECT_EQ(ps.size(), 8u) << "256 KiB holds eight 32 KiB chunks";
  EXPECT_LE(c.out.load(), 256 * kKiB);
  for (void* p : ps) a->DeallocateRaw(p, 32 * kKiB);
}

TEST(BfcAllocatorTest, WhollyFreeRegionsAreReturnedToMakeRoomForALargerOne) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 256 * kKiB, /*limit=*/kKiB * kKiB);
  void* p = a->AllocateRaw(64, 200 * kKiB);
  ASSERT_NE(p, nullptr);
  a->DeallocateRaw(p, 200 * kKiB);
  // 256 KiB reserved + 900 KiB would pass the 1 MiB limit: the free region
  // goes back first.
  void* q = a->AllocateRaw(64, 900 * kKiB);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(c.frees, 1);
  EXPECT_EQ(a->GetDetailedStats().num_regions, 1);
  a->DeallocateRaw(q, 900 * kKiB);
}

TEST(BfcAllocatorTest, SubAllocatorRefusalGivesNullptr) {
  CountingSubAllocator::Counts c;
  c.refuse_above = 128 * kKiB;
  auto a = Make(&c, 64 * kKiB);
  void* p = a->AllocateRaw(64, 100 * kKiB);  // a 100 KiB region: fits
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(a->AllocateRaw(64, 100 * kKiB), nullptr) << "the SubAllocator has no more";
  a->DeallocateRaw(p, 100 * kKiB);
}

TEST(BfcAllocatorTest, StatsCountRoundedChunks) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB);
  void* p = a->AllocateRaw(64, 100);
  void* q = a->AllocateRaw(64, 1000);
  AllocatorStats s = a->GetStats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.bytes_in_use, 256 + 1024);
  EXPECT_EQ(s.largest_alloc_size, 1024);
  a->DeallocateRaw(q, 1000);
  s = a->GetStats();
  EXPECT_EQ(s.bytes_in_use, 256);
  EXPECT_EQ(s.peak_bytes_in_use, 256 + 1024);
  EXPECT_EQ(s.bytes_limit, 0);
  a->DeallocateRaw(p, 100);
  EXPECT_EQ(a->GetDetailedStats().bytes_reserved, static_cast<int64_t>(64 * kKiB));
}

TEST(BfcAllocatorTest, ZeroBytesAndAlignment) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB);
  void* z1 = a->AllocateRaw(64, 0);
  void* z2 = a->AllocateRaw(64, 0);
  ASSERT_NE(z1, nullptr);
  EXPECT_NE(z1, z2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z1) % BfcAllocator::kMinAllocationSize, 0u);
  EXPECT_EQ(a->AllocateRaw(4096, 16), nullptr) << "alignment above 256 is not offered";
  a->DeallocateRaw(z1, 0);
  a->DeallocateRaw(z2, 0);
  a->DeallocateRaw(nullptr, 0);
}

TEST(BfcAllocatorTest, RegionsGrowAndLiveChunksNeverOverlap) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 16 * kKiB);
  std::mt19937 rng(11);
  std::map<char*, size_t> live;  // address -> rounded size
  for (int step = 0; step < 3000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t n = 1 + rng() % (8 * kKiB);
      char* p = static_cast<char*>(a->AllocateRaw(64, n));
      ASSERT_NE(p, nullptr);
      const size_t r = (n + 255) / 256 * 256;
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + r, next->first) << "overlaps the next chunk";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, p) << "overlaps the previous chunk";
      }
      live[p] = r;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a->DeallocateRaw(it->first, it->second);
      live.erase(it);
    }
  }
  EXPECT_GT(a->GetDetailedStats().num_regions, 1) << "16 KiB could not hold the working set";
  for (auto [p, n] : live) a->DeallocateRaw(p, n);
  BfcAllocator::Stats s = a->GetDetailedStats();
  EXPECT_EQ(s.num_free_chunks, s.num_regions);
}

TEST(BfcAllocatorTest, ManyThreadsKeepTheirBuffersToThemselves) {
  CountingSubAllocator::Counts c;
  auto a = Make(&c, 64 * kKiB);
  constexpr int kThreads = 8;
  std::atomic<int> corrupt{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.size() < 16 && rng() % 2 == 0) {
          const size_t n = 1 + rng() % (4 * kKiB);
          auto* p = static_cast<unsigned char*>(a->AllocateRaw(64, n));
          if (p == nullptr) {
            ++failed;
            continue;
          }
          std::memset(p, t + 1, n);
          mine.emplace_back(p, n);
        } else if (!mine.empty()) {
          auto [p, n] = mine.back();
          mine.pop_back();
          for (size_t k = 0; k < n; ++k) {
            if (p[k] != t + 1) {
              ++corrupt;
              break;
            }
          }
          a->DeallocateRaw(p, n);
        }
      }
      for (auto [p, n] : mine) a->DeallocateRaw(p, n);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupt, 0) << "a buffer was handed to two threads at once";
  EXPECT_EQ(failed, 0);
  BfcAllocator::Stats s = a->GetDetailedStats();
  EXPECT_EQ(s.base.bytes_in_use, 0);
  EXPECT_EQ(s.num_free_chunks, s.num_regions);
}

}  // namespace
}  // namespace strata
