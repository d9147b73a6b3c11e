#include "runtime/gpu/bfc_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace strata {

namespace {

size_t RoundUp(size_t bytes) {
  const size_t m = BfcAllocator::kMinAllocationSize;
  if (bytes == 0) return m;
  return (bytes + m - 1) / m * m;
}

}  // namespace

void* HostSubAllocator::Alloc(size_t bytes) {
  const size_t a = BfcAllocator::kMinAllocationSize;
  return std::aligned_alloc(a, (bytes + a - 1) / a * a);
}

void HostSubAllocator::Free(void* ptr, size_t) { std::free(ptr); }

BfcAllocator::BfcAllocator(std::unique_ptr<SubAllocator> sub, std::string name, Options options)
    : sub_(std::move(sub)),
      name_(std::move(name)),
      options_(options),
      next_region_bytes_(RoundUp(std::max<size_t>(options.initial_region_bytes, 1))) {
  stats_.bytes_limit = static_cast<int64_t>(options.bytes_limit);
}

BfcAllocator::~BfcAllocator() {
  MutexLock l(&mu_);
  for (Region& r : regions_) {
    for (Chunk* c = r.first; c != nullptr;) {
      Chunk* next = c->next;
      delete c;
      c = next;
    }
    sub_->Free(r.base, r.size);
  }
}

int BfcAllocator::BinFor(size_t size) {
  // Bin i: [256 << i, 256 << (i + 1)); the last bin takes everything above.
  size_t units = size / kMinAllocationSize;
  int bin = 0;
  while (units > 1 && bin < kNumBins - 1) {
    units >>= 1;
    ++bin;
  }
  return bin;
}

void BfcAllocator::InsertFree(Chunk* c) { bins_[BinFor(c->size)].insert(c); }

void BfcAllocator::RemoveFree(Chunk* c) { bins_[BinFor(c->size)].erase(c); }

BfcAllocator::Chunk* BfcAllocator::FindChunk(size_t rounded) {
  // Bins hold disjoint, increasing size ranges, and each is ordered by size:
  // the first chunk that fits, searching upwards, is the smallest that fits.
  Chunk probe;
  probe.size = rounded;
  probe.ptr = nullptr;
  for (int b = BinFor(rounded); b < kNumBins; ++b) {
    auto it = bins_[b].lower_bound(&probe);
    if (it == bins_[b].end()) continue;
    Chunk* c = *it;
    bins_[b].erase(it);
    // Split when the rest can hold a chunk of its own; a best fit leaves
    // little, so small remainders are rare and kept inside the chunk.
    if (c->size - rounded >= kMinAllocationSize) {
      Chunk* rest = new Chunk;
      rest->ptr = c->ptr + rounded;
      rest->size = c->size - rounded;
      rest->prev = c;
      rest->next = c->next;
      if (c->next != nullptr) c->next->prev = rest;
      c->next = rest;
      c->size = rounded;
      InsertFree(rest);
    }
    return c;
  }
  return nullptr;
}

bool BfcAllocator::Extend(size_t rounded) {
  const size_t limit = options_.bytes_limit;
  if (limit > 0 && reserved_ + rounded > limit) return false;
  // Regions grow so that a model's working set ends up in a few large ones;
  // if the preferred size does not fit the limit or the device, fall back to
  // exactly what is needed.
  size_t want = std::max(rounded, next_region_bytes_);
  if (limit > 0) {
    // Region sizes stay multiples of kMinAllocationSize; `rounded` is one and
    // fits, so the floor below never drops under it.
    const size_t room = (limit - reserved_) / kMinAllocationSize * kMinAllocationSize;
    want = std::min(want, room);
  }
  void* base = sub_->Alloc(want);
  if (base == nullptr && want > rounded) {
    want = rounded;
    base = sub_->Alloc(want);
  }
  if (base == nullptr) return false;
  ++num_region_allocs_;
  if (next_region_bytes_ < kMaxRegionBytes) next_region_bytes_ *= 2;
  Chunk* c = new Chunk;
  c->ptr = static_cast<char*>(base);
  c->size = want;
  regions_.push_back(Region{c->ptr, want, c});
  reserved_ += want;
  InsertFree(c);
  return true;
}

void BfcAllocator::ReleaseFreeRegions() {
  std::vector<Region> kept;
  for (Region& r : regions_) {
    Chunk* c = r.first;
    if (!c->in_use && c->next == nullptr) {
      RemoveFree(c);
      delete c;
      sub_->Free(r.base, r.size);
      reserved_ -= r.size;
    } else {
      kept.push_back(r);
    }
  }
  regions_ = std::move(kept);
}

void* BfcAllocator::AllocateRaw(size_t alignment, size_t bytes) {
  if (alignment > kMinAllocationSize) return nullptr;
  // A huge request would overflow the rounding below.
  if (bytes > (size_t{1} << 62)) return nullptr;
  const size_t rounded = RoundUp(bytes);
  MutexLock l(&mu_);
  Chunk* c = FindChunk(rounded);
  if (c == nullptr && Extend(rounded)) c = FindChunk(rounded);
  if (c == nullptr) {
    // Fragmented or at the limit: give wholly free regions back so that one
    // region of the right size can be made, then try once more.
    ReleaseFreeRegions();
    if (Extend(rounded)) c = FindChunk(rounded);
  }
  if (c == nullptr) return nullptr;
  c->in_use = true;
  in_use_.emplace(c->ptr, c);
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(c->size);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc_size = std::max(stats_.largest_alloc_size, static_cast<int64_t>(c->size));
  return c->ptr;
}

void BfcAllocator::Merge(Chunk* a, Chunk* b) {
  a->size += b->size;
  a->next = b->next;
  if (b->next != nullptr) b->next->prev = a;
  delete b;
}

void BfcAllocator::DeallocateRaw(void* ptr, size_t) {
  if (ptr == nullptr) return;
  MutexLock l(&mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) {
    std::fprintf(stderr, "BfcAllocator %s: freeing %p, which it did not allocate\n",
                 name_.c_str(), ptr);
    std::abort();
  }
  Chunk* c = it->second;
  in_use_.erase(it);
  c->in_use = false;
  stats_.bytes_in_use -= static_cast<int64_t>(c->size);
  // Coalesce with free neighbours so that freeing everything restores one
  // chunk per region.
  if (c->next != nullptr && !c->next->in_use) {
    RemoveFree(c->next);
    Merge(c, c->next);
  }
  if (c->prev != nullptr && !c->prev->in_use) {
    Chunk* p = c->prev;
    RemoveFree(p);
    Merge(p, c);
    c = p;
  }
  InsertFree(c);
}

AllocatorStats BfcAllocator::GetStats() const {
  MutexLock l(&mu_);
  return stats_;
}

BfcAllocator::Stats BfcAllocator::GetDetailedStats() const {
  MutexLock l(&mu_);
  Stats s;
  s.base = stats_;
  s.num_regions = static_cast<int64_t>(regions_.size());
  s.bytes_reserved = static_cast<int64_t>(reserved_);
  s.num_region_allocs = num_region_allocs_;
  for (const auto& bin : bins_) {
    s.num_free_chunks += static_cast<int64_t>(bin.size());
    if (!bin.empty()) {
      s.largest_free_chunk =
          std::max(s.largest_free_chunk, static_cast<int64_t>((*bin.rbegin())->size));
    }
  }
  return s;
}

}  // namespace strata
