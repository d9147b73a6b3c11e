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
#include "base/run_queue.h"
#include "base/status.h"
#include "runtime/collective/transport/shared_workspace.h"
#include "runtime/collective/transport/shm_segment.h"
namespace strata {
namespace shm {
namespace {

// Descriptors of sends whose receives are not posted yet, per peer: each is
// one the algorithm will post; a peer that announces more is broken.
constexpr size_t kMaxEarlyDescriptors = 1 << 16;

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
  ShmTransportImpl(int rank, const Layout& layout, char* base, const ShmTransportOptions& options,
                   bool peers_readable)
      : rank_(rank),
        layout_(layout),
        base_(base),
        options_(options),
        peers_readable_(peers_readable),
        peers_(layout.n) {
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
    l.buffer = reinterpret_cast<uint64_t>(d.buffer);
  }

  bool peers_readable() const override { return peers_readable_; }

  absl::Status ReadPeer(int q, size_t offset, void* to, size_t bytes) override {
    if (!peers_readable_ || q < 0 || q >= layout_.n) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm transport: rank ", rank_, " cannot read rank ", q, "'s memory"));
    }
    const RankLine& l = rank_line(q);
    absl::Status s = ReadPeerMemory(l.pid, l.desc[descs_used_ & 1].buffer + offset, to, bytes);
    if (s.ok()) return s;
    Abort(absl::UnavailableError(absl::StrCat("shm transport: rank ", rank_, " reading rank ", q,
                                              "'s buffer: ", s.message())));
    return AbortStatus();
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
          // The peer may have rung w and then closed (or exited) since the
          // load above: its close is ordered after the ring, so look again.
          if (done(w.value.load(std::memory_order_acquire))) return absl::OkStatus();
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
    if (options_.before_peer_check) options_.before_peer_check(q);
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
    if (head - tail > kCtrlSlots) {
      // Only a corrupt (or hostile) peer writes a head past the ring: never
      // read what it claims is there.
      ProtocolError(absl::DataLossError(
          absl::StrCat("shm transport: rank ", q, "'s control ring to rank ", rank_,
                       " is corrupt (", head - tail, " records pending in ", kCtrlSlots, " slots)")));
      return false;
    }
    PeerState& p = peers_[q];
    for (; tail != head; ++tail) {
      const Record r = c.records[tail % kCtrlSlots];
      if (r.type == kDesc) {
        if (auto it = p.recvs.find(r.tag); it != p.recvs.end()) {
          Op recv = std::move(it->second);
          p.recvs.erase(it);
          Match(std::move(recv), r.bytes);
        } else if (p.early.size() >= kMaxEarlyDescriptors) {
          ProtocolError(absl::DataLossError(absl::StrCat(
              "shm transport: rank ", q, " announced more than ", kMaxEarlyDescriptors,
              " sends rank ", rank_, " has not posted receives for")));
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
      if (head - tail > cap) {
        // A head past the ring would have the copies below read beyond it.
        ProtocolError(absl::DataLossError(absl::StrCat(
            "shm transport: rank ", q, "'s data ring to rank ", rank_, " is corrupt (",
            head - tail, " bytes pending in a ring of ", cap, ")")));
        break;
      }
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
      if (absl::Status s = CheckPeer(q); !s.ok()) {
        // What q wrote before it closed (or exited) since the last pass is
        // still in the segment: take it, and fail only ops left waiting.
        DrainControl(q);
        PullData(q);
        FlushOutbox(q);
        PushData(q);
        if (peers_[q].Pending()) return Abort(s);
        continue;
      }
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
    CountThisThreadsRunQueueDelay();
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
  const bool peers_readable_;
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

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Connect(int rank, int size, KeyValueStore& kv,
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
  lines[rank].canary = CanaryAddress();
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
  // Single copies: every rank probes every peer, then learns everyone's answer.
  bool mine = options.single_copy;
  for (int q = 0; q < size && mine; ++q) {
    if (q != rank) mine = ProbePeerMemory(lines[q].pid, lines[q].canary);
  }
  lines[rank].readable.store(mine ? 1 : 2, std::memory_order_release);
  bool peers_readable = true;
  for (int q = 0; q < size; ++q) {
    uint32_t r;
    while ((r = lines[q].readable.load(std::memory_order_acquire)) == 0) {
      // A peer that exited after attaching fails the connect at once.
      const bool gone = ProcessStartTime(lines[q].pid) != lines[q].start_time;
      if (gone || Clock::now() >= deadline) {
        if (rank == 0) shm_unlink(name.c_str());
        munmap(base, layout.total);
        const std::string what = absl::StrCat("shm transport '", options.key_prefix, "': rank ", q);
        return gone ? absl::UnavailableError(absl::StrCat(what, " exited while connecting"))
                    : absl::DeadlineExceededError(
                          absl::StrCat(what, " attached but did not finish connecting within ",
                                       absl::FormatDuration(options.connect_timeout)));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    peers_readable = peers_readable && r == 1;
  }
  if (rank == 0 && shm_unlink(name.c_str()) != 0) {
    munmap(base, layout.total);
    return SegmentErrno(absl::StrCat("shm_unlink(", name, ")"));
  }
  ShmTransportOptions resolved = options;
  if (options.adaptive_wait) {
    cpu_set_t cpus;
    const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    const bool fits = size <= usable;
    resolved.spin_duration = fits ? absl::Milliseconds(20) : absl::ZeroDuration();
    resolved.yield_duration = fits ? absl::Microseconds(100) : absl::Milliseconds(2);
  }
  return std::unique_ptr<Transport>(
      new ShmTransportImpl(rank, layout, base, resolved, peers_readable));
}

}  // namespace shm

absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(int rank, int size,
                                                               KeyValueStore& kv,
                                                               const ShmTransportOptions& options) {
  return shm::Connect(rank, size, kv, options);
}

}  // namespace strata
