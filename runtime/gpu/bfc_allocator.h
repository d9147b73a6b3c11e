// BfcAllocator: a caching best-fit allocator with coalescing ("best fit with
// coalescing", as in TensorFlow's GPU allocator). It takes large regions from a
// SubAllocator (cudaMalloc on a GPU, pinned or plain host memory elsewhere),
// cuts them into chunks for AllocateRaw and never gives memory back to the
// SubAllocator while it can still be reused: a training step asks for the same
// sizes every step, and cudaMalloc/cudaFree synchronize the device.
//
//   BfcAllocator::Options opts;
//   opts.bytes_limit = size_t{8} << 30;      // at most 8 GiB of regions
//   BfcAllocator a(std::make_unique<HostSubAllocator>(), "gpu_0_bfc", opts);
//   void* p = a.AllocateRaw(kTensorAlignment, 1 << 20);  // nullptr when out of memory
//   a.DeallocateRaw(p, 1 << 20);              // merges with free neighbours
//   a.GetStats().peak_bytes_in_use;
//
// How: every request is rounded up to a multiple of kMinAllocationSize (256
// bytes, the alignment cudaMalloc gives). Free chunks sit in bins by size
// (bin i holds sizes in [256 << i, 256 << (i + 1))), each bin ordered by
// (size, address); the first chunk of at least the rounded size found from the
// request's bin upwards is the smallest that fits (best fit), and is split when
// the rest is worth keeping. A freed chunk merges with its free neighbours in
// the same region, so freeing everything restores one chunk per region. When
// nothing fits, a new region is taken (doubling in size, within the limit);
// when the limit or the SubAllocator refuses, wholly free regions are returned
// to the SubAllocator and the request is tried once more before AllocateRaw
// returns nullptr (callers turn that into ResourceExhausted naming the tensor).
//
// Byte counts: bytes_in_use and the limit count the rounded chunk sizes
// handed out and the regions reserved respectively.
//
// Thread-safety: every method may be called concurrently (one mutex).
// Ownership: the allocator owns its SubAllocator and every region; it must
// outlive every buffer allocated from it (devices keep theirs for the whole
// process, see gpu_device.h).
#ifndef STRATA_RUNTIME_GPU_BFC_ALLOCATOR_H_
#define STRATA_RUNTIME_GPU_BFC_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "graph/allocator.h"

namespace strata {

// Where a BfcAllocator's regions come from. Alloc returns memory aligned to
// at least BfcAllocator::kMinAllocationSize, or nullptr.
class SubAllocator {
 public:
  virtual ~SubAllocator() = default;
  virtual void* Alloc(size_t bytes) = 0;
  // `bytes` is the size given to Alloc.
  virtual void Free(void* ptr, size_t bytes) = 0;
};

// Plain host memory (aligned_alloc), for tests and host-side pools.
class HostSubAllocator : public SubAllocator {
 public:
  void* Alloc(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
};

class BfcAllocator : public Allocator {
 public:
  static constexpr size_t kMinAllocationSize = 256;
  static constexpr int kNumBins = 21;

  struct Options {
    // Most bytes of regions held at once; 0: no limit.
    size_t bytes_limit = 0;
    // Size of the first region; later regions double, up to kMaxRegionBytes.
    size_t initial_region_bytes = size_t{2} << 20;
  };
  static constexpr size_t kMaxRegionBytes = size_t{1} << 30;

  // More than AllocatorStats: how the reserved memory is cut up.
  struct Stats {
    AllocatorStats base;
    int64_t num_regions = 0;
    int64_t bytes_reserved = 0;       // sum of region sizes
    int64_t num_free_chunks = 0;
    int64_t largest_free_chunk = 0;
    int64_t num_region_allocs = 0;    // SubAllocator::Alloc calls that succeeded
  };

  BfcAllocator(std::unique_ptr<SubAllocator> sub, std::string name, Options options);
  ~BfcAllocator() override;
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  std::string Name() const override { return name_; }
  // nullptr when the memory cannot be had, or `alignment` is above
  // kMinAllocationSize. A 0-byte request gets a distinct smallest chunk.
  void* AllocateRaw(size_t alignment, size_t bytes) override;
  // Ignores nullptr. Aborts on a pointer this allocator did not hand out
  // (memory corruption in our own code, not bad input).
  void DeallocateRaw(void* ptr, size_t bytes) override;
  AllocatorStats GetStats() const override;
  Stats GetDetailedStats() const;

 private:
  struct Chunk {
    char* ptr = nullptr;
    size_t size = 0;
    bool in_use = false;
    Chunk* prev = nullptr;  // neighbours in the same region, by address
    Chunk* next = nullptr;
  };
  struct BySizeThenAddress {
    bool operator()(const Chunk* a, const Chunk* b) const {
      if (a->size != b->size) return a->size < b->size;
      return a->ptr < b->ptr;
    }
  };
  struct Region {
    char* base;
    size_t size;
    Chunk* first;
  };

  static int BinFor(size_t size);
  Chunk* FindChunk(size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Extend(size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseFreeRegions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFree(Chunk* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFree(Chunk* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Merges `b` (the chunk after `a`, both free and out of the bins) into `a`.
  void Merge(Chunk* a, Chunk* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Const after construction.
  const std::unique_ptr<SubAllocator> sub_;
  const std::string name_;
  const Options options_;

  mutable Mutex mu_;
  std::set<Chunk*, BySizeThenAddress> bins_[kNumBins] ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const void*, Chunk*> in_use_ ABSL_GUARDED_BY(mu_);
  std::vector<Region> regions_ ABSL_GUARDED_BY(mu_);
  size_t next_region_bytes_ ABSL_GUARDED_BY(mu_);
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
  int64_t num_region_allocs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_GPU_BFC_ALLOCATOR_H_
