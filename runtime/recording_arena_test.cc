#include "runtime/recording_arena.h"

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(RecordingArenaTest, WithReuseAFreedBlockServesTheNextRequestOfItsSize) {
  Allocator* base = NewPersistentCpuAllocator("arena_test_base");
  RecordingArena* a = RecordingArena::New(base, "arena", /*reuse=*/true);
  void* p = a->AllocateRaw(64, 256);
  ASSERT_NE(p, nullptr);
  a->DeallocateRaw(p, 256);
  EXPECT_EQ(a->AllocateRaw(64, 256), p) << "kept for the recording, reused within it";
  void* q = a->AllocateRaw(64, 512);
  EXPECT_NE(q, p);
  EXPECT_EQ(a->held_bytes(), 768u);
  a->DeallocateRaw(p, 256);
  a->DeallocateRaw(q, 512);
  EXPECT_EQ(base->GetStats().bytes_in_use, 768) << "freed blocks stay taken from the base until Release";
  a->Release();
  EXPECT_EQ(base->GetStats().bytes_in_use, 0);
}

TEST(RecordingArenaTest, WithoutReuseAFreedBlockIsOnlyKept) {
  Allocator* base = NewPersistentCpuAllocator("arena_test_base_noreuse");
  RecordingArena* a = RecordingArena::New(base, "arena", /*reuse=*/false);
  void* p = a->AllocateRaw(64, 128);
  a->DeallocateRaw(p, 128);
  void* q = a->AllocateRaw(64, 128);
  EXPECT_NE(q, p) << "host memory written while recording is read back by replays";
  a->DeallocateRaw(q, 128);
  a->Release();
  EXPECT_EQ(base->GetStats().bytes_in_use, 0);
}

TEST(RecordingArenaTest, BlocksInUseAtReleaseGoBackToTheBaseWhenFreed) {
  Allocator* base = NewPersistentCpuAllocator("arena_test_base_live");
  RecordingArena* a = RecordingArena::New(base, "arena", /*reuse=*/true);
  void* kept = a->AllocateRaw(64, 1024);  // say, a variable's buffer
  void* freed = a->AllocateRaw(64, 64);
  a->DeallocateRaw(freed, 64);
  a->Release();
  EXPECT_EQ(base->GetStats().bytes_in_use, 1024);
  a->DeallocateRaw(kept, 1024);  // the arena deletes itself after this
  EXPECT_EQ(base->GetStats().bytes_in_use, 0);
}

}  // namespace
}  // namespace strata
