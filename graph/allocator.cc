#include "graph/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "base/mutex.h"

namespace strata {

namespace {
void RaiseTo(std::atomic<int64_t>& v, int64_t x) {
  int64_t cur = v.load(std::memory_order_relaxed);
  while (x > cur && !v.compare_exchange_weak(cur, x, std::memory_order_relaxed)) {
  }
}
}  // namespace

namespace {
constexpr size_t kPage = 4096;
}  // namespace

TrackingCpuAllocator::~TrackingCpuAllocator() {
  MutexLock l(&cache_mu_);
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) std::free(p);
  }
}

void* TrackingCpuAllocator::AllocateRaw(size_t alignment, size_t bytes) {
  if (alignment < kTensorAlignment) alignment = kTensorAlignment;
  const int64_t n = static_cast<int64_t>(bytes);
  const int64_t in_use = bytes_in_use_.fetch_add(n, std::memory_order_relaxed) + n;
  if (bytes_limit_ > 0 && in_use > bytes_limit_) {
    bytes_in_use_.fetch_sub(n, std::memory_order_relaxed);
    return nullptr;
  }
  void* p = nullptr;
  if (bytes >= kCacheMinBytes && alignment <= kPage) {
    // Page-aligned, page-rounded blocks, reused by size.
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    {
      MutexLock l(&cache_mu_);
      auto it = cache_.find(rounded);
      if (it != cache_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= rounded;
      }
    }
    if (p == nullptr && rounded >= kHugePageBytes) {
      // posix_memalign, as aligned_alloc wants the size a multiple of the
      // alignment. Only whole huge pages are advised: the tail keeps small
      // pages, so no memory is spent beyond the request. A hint: where
      // transparent huge pages are off it changes nothing.
      if (posix_memalign(&p, kHugePageBytes, rounded) != 0) p = nullptr;
      if (p != nullptr) (void)madvise(p, rounded / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
    }
    if (p == nullptr) p = std::aligned_alloc(kPage, rounded);
  } else {
    // aligned_alloc wants a size that is a multiple of the alignment.
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  }
  if (p == nullptr) {
    bytes_in_use_.fetch_sub(n, std::memory_order_relaxed);
    return nullptr;
  }
  num_allocs_.fetch_add(1, std::memory_order_relaxed);
  RaiseTo(peak_bytes_in_use_, in_use);
  RaiseTo(largest_alloc_size_, n);
  return p;
}

void TrackingCpuAllocator::DeallocateRaw(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  bytes_in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (bytes >= kCacheMinBytes) {
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    MutexLock l(&cache_mu_);
    if (cached_bytes_ + rounded <= kCacheMaxBytes) {
      cache_[rounded].push_back(ptr);
      cached_bytes_ += rounded;
      return;
    }
  }
  std::free(ptr);
}

AllocatorStats TrackingCpuAllocator::GetStats() const {
  AllocatorStats s;
  s.num_allocs = num_allocs_.load(std::memory_order_relaxed);
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_bytes_in_use_.load(std::memory_order_relaxed);
  s.largest_alloc_size = largest_alloc_size_.load(std::memory_order_relaxed);
  s.bytes_limit = bytes_limit_;
  return s;
}

Allocator* NewPersistentCpuAllocator(std::string name, int64_t bytes_limit) {
  static Mutex* const mu = new Mutex;
  static auto* const all = new std::vector<std::unique_ptr<Allocator>>;
  MutexLock l(mu);
  all->push_back(std::make_unique<TrackingCpuAllocator>(std::move(name), bytes_limit));
  return all->back().get();
}

Allocator* CpuAllocator() {
  static Allocator* const a = new TrackingCpuAllocator("cpu");
  return a;
}

}  // namespace strata
