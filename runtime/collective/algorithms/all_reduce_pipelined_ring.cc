#include "runtime/collective/algorithms/all_reduce_pipelined_ring.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status.h"
#include "runtime/collective/reduction.h"

namespace strata {
namespace {

// Below the 1023 tags DistributedCollectiveExecutor gives one execution
// (its last is the descriptor exchange's).
constexpr int64_t kMaxTags = 1000;

class AllReducePipelinedRing : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p) {
    return CreatePipelinedRingAllReduce(p);
  }
  AllReducePipelinedRing(const AlgorithmParams& p, const PipelinedRingOptions& options);
  absl::Status Run(Transport& t, const void* input, void* output) override;
  bool SupportsInPlace() const override { return true; }

 private:
  enum class Op { kScatterRecv, kScatterSend, kGatherRecv, kGatherSend };
  // One Run's progress, shared with the transport callbacks. Each chain of
  // operations follows one piece of one chunk, so a piece's steps never wait
  // for another piece's.
  struct State {
    Transport* t;
    const char* in;
    char* out;
    int left, right;
    Mutex mu;
    CondVar idle;
    int outstanding ABSL_GUARDED_BY(mu) = 0;
    int next_first_send ABSL_GUARDED_BY(mu) = 0;  // piece; see window_
    // In place (in == out): the reduce-scatter receives into slots_, in
    // (step, piece) order as slots free up; `queued` are those not posted
    // yet, slot_of[step * pieces_ + piece] the slot of a posted one.
    bool in_place = false;
    std::deque<std::pair<int, int>> queued ABSL_GUARDED_BY(mu);
    std::vector<char*> free_slots ABSL_GUARDED_BY(mu);
    std::vector<char*> slot_of ABSL_GUARDED_BY(mu);
    absl::Status status ABSL_GUARDED_BY(mu);
  };

  int64_t ChunkBegin(int c) const;
  // Element range [begin, end) of piece j of chunk c.
  std::pair<int64_t, int64_t> Piece(int c, int j) const;
  int Mod(int c) const { return ((c % p_.size) + p_.size) % p_.size; }
  uint64_t Tag(bool gather, int step, int j) const {
    return static_cast<uint64_t>(((gather ? p_.size - 1 : 0) + step) * pieces_ + j);
  }
  // Posts operation `op` of ring step `step` on piece j; false (nothing
  // posted) for an empty piece, or once the run has failed.
  bool Post(State* st, Op op, int step, int j) const;
  // Posts the next first-step send not posted yet, if any.
  void PostNextFirstSend(State* st) const;
  // In place: posts queued reduce-scatter receives while slots are free.
  void PostQueuedScatterRecvs(State* st) const;
  char* SlotOf(State* st, int step, int j) const {
    MutexLock l(&st->mu);
    return st->slot_of[step * pieces_ + j];
  }
  void Done(State* st, Op op, int step, int j, const absl::Status& s) const;

  const AlgorithmParams p_;
  const size_t elem_bytes_;
  // Whether Run waits in Transport::DriveUntil (else on its condition
  // variable, the transport's I/O thread moving the bytes).
  const bool drive_;
  int pieces_ = 1;  // per chunk
  // First-step sends posted at a time: one more as each is written.
  int window_ = 1;
  // In place: receive slots of slot_bytes_ (the largest piece), allocated by
  // the first in-place run and kept, so that they stay in cache.
  int num_slots_ = 1;
  size_t slot_bytes_ = 0;
  Tensor slots_;
};

AllReducePipelinedRing::AllReducePipelinedRing(const AlgorithmParams& p,
                                               const PipelinedRingOptions& options)
    : p_(p),
      elem_bytes_(DataTypeSize(p.dtype)),
      drive_(p.num_elements * static_cast<int64_t>(elem_bytes_) <= options.drive_max_bytes) {
  const size_t piece_bytes = options.piece_bytes, send_window_bytes = options.send_window_bytes;
  if (p.size > 1) {
    const int64_t chunk_bytes = (p.num_elements + p.size - 1) / p.size * static_cast<int64_t>(elem_bytes_);
    // Pieces of piece_bytes, however few that makes: a chunk of one piece
    // overlaps nothing within its step, yet measured faster than cut finer.
    // Across network namespaces, in place, bus bandwidth GB/s, at least 8
    // pieces of >= 128 KiB (the rule before) -> pieces of 512 KiB:
    //   2 ranks, medians of 6-8 interleaved runs: 512 KiB 4.35 -> 5.81,
    //   1 MiB 4.65 -> 6.60 (out of place 4.63 -> 6.58), 2 MiB 4.30 -> 5.29,
    //   4 MiB 5.37 -> 5.74 and 5.89 -> 5.89; from 16 MiB the rules agree;
    //   4 ranks on 4 hosts (2 cores), medians of 5: 1 MiB 1.28 -> 1.58,
    //   4 MiB 1.27 -> 1.77.
    // (Before the in-place all-reduce and the congestion control change,
    // 1 MiB had measured the other way round.)
    const int64_t wanted =
        (chunk_bytes + static_cast<int64_t>(piece_bytes) - 1) / static_cast<int64_t>(piece_bytes);
    const int64_t cap = std::max<int64_t>(1, kMaxTags / (2 * (p.size - 1)));
    pieces_ = static_cast<int>(std::clamp<int64_t>(wanted, 1, cap));
    const int64_t piece_size = std::max<int64_t>(1, chunk_bytes / pieces_);
    const int64_t chunk_elems = (p.num_elements + p.size - 1) / p.size;
    slot_bytes_ = static_cast<size_t>((chunk_elems + pieces_ - 1) / pieces_) * elem_bytes_;
    num_slots_ = static_cast<int>(
        std::clamp<int64_t>(options.in_place_slots, 1, int64_t{pieces_} * (p.size - 1)));
    window_ = send_window_bytes == 0
                  ? pieces_
                  : static_cast<int>(std::clamp<int64_t>(
                        static_cast<int64_t>(send_window_bytes) / piece_size, 1, pieces_));
  }
}

int64_t AllReducePipelinedRing::ChunkBegin(int c) const {
  // As AllReduceRing: the first n % size chunks hold one element more.
  const int64_t base = p_.num_elements / p_.size, extra = p_.num_elements % p_.size;
  return c * base + std::min<int64_t>(c, extra);
}

std::pair<int64_t, int64_t> AllReducePipelinedRing::Piece(int c, int j) const {
  const int64_t begin = ChunkBegin(c), len = ChunkBegin(c + 1) - begin;
  const int64_t base = len / pieces_, extra = len % pieces_;
  const int64_t b = begin + j * base + std::min<int64_t>(j, extra);
  return {b, b + base + (j < extra ? 1 : 0)};
}

void AllReducePipelinedRing::PostQueuedScatterRecvs(State* st) const {
  for (;;) {
    int step, j;
    {
      MutexLock l(&st->mu);
      if (st->queued.empty() || st->free_slots.empty() || !st->status.ok()) return;
      step = st->queued.front().first;
      j = st->queued.front().second;
      st->queued.pop_front();
      st->slot_of[step * pieces_ + j] = st->free_slots.back();
      st->free_slots.pop_back();
    }
    if (!Post(st, Op::kScatterRecv, step, j)) {
      // An empty piece (nothing posted): its slot is free again.
      MutexLock l(&st->mu);
      st->free_slots.push_back(st->slot_of[step * pieces_ + j]);
    }
  }
}

void AllReducePipelinedRing::PostNextFirstSend(State* st) const {
  for (;;) {
    int j;
    {
      MutexLock l(&st->mu);
      if (st->next_first_send >= pieces_ || !st->status.ok()) return;
      j = st->next_first_send++;
    }
    if (Post(st, Op::kScatterSend, 0, j)) return;
  }
}

bool AllReducePipelinedRing::Post(State* st, Op op, int step, int j) const {
  const int r = p_.rank;
  // The chunk each operation moves (see AllReduceRing): the reduce-scatter
  // sends chunk r - s and receives r - s - 1; the all-gather sends r + 1 - s
  // and receives r - s.
  int chunk = 0;
  switch (op) {
    case Op::kScatterSend:
      chunk = Mod(r - step);
      break;
    case Op::kScatterRecv:
      chunk = Mod(r - step - 1);
      break;
    case Op::kGatherSend:
      chunk = Mod(r + 1 - step);
      break;
    case Op::kGatherRecv:
      chunk = Mod(r - step);
      break;
  }
  const auto [begin, end] = Piece(chunk, j);
  if (begin == end) return false;
  {
    MutexLock l(&st->mu);
    if (!st->status.ok()) return false;
    ++st->outstanding;
  }
  const size_t bytes = static_cast<size_t>(end - begin) * elem_bytes_;
  char* out = st->out + begin * static_cast<int64_t>(elem_bytes_);
  auto cb = [this, st, op, step, j](const absl::Status& s) { Done(st, op, step, j, s); };
  const bool gather = op == Op::kGatherSend || op == Op::kGatherRecv;
  const uint64_t tag = Tag(gather, step, j);
  if (op == Op::kScatterRecv && st->in_place) {
    st->t->RecvAsync(st->left, tag, SlotOf(st, step, j), bytes, std::move(cb));
  } else if (op == Op::kScatterRecv || op == Op::kGatherRecv) {
    st->t->RecvAsync(st->left, tag, out, bytes, std::move(cb));
  } else {
    // The first step sends the rank's own input: nothing was copied to
    // `output` for it.
    const char* src = op == Op::kScatterSend && step == 0
                          ? st->in + begin * static_cast<int64_t>(elem_bytes_)
                          : out;
    st->t->SendAsync(st->right, tag, src, bytes, std::move(cb));
  }
  return true;
}

void AllReducePipelinedRing::Done(State* st, Op op, int step, int j, const absl::Status& s) const {
  const int n = p_.size;
  if (s.ok()) {
    switch (op) {
      case Op::kScatterRecv: {
        // The peer's partial sum of this piece is in `output` (in place: in
        // its slot); add this rank's input while it is in cache and pass it
        // on.
        const auto [begin, end] = Piece(Mod(p_.rank - step - 1), j);
        char* acc = st->out + begin * static_cast<int64_t>(elem_bytes_);
        if (st->in_place) {
          char* slot = SlotOf(st, step, j);
          MergeInto(p_.merge_op, p_.dtype, acc, slot, end - begin);
          {
            MutexLock l(&st->mu);
            st->free_slots.push_back(slot);
          }
          PostQueuedScatterRecvs(st);
        } else {
          MergeInto(p_.merge_op, p_.dtype, acc, st->in + begin * static_cast<int64_t>(elem_bytes_),
                    end - begin);
        }
        if (step + 1 < n - 1) {
          Post(st, Op::kScatterSend, step + 1, j);
        } else {
          // Fully reduced here: its owner applies Div once per element.
          if (p_.final_op == FinalOp::kDiv) DivideBy(p_.dtype, acc, end - begin, n);
          Post(st, Op::kGatherSend, 0, j);
        }
        break;
      }
      case Op::kScatterSend:
        if (step == 0) PostNextFirstSend(st);  // keeps the window full
        // Its region of `output` may now be overwritten by the final values
        // (in place, the first step's region too: it held the input).
        if (step > 0 || st->in_place) Post(st, Op::kGatherRecv, step, j);
        break;
      case Op::kGatherRecv:
        if (step + 1 < n - 1) Post(st, Op::kGatherSend, step + 1, j);
        break;
      case Op::kGatherSend:
        break;
    }
  }
  bool first_error = false;
  {
    MutexLock l(&st->mu);
    if (!s.ok() && st->status.ok()) {
      st->status = s;
      first_error = true;
    }
  }
  // The pieces already posted on either side would wait for operations
  // this rank will no longer post: abort, so that every one of them ends.
  if (first_error) st->t->Abort(s);
  MutexLock l(&st->mu);
  if (--st->outstanding == 0) st->idle.SignalAll();
}

absl::Status AllReducePipelinedRing::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  if (n == 1) {
    if (output != input) CopyBytes(output, input, p_.num_elements * elem_bytes_);
    return absl::OkStatus();
  }
  if (t.size() != n || t.rank() != r) {
    return absl::InternalError(absl::StrCat("pipelined ring all-reduce for rank ", r, " of ", n,
                                            " runs over a transport of rank ", t.rank(), " of ",
                                            t.size()));
  }
  State st;
  st.t = &t;
  st.in = static_cast<const char*>(input);
  st.out = static_cast<char*>(output);
  st.right = (r + 1) % n;
  st.left = (r + n - 1) % n;
  st.in_place = input == output;
  if (st.in_place) {
    if (!slots_.IsInitialized()) {
      STRATA_ASSIGN_OR_RETURN(
          slots_, AllocateScratch(p_, static_cast<int64_t>(slot_bytes_) * num_slots_));
    }
    MutexLock l(&st.mu);
    st.slot_of.assign(static_cast<size_t>(pieces_) * (n - 1), nullptr);
    for (int k = 0; k < num_slots_; ++k) {
      st.free_slots.push_back(static_cast<char*>(slots_.raw_data()) + k * slot_bytes_);
    }
    for (int s = 0; s < n - 1; ++s) {
      for (int j = 0; j < pieces_; ++j) st.queued.emplace_back(s, j);
    }
  }
  // Receives first, so that their grants are on the way before any data.
  // The count starts at 1, so that it cannot reach 0 while posting.
  {
    MutexLock l(&st.mu);
    st.outstanding = 1;
  }
  auto start = [&] {
    if (st.in_place) {
      PostQueuedScatterRecvs(&st);
    } else {
      for (int j = 0; j < pieces_; ++j) {
        for (int s = 0; s < n - 1; ++s) Post(&st, Op::kScatterRecv, s, j);
        Post(&st, Op::kGatherRecv, 0, j);
      }
    }
    for (int j = 0; j < window_; ++j) PostNextFirstSend(&st);
    MutexLock l(&st.mu);
    if (--st.outstanding == 0) st.idle.SignalAll();
  };
  // Over TCP this thread reads, writes and merges itself while it waits:
  // handing every step from the transport's I/O thread to this one cost two
  // thread wake-ups per step.
  if (!drive_) start();
  if (!drive_ || !t.DriveUntil(start, [&st] {
        MutexLock l(&st.mu);
        return st.outstanding == 0;
      })) {
    MutexLock l(&st.mu);
    while (st.outstanding > 0) st.idle.Wait(&st.mu);
  }
  MutexLock l(&st.mu);
  return st.status;
}

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "pipelined_ring",
                                     AllReducePipelinedRing);

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> CreatePipelinedRingAllReduce(
    const AlgorithmParams& params, const PipelinedRingOptions& options) {
  if (params.type != CollectiveType::kAllReduce) {
    return absl::InvalidArgumentError("pipelined_ring is an all-reduce algorithm");
  }
  if (options.piece_bytes == 0) {
    return absl::InvalidArgumentError("pipelined_ring: piece_bytes must be >= 1");
  }
  STRATA_RETURN_IF_ERROR(CheckReducible(params.dtype));
  return std::unique_ptr<CollectiveAlgorithm>(
      new AllReducePipelinedRing(params, options));
}

}  // namespace strata
