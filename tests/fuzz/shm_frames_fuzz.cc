// libFuzzer target: the shared-memory transport (shm_transport.cc) reading
// what a peer writes into the segment. The transport is rank 0 of 2; the
// fuzzer is rank 1: it attaches to the real segment as a peer process
// would, then writes the input as its control records (descriptors,
// clear-to-send, rejects, anything) and its data ring's bytes, with ring
// indices that may lie, and rings rank 0's doorbell. Before that rank 0
// posts a few receives and sends chosen by the input (tags 0-3, sizes up
// to beyond the ring), so records can match, mismatch, arrive early or
// answer sends that were never made.
//
// Input: byte 0: operations (0-3), two bytes each (bit 0: send, bits 1-2:
// tag; size index); then a byte of flags (bit 0: a control head of 8 input
// bytes instead of the records' count; bit 1: the same for the data head);
// then up to 300 records of 24 bytes (the count from one byte, times 2),
// the heads if flagged, and the rest as data-ring bytes.
//
// Whatever the peer writes, rank 0 must consume it or fail naming rank 1
// within a second, and every operation must end once rank 1 closes: never
// a crash, a hang, an out-of-bounds read or unbounded memory.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/collective/transport/shm_segment.h"
#include "runtime/collective/transport/shm_transport.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/coordination/key_value_store.h"

namespace {

using namespace strata;       // NOLINT: a fuzz target's only namespace
using namespace strata::shm;  // NOLINT

constexpr size_t kSizes[] = {0, 8, 1000, 4096, 10000};
constexpr size_t kRingBytes = 4096;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  void Bytes(void* out, size_t n) {
    const size_t k = std::min(n, size_ - pos_);
    std::memset(out, 0, n);
    std::memcpy(out, data_ + pos_, k);
    pos_ += k;
  }
  size_t left() const { return size_ - pos_; }
  const uint8_t* rest() const { return data_ + pos_; }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "shm_frames_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int iteration = 0;
  Input in(data, size);
  InMemoryKeyValueStore kv;
  ShmTransportOptions o;
  o.key_prefix = absl::StrCat("shmfuzz-", getpid(), "-", iteration++);
  o.ring_bytes = kRingBytes;
  o.chunk_bytes = 64;
  o.connect_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<Transport>> t;
  std::thread rank0([&] { t = ConnectShmTransport(0, 2, kv, o); });
  absl::StatusOr<std::string> name = kv.Get(o.key_prefix + "/segment", absl::Seconds(10));
  if (!name.ok()) Die(name.status().ToString());
  absl::StatusOr<std::pair<char*, Layout>> mapped = OpenSegment(*name, 2);
  if (!mapped.ok()) Die(mapped.status().ToString());
  char* base = mapped->first;
  const Layout layout = mapped->second;
  RankLine* lines = reinterpret_cast<RankLine*>(base + layout.ranks);
  lines[1].pid = getpid();
  lines[1].start_time = ProcessStartTime(getpid());
  lines[1].attached.store(1, std::memory_order_release);
  lines[1].readable.store(2, std::memory_order_release);  // no single copies from this rank
  rank0.join();
  if (!t.ok()) Die(t.status().ToString());

  // Rank 0's operations.
  std::vector<std::vector<char>> buffers;
  PendingOps ops;
  const int n_ops = in.Byte() % 4;
  for (int i = 0; i < n_ops; ++i) {
    const uint8_t kind = in.Byte();
    buffers.emplace_back(kSizes[in.Byte() % (sizeof(kSizes) / sizeof(kSizes[0]))], 'x');
    std::vector<char>& b = buffers.back();
    const uint64_t tag = (kind >> 1) & 3;
    if (kind & 1) {
      (*t)->SendAsync(1, tag, b.data(), b.size(), ops.Add());
    } else {
      (*t)->RecvAsync(1, tag, b.data(), b.size(), ops.Add());
    }
  }

  // Rank 1's writes: control records, then data-ring bytes.
  const uint8_t flags = in.Byte();
  ControlRing& c = reinterpret_cast<ControlRing*>(base + layout.controls)[layout.Pair(1, 0)];
  const uint64_t tail = c.tail.v.load(std::memory_order_acquire);
  const size_t n_records = std::min<size_t>(2 * in.Byte(), kCtrlSlots);
  for (size_t i = 0; i < n_records; ++i)
    in.Bytes(&c.records[(tail + i) % kCtrlSlots], sizeof(Record));
  uint64_t head = tail + n_records;
  if (flags & 1) in.Bytes(&head, sizeof(head));
  DataRing& d = *reinterpret_cast<DataRing*>(base + layout.data +
                                             layout.Pair(1, 0) * (kPage + layout.ring_bytes));
  char* ring = reinterpret_cast<char*>(&d) + kPage;
  const uint64_t dtail = d.tail.v.load(std::memory_order_acquire);
  uint64_t dhead = dtail + std::min(in.left(), layout.ring_bytes);
  if (flags & 2) in.Bytes(&dhead, sizeof(dhead));
  const size_t n_data = std::min(in.left(), layout.ring_bytes);
  for (size_t i = 0; i < n_data; ++i) ring[(dtail + i) % layout.ring_bytes] = in.rest()[i];
  d.head.v.store(dhead, std::memory_order_release);
  c.head.v.store(head, std::memory_order_release);
  WaitWord& bell = reinterpret_cast<WaitWord*>(base + layout.doorbells)[0];
  Ring(bell);

  // Rank 0 consumes the records or fails, within a second.
  Header& h = *reinterpret_cast<Header*>(base);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (c.tail.v.load(std::memory_order_acquire) != head &&
         h.abort_state.load(std::memory_order_acquire) == 0) {
    if (std::chrono::steady_clock::now() > until)
      Die("rank 0 neither read nor refused the records");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // Rank 1 closes: every operation of rank 0 ends.
  lines[1].attached.store(2, std::memory_order_release);
  Ring(bell);
  (void)ops.Wait();
  t->reset();
  munmap(base, layout.total);
  return 0;
}
