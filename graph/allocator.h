// Allocator: where tensor buffers come from. Each device owns one (the CPU
// device, each virtual CPU device, each GPU); tensors remember theirs and give
// their buffer back to it.
//
//   Allocator* a = CpuAllocator();
//   void* p = a->AllocateRaw(kTensorAlignment, 4096);  // nullptr if it cannot
//   a->DeallocateRaw(p, 4096);
//   a->GetStats().peak_bytes_in_use;
//
// Thread-safety: every method may be called concurrently.
// Ownership: allocators outlive every tensor allocated from them.
#ifndef STRATA_GRAPH_ALLOCATOR_H_
#define STRATA_GRAPH_ALLOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"

namespace strata {

// Buffers are aligned for the widest vector loads (AVX-512) and Eigen.
inline constexpr size_t kTensorAlignment = 64;

struct AllocatorStats {
  int64_t num_allocs = 0;
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t largest_alloc_size = 0;
  int64_t bytes_limit = 0;  // 0: no limit
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string Name() const = 0;
  // Returns nullptr when the memory cannot be had (the caller makes that a
  // ResourceExhausted naming what it was for). `bytes` may be 0.
  virtual void* AllocateRaw(size_t alignment, size_t bytes) = 0;
  // `bytes` is the size passed to AllocateRaw.
  virtual void DeallocateRaw(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats GetStats() const = 0;
};

// Host memory with statistics and an optional byte limit. One per CPU device
// (virtual CPU devices each have their own, so their stats are separate).
//
// Large buffers (>= kCacheMinBytes) are recycled: a freed one is kept, by
// page-rounded size, for the next request of that size, up to
// kCacheMaxBytes in all. A training step allocates the same activation and
// gradient shapes every step; without the cache each would be a fresh mmap
// whose pages fault in on first touch (measured: a 512x512 MatMul's output
// costs +50% time that way).
//
// Buffers of at least kHugePageBytes start on a huge-page boundary and are
// advised to use transparent huge pages (MADV_HUGEPAGE, which the kernel's
// default "madvise" mode honours; elsewhere a no-op): copies and reductions
// over tens of MiB then miss the TLB 512x less often (a 64 MiB all-reduce
// between two hosts over TCP: 3.40 -> 3.44-3.49 GB/s, medians of 16-20
// interleaved runs).
class TrackingCpuAllocator : public Allocator {
 public:
  static constexpr size_t kCacheMinBytes = 64 * 1024;
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  static constexpr size_t kCacheMaxBytes = size_t{256} << 20;

  explicit TrackingCpuAllocator(std::string name, int64_t bytes_limit = 0)
      : name_(std::move(name)), bytes_limit_(bytes_limit) {}
  ~TrackingCpuAllocator() override;
  std::string Name() const override { return name_; }
  void* AllocateRaw(size_t alignment, size_t bytes) override;
  void DeallocateRaw(void* ptr, size_t bytes) override;
  AllocatorStats GetStats() const override;

 private:
  const std::string name_;
  const int64_t bytes_limit_;
  std::atomic<int64_t> num_allocs_{0};
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_bytes_in_use_{0};
  std::atomic<int64_t> largest_alloc_size_{0};

  Mutex cache_mu_;
  std::unordered_map<size_t, std::vector<void*>> cache_ ABSL_GUARDED_BY(cache_mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(cache_mu_) = 0;
};

// A new host allocator that is never destroyed. Devices take theirs from
// here: tensors they produced (a Session::Run's outputs, say) may outlive the
// device, and must still be able to give their buffer back. Each allocator is
// a few hundred bytes, kept reachable in a process-wide list.
Allocator* NewPersistentCpuAllocator(std::string name, int64_t bytes_limit = 0);

// The process-wide host allocator, for tensors made outside any device
// (constants in graphs, feeds, test data).
Allocator* CpuAllocator();

}  // namespace strata

#endif  // STRATA_GRAPH_ALLOCATOR_H_
