// RecordingArena: the memory of one step recording (runtime/device.h
// StepRecording). A recorded step replays with the buffer addresses it was
// recorded with, so nothing else may be given those buffers while the
// recording lives: the arena takes blocks from the device's allocator and
// keeps them.
//
//   RecordingArena* a = RecordingArena::New(device->allocator(), "GPU:0 step", /*reuse=*/true);
//   Tensor t(a, DT_FLOAT, shape);   // ... recorded kernels allocate here ...
//   a->Release();                   // the recording is gone: not `delete`
//
// With `reuse`, a freed block serves a later request of the same size within
// the arena: right for device memory whose every use is ordered on the
// recording's one stream (a later kernel using the block runs after the
// earlier one, in the recording as in each replay). Without it a freed block
// is only kept: right for host memory written while recording, which a
// replay's copies read back.
//
// Release() hands the kept blocks back; blocks still in use then (a variable
// that got a buffer while recording) go back to the base allocator when they
// are freed, and the arena deletes itself after the last one.
//
// Thread-safety: every method may be called concurrently. Ownership: the
// arena owns its blocks until Release; `base` must outlive it.
#ifndef STRATA_RUNTIME_RECORDING_ARENA_H_
#define STRATA_RUNTIME_RECORDING_ARENA_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "graph/allocator.h"

namespace strata {

class RecordingArena : public Allocator {
 public:
  static RecordingArena* New(Allocator* base, std::string name, bool reuse);
  // The recording is gone: see the header comment. Call once; the arena
  // must not be used for new allocations afterwards.
  void Release();

  std::string Name() const override { return name_; }
  void* AllocateRaw(size_t alignment, size_t bytes) override;
  void DeallocateRaw(void* ptr, size_t bytes) override;
  AllocatorStats GetStats() const override;
  // Bytes taken from the base allocator and not handed back.
  size_t held_bytes() const;

 private:
  RecordingArena(Allocator* base, std::string name, bool reuse)
      : base_(base), name_(std::move(name)), reuse_(reuse) {}
  ~RecordingArena() override = default;

  Allocator* const base_;
  const std::string name_;
  const bool reuse_;
  mutable Mutex mu_;
  // Blocks free for reuse (or only kept), by size.
  absl::flat_hash_map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;  // blocks handed out, not yet freed
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_RECORDING_ARENA_H_
