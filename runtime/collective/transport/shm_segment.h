// The shared-memory transport's segment (shm_transport.h): its layout,
// the plain-data structures every process maps (lock-free atomics only, so
// each process may map them anywhere), the futex and backoff helpers its
// waiters use, and the cold paths that create, open and clean up segments.
// Internal to the transport (namespace strata::shm).
//
// Thread-safety: the structures are shared between processes through their
// atomics, as each one's comment says; the functions are thread-safe.
// Ownership: a mapping belongs to the transport that made it.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_SEGMENT_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_SEGMENT_H_

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace strata {
namespace shm {

constexpr uint64_t kMagic = 0x3353485341545253;  // "SRTASHS3"
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr uint64_t kCtrlSlots = 256;
constexpr int kMaxRanks = 64;

using Clock = std::chrono::steady_clock;

// Everything below lives in the segment: plain data and lock-free atomics,
// which are address-free, so every process may map them anywhere.
struct alignas(kLine) Header {
  uint64_t magic;
  uint64_t size;
  uint64_t total_bytes;
  uint64_t ring_bytes;
  uint64_t chunk_bytes;
  // 0: running; 1: an abort is being written; 2: abort_code/message valid.
  std::atomic<uint32_t> abort_state;
  int32_t abort_code;
  // The abort's message, cut to fit: a page for the header, so that an
  // error naming several workers and what each has arrives whole.
  char abort_message[4096 - 48];
};
static_assert(sizeof(Header) == 4096, "one page");

// Written by its rank only.
struct alignas(kLine) RankLine {
  std::atomic<uint32_t> attached;  // 0 not yet, 1 attached, 2 closed
  int32_t pid;
  uint64_t start_time;  // /proc/<pid>/stat field 22: tells a reused pid apart
  // Two, used by alternate workspace collectives: a rank may publish the
  // next one's while a peer still checks the current one.
  struct Desc {
    int64_t elements;
    int32_t dtype, merge, final_op, collective;
    uint64_t buffer;  // WorkspaceDesc::buffer: where peers may read this rank's data
  } desc[2];
  // The address of CanaryAddress()'s word in this rank's process, which the
  // peers read at connect to learn whether they may read its memory.
  uint64_t canary;
  // 0: not probed yet; 1: this rank read every peer's canary; 2: it could
  // not (or single copies are off).
  std::atomic<uint32_t> readable;
  // How many of rank 0's announcements this rank has read.
  std::atomic<uint64_t> announcements_read;
};

// A futex word plus a count of the processes sleeping on it, so that the
// common case (nobody asleep) costs no system call.
struct alignas(kLine) WaitWord {
  std::atomic<uint32_t> value;
  std::atomic<uint32_t> sleepers;
};

struct alignas(kLine) Index {
  std::atomic<uint64_t> v;
};

// Rank 0's announcements, in order: entry k % kAnnouncements holds the k-th;
// `count` (its value, mod 2^32) says how many were written.
constexpr uint64_t kAnnouncements = 64;
struct Announcements {
  WaitWord count;
  uint64_t entries[kAnnouncements];
};

enum RecordType : uint32_t { kDesc = 1, kClear = 2, kReject = 3 };
struct Record {
  uint32_t type;
  uint32_t unused;
  uint64_t tag;
  uint64_t bytes;
};

// Single producer (head), single consumer (tail), each index in its line.
struct ControlRing {
  Index head;
  Index tail;
  Record records[kCtrlSlots];
};
struct DataRing {
  Index head;
  Index tail;
};

inline size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

inline long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word is shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

inline void Ring(WaitWord& w) {
  w.value.fetch_add(1, std::memory_order_seq_cst);
  if (w.sleepers.load(std::memory_order_seq_cst) > 0) Futex(&w.value, FUTEX_WAKE, INT_MAX, nullptr);
}

// Sleeps while w.value == seen, at most `limit`.
inline void SleepOn(WaitWord& w, uint32_t seen, absl::Duration limit) {
  w.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (w.value.load(std::memory_order_seq_cst) == seen) {
    const int64_t ns = std::max<int64_t>(1000, absl::ToInt64Nanoseconds(limit));
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    Futex(&w.value, FUTEX_WAIT, seen, &ts);
  }
  w.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A waiter's escalation: poll, then yield the core, then sleep.
class Backoff {
 public:
  Backoff(absl::Duration spin, absl::Duration yield)
      : start_(Clock::now()), spin_(absl::ToChronoNanoseconds(spin)),
        yield_(absl::ToChronoNanoseconds(yield)) {}
  // True once the caller should sleep; otherwise it has spun or yielded.
  bool Pause() {
    if (++polls_ < 64) {
      CpuRelax();
      return false;
    }
    const auto waited = Clock::now() - start_;
    if (waited < spin_) {
      for (int i = 0; i < 16; ++i) CpuRelax();
      return false;
    }
    if (waited < spin_ + yield_) {
      sched_yield();
      return false;
    }
    return true;
  }

 private:
  const Clock::time_point start_;
  const std::chrono::nanoseconds spin_, yield_;
  int64_t polls_ = 0;
};

// Where each part of the segment starts, from (size, ring_bytes, chunk_bytes).
struct Layout {
  int n;
  size_t ring_bytes, chunk_bytes;
  size_t ranks, announcements, doorbells, epochs, controls, data, workspace, total;

  Layout(int size, size_t ring, size_t chunk) : n(size), ring_bytes(ring), chunk_bytes(chunk) {
    const size_t pairs = static_cast<size_t>(n) * (n - 1);
    ranks = RoundUp(sizeof(Header), kLine);
    announcements = ranks + n * sizeof(RankLine);
    doorbells = RoundUp(announcements + sizeof(Announcements), kLine);
    epochs = doorbells + n * sizeof(WaitWord);
    controls = epochs + n * sizeof(WaitWord);
    data = RoundUp(controls + pairs * sizeof(ControlRing), kPage);
    workspace = data + pairs * (kPage + ring_bytes);
    total = workspace + (2 * n + 1) * chunk_bytes;
  }
  // Index of the ordered pair (from, to), from != to.
  size_t Pair(int from, int to) const { return from * (n - 1) + (to < from ? to : to - 1); }
};

// Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0 when the
// process is gone or a zombie (a killed child its parent has not reaped).
uint64_t ProcessStartTime(int pid);

// A new segment name for `prefix`: readable, unique, short enough for NAME_MAX.
std::string SegmentName(const std::string& prefix);

// Removes /dev/shm names of our format whose creator has exited and that are
// older than a minute (a rank 0 killed while its peers attached leaves one).
void RemoveLeftoverSegments();

// Single copies between processes (Linux cross-memory attach): the address
// of a word of this process that holds kCanaryValue, and whether the word at
// `address` in process `pid` can be read and holds it.
constexpr uint64_t kCanaryValue = 0x5952414e41435453;  // "STCANARY"
uint64_t CanaryAddress();
bool ProbePeerMemory(int pid, uint64_t address);

// Copies `bytes` at `address` in process `pid` to `to` (process_vm_readv,
// as many calls as it takes); Unavailable naming the errno when a read
// fails or the process is gone.
absl::Status ReadPeerMemory(int pid, uint64_t address, void* to, size_t bytes);

// The last system call's error as a Status naming `what`.
absl::Status SegmentErrno(const std::string& what);

// Creates the segment (rank 0) and returns the mapping.
absl::StatusOr<char*> CreateSegment(const std::string& name, const Layout& layout);

// Maps rank 0's segment and checks that it is one for `size` ranks.
absl::StatusOr<std::pair<char*, Layout>> OpenSegment(const std::string& name, int size);

}  // namespace shm
}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_SEGMENT_H_
