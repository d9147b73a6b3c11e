#include "runtime/collective/transport/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "runtime/collective/transport/shared_workspace.h"

namespace strata {

namespace {

constexpr uint64_t kMagic = 0x3253485341545253;  // "SRTASHS2"
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
  char abort_message[448];
};

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
  } desc[2];
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

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word is shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

void Ring(WaitWord& w) {
  w.value.fetch_add(1, std::memory_order_seq_cst);
  if (w.sleepers.load(std::memory_order_seq_cst) > 0) Futex(&w.value, FUTEX_WAKE, INT_MAX, nullptr);
}

// Sleeps while w.value == seen, at most `limit`.
void SleepOn(WaitWord& w, uint32_t seen, absl::Duration limit) {
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

// Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0 when the
// process is gone or a zombie (a killed child its parent has not reaped).
uint64_t ProcessStartTime(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the name may hold spaces
  if (p == nullptr) return 0;
  char state = 0;
  unsigned long long start = 0;
  // Fields 3 (state) .. 22 (starttime).
  if (std::sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                  &state, &start) != 2) {
    return 0;
  }
  if (state == 'Z' || state == 'X' || state == 'x') return 0;
  return start;
}

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

struct Op {
  bool is_send = false;
  int peer = 0;
  uint64_t tag = 0;
  char* data = nullptr;
  size_t bytes = 0;
  size_t moved = 0;  // bytes streamed so far
  Transport::Callback done;
  Clock::time_point deadline;
};

// The progress thread's view of one peer.
struct PeerState {
  std::map<uint64_t, Op> sends;        // descriptor sent, waiting for clear-to-send
  std::map<uint64_t, Op> recvs;        // posted, no descriptor yet
  std::map<uint64_t, uint64_t> early;  // descriptors (tag -> bytes) with no receive yet
  std::deque<Op> send_stream, recv_stream;  // cleared, in clearing order
  std::deque<Record> outbox;           // records waiting for control-ring space
  bool Pending() const {
    return !sends.empty() || !recvs.empty() || !send_stream.empty() || !recv_stream.empty();
  }
};

class ShmTransportImpl : public Transport, public SharedWorkspace {
 public:
  ShmTransportImpl(int rank, const Layout& layout, char* base, const ShmTransportOptions& options)
      : rank_(rank), layout_(layout), base_(base), options_(options), peers_(layout.n) {
    my_epoch_ = epoch(rank_).value.load(std::memory_order_acquire);
    progress_ = std::thread([this] { ProgressLoop(); });
  }

  ~ShmTransportImpl() override {
    stop_.store(true, std::memory_order_seq_cst);
    Ring(doorbell(rank_));
    progress_.join();
    rank_line(rank_).attached.store(2, std::memory_order_release);
    for (int q = 0; q < layout_.n; ++q) {
      if (q != rank_) Ring(doorbell(q));  // peers waiting on us notice we closed
    }
    munmap(base_, layout_.total);
  }

  int rank() const override { return rank_; }
  int size() const override { return layout_.n; }
  const char* kind() const override { return "shm"; }

  void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) override {
    Post(true, dst, tag, const_cast<void*>(data), bytes, std::move(done));
  }
  void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) override {
    Post(false, src, tag, data, bytes, std::move(done));
  }

  void Abort(const absl::Status& status) override {
    const absl::Status s = status.ok() ? absl::AbortedError("shm transport aborted") : status;
    uint32_t expected = 0;
    Header& h = header();
    if (h.abort_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      h.abort_code = static_cast<int32_t>(s.code());
      const size_t len = std::min(s.message().size(), sizeof(h.abort_message) - 1);
      std::memcpy(h.abort_message, s.message().data(), len);
      h.abort_message[len] = '\0';
      h.abort_state.store(2, std::memory_order_release);
    }
    for (int q = 0; q < layout_.n; ++q) {
      Ring(doorbell(q));
      Futex(&epoch(q).value, FUTEX_WAKE, INT_MAX, nullptr);
    }
    Futex(&announcements().count.value, FUTEX_WAKE, INT_MAX, nullptr);
  }

  SharedWorkspace* shared_workspace() override { return this; }

  size_t chunk_bytes() const override { return layout_.chunk_bytes; }
  char* slot(int rank, int set) override {
    return base_ + layout_.workspace + (set * layout_.n + rank) * layout_.chunk_bytes;
  }
  char* result() override { return base_ + layout_.workspace + 2 * layout_.n * layout_.chunk_bytes; }
  int NextSet() override { return static_cast<int>(sets_used_++ & 1); }

  void PublishDesc(const WorkspaceDesc& d) override {
    RankLine::Desc& l = rank_line(rank_).desc[++descs_used_ & 1];
    l.elements = d.num_elements;
    l.dtype = static_cast<int32_t>(d.dtype);
    l.merge = static_cast<int32_t>(d.merge_op);
    l.final_op = static_cast<int32_t>(d.final_op);
    l.collective = d.collective;
  }

  absl::Status CheckDescs(const WorkspaceDesc& d) override {
    for (int q = 0; q < layout_.n; ++q) {
      const RankLine::Desc& l = rank_line(q).desc[descs_used_ & 1];
      if (l.elements != d.num_elements || l.dtype != static_cast<int32_t>(d.dtype) ||
          l.merge != static_cast<int32_t>(d.merge_op) ||
          l.final_op != static_cast<int32_t>(d.final_op) || l.collective != d.collective) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shm collective: rank ", q, " runs collective ", l.collective, " over ",
            l.elements, " elements of dtype ", l.dtype, " (merge ", l.merge,
            ", final ", l.final_op, ") but rank ", rank_, " runs collective ", d.collective,
            " over ", d.num_elements, " elements of dtype ", static_cast<int>(d.dtype), " (merge ",
            static_cast<int>(d.merge_op), ", final ", static_cast<int>(d.final_op), ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    // A barrier after an abort fails even if every peer already arrived.
    if (absl::Status s = AbortStatus(); !s.ok()) return s;
    const uint32_t e = ++my_epoch_;
    Ring(epoch(rank_));  // value becomes e: one increment per barrier
    const Clock::time_point deadline = DeadlineFromNow();
    for (int q = 0; q < layout_.n; ++q) {
      if (q == rank_) continue;
      WaitWord& w = epoch(q);
      STRATA_RETURN_IF_ERROR(WaitUntil(
          w, q, deadline, "at a collective barrier", [&](uint32_t seen) {
            return static_cast<int32_t>(seen - e) >= 0;
          }));
    }
    return absl::OkStatus();
  }

  absl::Status Announce(uint64_t id) override {
    if (rank_ != 0) {
      return absl::InternalError(absl::StrCat("shm transport: rank ", rank_,
                                              " announced a collective; only rank 0 does"));
    }
    if (absl::Status s = AbortStatus(); !s.ok()) return s;
    Announcements& a = announcements();
    const uint64_t k = announced_;
    // The entry k overwrites must have been read by every peer. Nobody
    // rings for reads: this wait polls (each announced collective has a
    // barrier, so the peers are at most one behind and it rarely waits).
    const Clock::time_point deadline = DeadlineFromNow();
    for (int q = 1; q < layout_.n; ++q) {
      RankLine& line = rank_line(q);
      STRATA_RETURN_IF_ERROR(WaitUntil(
          a.count, q, deadline, "to read rank 0's earlier announcements", [&](uint32_t) {
            return k - line.announcements_read.load(std::memory_order_acquire) < kAnnouncements;
          }));
    }
    a.entries[k % kAnnouncements] = id;
    ++announced_;
    Ring(a.count);  // release: the entry is visible before the count
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> NextAnnouncement() override {
    if (rank_ == 0) {
      return absl::InternalError("shm transport: rank 0 waited for an announcement; it makes them");
    }
    if (absl::Status s = AbortStatus(); !s.ok()) return s;
    Announcements& a = announcements();
    const uint64_t k = announced_;
    STRATA_RETURN_IF_ERROR(WaitUntil(a.count, 0, DeadlineFromNow(),
                                     "for rank 0 to announce the next collective",
                                     [&](uint32_t seen) { return seen != static_cast<uint32_t>(k); }));
    const uint64_t id = a.entries[k % kAnnouncements];
    ++announced_;
    rank_line(rank_).announcements_read.store(announced_, std::memory_order_release);
    return id;
  }

 private:
  Header& header() { return *reinterpret_cast<Header*>(base_); }
  Announcements& announcements() {
    return *reinterpret_cast<Announcements*>(base_ + layout_.announcements);
  }
  RankLine& rank_line(int r) { return reinterpret_cast<RankLine*>(base_ + layout_.ranks)[r]; }
  WaitWord& doorbell(int r) { return reinterpret_cast<WaitWord*>(base_ + layout_.doorbells)[r]; }
  WaitWord& epoch(int r) { return reinterpret_cast<WaitWord*>(base_ + layout_.epochs)[r]; }
  ControlRing& control(int from, int to) {
    return reinterpret_cast<ControlRing*>(base_ + layout_.controls)[layout_.Pair(from, to)];
  }
  DataRing& data_ring(int from, int to) {
    return *reinterpret_cast<DataRing*>(base_ + layout_.data +
                                        layout_.Pair(from, to) * (kPage + layout_.ring_bytes));
  }
  char* ring_data(int from, int to) { return reinterpret_cast<char*>(&data_ring(from, to)) + kPage; }

  Clock::time_point DeadlineFromNow() const {
    if (options_.operation_timeout >= absl::Hours(24 * 365)) return Clock::time_point::max();
    return Clock::now() + absl::ToChronoNanoseconds(options_.operation_timeout);
  }

  // Waits until done(w's value) holds; w is a word that rank `peer` rings
  // when it changes. Polls, yields, then sleeps on w; fails with the abort
  // status, and aborts the communicator when `peer` exits or closes or
  // `deadline` passes ("waited longer than ... for rank q <what>").
  template <typename Done>
  absl::Status WaitUntil(WaitWord& w, int peer, Clock::time_point deadline, const char* what,
                         Done done) {
    Backoff backoff(options_.spin_duration, options_.yield_duration);
    Clock::time_point next_check = Clock::now();
    while (true) {
      const uint32_t seen = w.value.load(std::memory_order_acquire);
      if (done(seen)) return absl::OkStatus();
      if (header().abort_state.load(std::memory_order_acquire) != 0) return AbortStatus();
      if (!backoff.Pause()) continue;
      const Clock::time_point now = Clock::now();
      if (now >= next_check) {
        next_check = now + std::chrono::milliseconds(100);
        if (absl::Status s = CheckPeer(peer); !s.ok()) {
          Abort(s);
          return AbortStatus();
        }
        if (now >= deadline) {
          Abort(absl::DeadlineExceededError(absl::StrCat(
              "shm transport: rank ", rank_, " waited longer than ",
              absl::FormatDuration(options_.operation_timeout), " for rank ", peer, " ", what)));
          return AbortStatus();
        }
      }
      SleepOn(w, seen, absl::Milliseconds(10));
    }
  }

  absl::Status AbortStatus() {
    Header& h = header();
    uint32_t state = h.abort_state.load(std::memory_order_acquire);
    if (state == 0) return absl::OkStatus();
    // State 1: the aborting rank is copying its status in (a few hundred
    // bytes). Wait for it, so that every rank reports the same cause; only a
    // writer that died or stalled mid-copy leaves the generic error.
    const Clock::time_point give_up = Clock::now() + std::chrono::milliseconds(100);
    while (state == 1 && Clock::now() < give_up) {
      sched_yield();
      state = h.abort_state.load(std::memory_order_acquire);
    }
    if (state == 1) return absl::AbortedError("shm transport aborted by a peer");
    return absl::Status(static_cast<absl::StatusCode>(h.abort_code), h.abort_message);
  }

  // Unavailable if rank q closed its end or its process is gone.
  absl::Status CheckPeer(int q) {
    RankLine& l = rank_line(q);
    if (l.attached.load(std::memory_order_acquire) == 2) {
      return absl::UnavailableError(absl::StrCat("shm transport: rank ", q,
                                                 " closed the communicator while rank ", rank_,
                                                 " was waiting for it"));
    }
    if (ProcessStartTime(l.pid) != l.start_time) {
      return absl::UnavailableError(absl::StrCat("shm transport: rank ", q, " (pid ", l.pid,
                                                 ") exited while rank ", rank_,
                                                 " was waiting for it"));
    }
    return absl::OkStatus();
  }

  void Post(bool is_send, int peer, uint64_t tag, void* data, size_t bytes, Callback done) {
    if (peer < 0 || peer >= layout_.n || peer == rank_) {
      return done(absl::InternalError(absl::StrCat("shm transport: rank ", rank_, " cannot ",
                                                   is_send ? "send to" : "receive from", " rank ",
                                                   peer, " in a group of ", layout_.n)));
    }
    if (absl::Status s = AbortStatus(); !s.ok()) return done(s);
    Op op;
    op.is_send = is_send;
    op.peer = peer;
    op.tag = tag;
    op.data = static_cast<char*>(data);
    op.bytes = bytes;
    op.done = std::move(done);
    op.deadline = DeadlineFromNow();
    {
      MutexLock l(&mu_);
      inbox_.push_back(std::move(op));
    }
    Ring(doorbell(rank_));
  }

  // --- Progress thread only from here on. ---

  void Complete(Op& op, absl::Status s) { finished_.emplace_back(std::move(op.done), std::move(s)); }

  void Queue(int q, RecordType type, uint64_t tag, uint64_t bytes) {
    peers_[q].outbox.push_back(Record{type, 0, tag, bytes});
  }

  void ProtocolError(absl::Status s) {
    if (protocol_error_.ok()) protocol_error_ = std::move(s);
  }

  // Matches a receive with the peer's descriptor: clear-to-send, or reject.
  void Match(Op recv, uint64_t peer_bytes) {
    const int q = recv.peer;
    if (peer_bytes != recv.bytes) {
      Complete(recv, absl::InternalError(absl::StrCat(
                         "shm transport: rank ", q, " sends ", peer_bytes, " bytes with tag ",
                         recv.tag, " but rank ", rank_, " expects ", recv.bytes,
                         "; rejected before copying")));
      Queue(q, kReject, recv.tag, recv.bytes);
      return;
    }
    Queue(q, kClear, recv.tag, recv.bytes);
    if (recv.bytes == 0) {
      Complete(recv, absl::OkStatus());
    } else {
      peers_[q].recv_stream.push_back(std::move(recv));
    }
  }

  void Accept(Op op) {
    PeerState& p = peers_[op.peer];
    if (op.is_send) {
      if (p.sends.count(op.tag) > 0) {
        return Complete(op, absl::InternalError(absl::StrCat("shm transport: second send from rank ",
                                                             rank_, " to ", op.peer, " with tag ",
                                                             op.tag)));
      }
      Queue(op.peer, kDesc, op.tag, op.bytes);
      p.sends.emplace(op.tag, std::move(op));
    } else if (auto it = p.early.find(op.tag); it != p.early.end()) {
      const uint64_t peer_bytes = it->second;
      p.early.erase(it);
      Match(std::move(op), peer_bytes);
    } else if (p.recvs.count(op.tag) > 0) {
      Complete(op, absl::InternalError(absl::StrCat("shm transport: second receive by rank ", rank_,
                                                    " from ", op.peer, " with tag ", op.tag)));
    } else {
      p.recvs.emplace(op.tag, std::move(op));
    }
  }

  // Reads the control records rank q sent us. True if there were any.
  bool DrainControl(int q) {
    ControlRing& c = control(q, rank_);
    const uint64_t head = c.head.v.load(std::memory_order_acquire);
    uint64_t tail = c.tail.v.load(std::memory_order_relaxed);
    if (head == tail) return false;
    PeerState& p = peers_[q];
    for (; tail != head; ++tail) {
      const Record r = c.records[tail % kCtrlSlots];
      if (r.type == kDesc) {
        if (auto it = p.recvs.find(r.tag); it != p.recvs.end()) {
          Op recv = std::move(it->second);
          p.recvs.erase(it);
          Match(std::move(recv), r.bytes);
        } else if (!p.early.emplace(r.tag, r.bytes).second) {
          ProtocolError(absl::InternalError(absl::StrCat("shm transport: rank ", q,
                                                         " sent tag ", r.tag, " to rank ", rank_,
                                                         " twice")));
        }
      } else if (r.type == kClear || r.type == kReject) {
        auto it = p.sends.find(r.tag);
        if (it == p.sends.end()) {
          ProtocolError(absl::InternalError(absl::StrCat(
              "shm transport: rank ", q, " answered a send with tag ", r.tag, " that rank ", rank_,
              " never made")));
          continue;
        }
        Op send = std::move(it->second);
        p.sends.erase(it);
        if (r.type == kReject) {
          Complete(send, absl::InternalError(absl::StrCat(
                             "shm transport: rank ", q, " expects ", r.bytes, " bytes with tag ",
                             r.tag, " but rank ", rank_, " sends ", send.bytes,
                             "; rejected before copying")));
        } else if (send.bytes == 0) {
          Complete(send, absl::OkStatus());
        } else {
          p.send_stream.push_back(std::move(send));
        }
      } else {
        ProtocolError(absl::DataLossError(absl::StrCat("shm transport: rank ", q,
                                                       " wrote a control record of unknown type ",
                                                       r.type, " to rank ", rank_)));
      }
    }
    c.tail.v.store(tail, std::memory_order_release);
    return true;
  }

  bool FlushOutbox(int q) {
    PeerState& p = peers_[q];
    if (p.outbox.empty()) return false;
    ControlRing& c = control(rank_, q);
    uint64_t head = c.head.v.load(std::memory_order_relaxed);
    const uint64_t tail = c.tail.v.load(std::memory_order_acquire);
    bool wrote = false;
    while (!p.outbox.empty() && head - tail < kCtrlSlots) {
      c.records[head % kCtrlSlots] = p.outbox.front();
      p.outbox.pop_front();
      ++head;
      wrote = true;
    }
    if (wrote) c.head.v.store(head, std::memory_order_release);
    return wrote;
  }

  // Copies as much of the oldest cleared send as the ring has room for. A
  // quarter of the ring at a time, so the receiver starts copying out early.
  bool PushData(int q) {
    PeerState& p = peers_[q];
    bool moved = false;
    DataRing& d = data_ring(rank_, q);
    char* ring = ring_data(rank_, q);
    const uint64_t cap = layout_.ring_bytes;
    uint64_t head = d.head.v.load(std::memory_order_relaxed);
    while (!p.send_stream.empty()) {
      const uint64_t tail = d.tail.v.load(std::memory_order_acquire);
      Op& op = p.send_stream.front();
      const uint64_t n = std::min<uint64_t>({cap - (head - tail), op.bytes - op.moved, cap / 4});
      if (n == 0) break;
      const uint64_t at = head % cap, first = std::min(n, cap - at);
      std::memcpy(ring + at, op.data + op.moved, first);
      if (first < n) std::memcpy(ring, op.data + op.moved + first, n - first);
      head += n;
      op.moved += n;
      d.head.v.store(head, std::memory_order_release);
      moved = true;
      if (op.moved == op.bytes) {
        Complete(op, absl::OkStatus());
        p.send_stream.pop_front();
      }
    }
    return moved;
  }

  bool PullData(int q) {
    PeerState& p = peers_[q];
    bool moved = false;
    DataRing& d = data_ring(q, rank_);
    const char* ring = ring_data(q, rank_);
    const uint64_t cap = layout_.ring_bytes;
    uint64_t tail = d.tail.v.load(std::memory_order_relaxed);
    while (!p.recv_stream.empty()) {
      const uint64_t head = d.head.v.load(std::memory_order_acquire);
      Op& op = p.recv_stream.front();
      const uint64_t n = std::min<uint64_t>(head - tail, op.bytes - op.moved);
      if (n == 0) break;
      const uint64_t at = tail % cap, first = std::min(n, cap - at);
      std::memcpy(op.data + op.moved, ring + at, first);
      if (first < n) std::memcpy(op.data + op.moved + first, ring, n - first);
      tail += n;
      op.moved += n;
      d.tail.v.store(tail, std::memory_order_release);
      moved = true;
      if (op.moved == op.bytes) {
        Complete(op, absl::OkStatus());
        p.recv_stream.pop_front();
      }
    }
    return moved;
  }

  void FailAll(const absl::Status& s) {
    for (PeerState& p : peers_) {
      for (auto& kv : p.sends) Complete(kv.second, s);
      for (auto& kv : p.recvs) Complete(kv.second, s);
      for (Op& op : p.send_stream) Complete(op, s);
      for (Op& op : p.recv_stream) Complete(op, s);
      p = PeerState();
    }
  }

  // Deadlines and dead peers, for the ops still waiting.
  void CheckPending() {
    const Clock::time_point now = Clock::now();
    for (int q = 0; q < layout_.n; ++q) {
      const PeerState& p = peers_[q];
      if (q == rank_ || !p.Pending()) continue;
      if (absl::Status s = CheckPeer(q); !s.ok()) return Abort(s);
      auto expired = [&](const Op& op) -> bool {
        if (now < op.deadline) return false;
        Abort(absl::DeadlineExceededError(absl::StrCat(
            "shm transport: rank ", rank_, "'s ", op.is_send ? "send to" : "receive from",
            " rank ", q, " (tag ", op.tag, ", ", op.bytes, " bytes) waited longer than ",
            absl::FormatDuration(options_.operation_timeout))));
        return true;
      };
      for (const auto& kv : p.sends) if (expired(kv.second)) return;
      for (const auto& kv : p.recvs) if (expired(kv.second)) return;
      for (const Op& op : p.send_stream) if (expired(op)) return;
      for (const Op& op : p.recv_stream) if (expired(op)) return;
    }
  }

  void RunCallbacks() {
    std::vector<std::pair<Callback, absl::Status>> done;
    done.swap(finished_);
    for (auto& d : done) d.first(std::move(d.second));
  }

  void ProgressLoop() {
    WaitWord& bell = doorbell(rank_);
    std::unique_ptr<Backoff> idle;
    Clock::time_point next_check = Clock::now();
    while (true) {
      const uint32_t seen = bell.value.load(std::memory_order_acquire);
      std::deque<Op> fresh;
      {
        MutexLock l(&mu_);
        fresh.swap(inbox_);
      }
      const bool stop = stop_.load(std::memory_order_acquire);
      absl::Status failed = AbortStatus();
      if (failed.ok() && stop) failed = absl::CancelledError("shm transport closed");
      if (!failed.ok()) {
        FailAll(failed);
        for (Op& op : fresh) Complete(op, failed);
        RunCallbacks();
        if (stop) return;
        SleepOn(bell, seen, absl::Milliseconds(100));
        continue;
      }
      bool work = !fresh.empty();
      for (Op& op : fresh) Accept(std::move(op));
      for (int q = 0; q < layout_.n; ++q) {
        if (q == rank_) continue;
        bool touched = DrainControl(q);
        touched |= FlushOutbox(q);
        touched |= PushData(q);
        touched |= PullData(q);
        if (touched) {
          Ring(doorbell(q));
          work = true;
        }
      }
      if (!protocol_error_.ok()) {
        Abort(protocol_error_);
        protocol_error_ = absl::OkStatus();
      }
      work |= !finished_.empty();
      RunCallbacks();
      if (work) {
        idle.reset();
        continue;
      }
      if (idle == nullptr) {
        idle = std::make_unique<Backoff>(options_.spin_duration, options_.yield_duration);
      }
      if (!idle->Pause()) continue;
      const Clock::time_point now = Clock::now();
      if (now >= next_check) {
        next_check = now + std::chrono::milliseconds(100);
        CheckPending();
        continue;
      }
      SleepOn(bell, seen, absl::Milliseconds(100));
    }
  }

  const int rank_;
  const Layout layout_;
  char* const base_;
  const ShmTransportOptions options_;
  // The workspace caller's: barriers entered, slot sets and descriptors used.
  uint32_t my_epoch_;
  uint64_t sets_used_ = 0;
  uint64_t descs_used_ = 0;
  // The announcement caller's: announcements made (rank 0) or read.
  uint64_t announced_ = 0;

  Mutex mu_;
  std::deque<Op> inbox_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};

  // Progress thread only.
  std::vector<PeerState> peers_;
  std::vector<std::pair<Callback, absl::Status>> finished_;
  absl::Status protocol_error_;

  std::thread progress_;  // last: starts once everything above exists
};

std::string SegmentName(const std::string& prefix) {
  // Readable, unique, and short enough for NAME_MAX.
  std::string clean;
  for (char c : prefix) {
    if (clean.size() >= 40) break;
    clean.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  }
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return absl::StrCat("/strata-", clean, "-", getpid(), "-", counter.fetch_add(1), "-",
                      absl::Hex(rd()));
}

// A segment's name lives in /dev/shm only while its ranks attach; if rank 0
// was killed in that window the name stays. Rank 0 removes such leftovers
// before it creates a segment: names of our format whose creator (the pid
// in the name) has exited and that are older than a minute (so a creator in
// another pid namespace, whose pid we cannot see, keeps a young segment).
void RemoveLeftoverSegments() {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("strata-", 0) != 0) continue;
    // strata-<prefix>-<pid>-<counter>-<hex>: the pid is the third field from the end.
    std::vector<std::string> parts = absl::StrSplit(name, '-');
    int pid = 0;
    if (parts.size() < 5 || !absl::SimpleAtoi(parts[parts.size() - 3], &pid) || pid <= 0) continue;
    struct stat st;
    const std::string path = "/dev/shm/" + name;
    if (stat(path.c_str(), &st) != 0 || now - st.st_mtime < 60) continue;
    if (ProcessStartTime(pid) == 0) shm_unlink(("/" + name).c_str());
  }
  closedir(d);
}

absl::Status Errno(const std::string& what) {
  const int e = errno;
  std::string msg = absl::StrCat("shm transport: ", what, ": ", std::strerror(e));
  if (e == ENOSPC || e == ENOMEM) return absl::ResourceExhaustedError(msg);
  if (e == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

// Creates the segment (rank 0). Returns the mapping.
absl::StatusOr<char*> CreateSegment(const std::string& name, const Layout& layout) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(absl::StrCat("shm_open(", name, ")"));
  // Reserve the pages now: touching a page /dev/shm cannot back would be a
  // SIGBUS later, mid-collective.
  const int err = posix_fallocate(fd, 0, layout.total);
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    errno = err;
    return Errno(absl::StrCat("reserving ", layout.total, " bytes for ", name, " in /dev/shm"));
  }
  void* p = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Errno(absl::StrCat("mmap(", name, ")"));
  }
  char* base = static_cast<char*>(p);
  Header* h = new (base) Header();
  h->size = layout.n;
  h->total_bytes = layout.total;
  h->ring_bytes = layout.ring_bytes;
  h->chunk_bytes = layout.chunk_bytes;
  return base;
}

// Maps rank 0's segment and checks that it is one.
absl::StatusOr<std::pair<char*, Layout>> OpenSegment(const std::string& name, int size) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return Errno(absl::StrCat("shm_open(", name, ") published by rank 0"));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Header))) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shm transport: segment ", name, " is not a Strata shm segment"));
  }
  void* p = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Errno(absl::StrCat("mmap(", name, ")"));
  char* base = static_cast<char*>(p);
  const Header* h = reinterpret_cast<const Header*>(base);
  const Layout layout(size, h->ring_bytes, h->chunk_bytes);
  if (h->magic != kMagic || h->size != static_cast<uint64_t>(size) ||
      h->total_bytes != static_cast<uint64_t>(st.st_size) || layout.total != h->total_bytes) {
    const uint64_t their_size = h->size;
    munmap(base, st.st_size);
    return absl::FailedPreconditionError(
        absl::StrCat("shm transport: segment ", name, " was made for ", their_size,
                     " ranks (or is not a Strata shm segment); this rank expects ", size));
  }
  return std::make_pair(base, layout);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const ShmTransportOptions& options) {
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("shm transport: rank ", rank, " of ", size,
                                                   " (size must be 1..", kMaxRanks, ")"));
  }
  if (options.ring_bytes < kPage || options.chunk_bytes < kLine) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm transport: ring_bytes ", options.ring_bytes, " (at least ", kPage,
        ") or chunk_bytes ", options.chunk_bytes, " (at least ", kLine, ") too small"));
  }
  const std::string key = absl::StrCat(options.key_prefix, "/segment");
  const Clock::time_point deadline =
      Clock::now() + absl::ToChronoNanoseconds(options.connect_timeout);
  std::string name;
  char* base = nullptr;
  Layout layout(size, RoundUp(options.ring_bytes, kPage), RoundUp(options.chunk_bytes, kLine));
  if (rank == 0) {
    RemoveLeftoverSegments();
    name = SegmentName(options.key_prefix);
    STRATA_ASSIGN_OR_RETURN(base, CreateSegment(name, layout));
    reinterpret_cast<Header*>(base)->magic = kMagic;
    if (absl::Status s = kv.Insert(key, name); !s.ok()) {
      munmap(base, layout.total);
      shm_unlink(name.c_str());
      return s;
    }
  } else {
    STRATA_ASSIGN_OR_RETURN(name, kv.Get(key, options.connect_timeout));
    STRATA_ASSIGN_OR_RETURN(auto mapped, OpenSegment(name, size));
    base = mapped.first;
    layout = mapped.second;
  }
  RankLine* lines = reinterpret_cast<RankLine*>(base + layout.ranks);
  lines[rank].pid = getpid();
  lines[rank].start_time = ProcessStartTime(getpid());
  lines[rank].attached.store(1, std::memory_order_release);
  // Everyone waits for everyone, so rank 0 can unlink the name and every
  // rank returns with peers that can answer.
  while (true) {
    std::vector<int> missing;
    for (int q = 0; q < size; ++q) {
      if (lines[q].attached.load(std::memory_order_acquire) == 0) missing.push_back(q);
    }
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      if (rank == 0) shm_unlink(name.c_str());
      munmap(base, layout.total);
      return absl::DeadlineExceededError(absl::StrCat(
          "shm transport '", options.key_prefix, "': rank", missing.size() > 1 ? "s " : " ",
          absl::StrJoin(missing, ", "), " did not attach within ",
          absl::FormatDuration(options.connect_timeout)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (rank == 0 && shm_unlink(name.c_str()) != 0) {
    munmap(base, layout.total);
    return Errno(absl::StrCat("shm_unlink(", name, ")"));
  }
  ShmTransportOptions resolved = options;
  if (options.adaptive_wait) {
    cpu_set_t cpus;
    const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    const bool fits = size <= usable;
    resolved.spin_duration = fits ? absl::Milliseconds(20) : absl::ZeroDuration();
    resolved.yield_duration = fits ? absl::Microseconds(100) : absl::Milliseconds(2);
  }
  return std::unique_ptr<Transport>(new ShmTransportImpl(rank, layout, base, resolved));
}

}  // namespace strata
