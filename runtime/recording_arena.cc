#include "runtime/recording_arena.h"

#include <algorithm>

namespace strata {

RecordingArena* RecordingArena::New(Allocator* base, std::string name, bool reuse) {
  return new RecordingArena(base, std::move(name), reuse);
}

void* RecordingArena::AllocateRaw(size_t alignment, size_t bytes) {
  {
    MutexLock l(&mu_);
    if (reuse_) {
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        ++live_;
        ++stats_.num_allocs;
        stats_.bytes_in_use += static_cast<int64_t>(bytes);
        stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
        return p;
      }
    }
  }
  void* p = base_->AllocateRaw(alignment, bytes);
  if (p == nullptr) return nullptr;
  MutexLock l(&mu_);
  ++live_;
  held_bytes_ += bytes;
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(bytes);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc_size = std::max(stats_.largest_alloc_size, static_cast<int64_t>(bytes));
  return p;
}

void RecordingArena::DeallocateRaw(void* ptr, size_t bytes) {
  bool last = false;
  {
    MutexLock l(&mu_);
    --live_;
    stats_.bytes_in_use -= static_cast<int64_t>(bytes);
    if (!released_) {
      free_[bytes].push_back(ptr);
      return;
    }
    held_bytes_ -= bytes;
    last = live_ == 0;
  }
  base_->DeallocateRaw(ptr, bytes);
  if (last) delete this;
}

void RecordingArena::Release() {
  absl::flat_hash_map<size_t, std::vector<void*>> blocks;
  bool last = false;
  {
    MutexLock l(&mu_);
    released_ = true;
    blocks.swap(free_);
    for (const auto& [bytes, ptrs] : blocks) held_bytes_ -= bytes * ptrs.size();
    last = live_ == 0;
  }
  for (const auto& [bytes, ptrs] : blocks) {
    for (void* p : ptrs) base_->DeallocateRaw(p, bytes);
  }
  if (last) delete this;
}

AllocatorStats RecordingArena::GetStats() const {
  MutexLock l(&mu_);
  return stats_;
}

size_t RecordingArena::held_bytes() const {
  MutexLock l(&mu_);
  return held_bytes_;
}

}  // namespace strata
