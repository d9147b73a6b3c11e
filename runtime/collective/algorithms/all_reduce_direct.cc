#include "runtime/collective/algorithms/all_reduce_direct.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/collective/reduction.h"

namespace strata {

STRATA_REGISTER_COLLECTIVE_ALGORITHM(CollectiveType::kAllReduce, "direct", AllReduceDirect);

namespace {

// What a rank tells its peers: where its buffers are.
struct Buffers {
  const void* input;
  void* output;
};

constexpr uint64_t kTagAddresses = 0;
constexpr uint64_t kTagDone = 1;

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> AllReduceDirect::Create(const AlgorithmParams& p) {
  STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  if (!p.same_address_space) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all-reduce algorithm 'direct' reads the peers' buffers, so every rank must share one "
        "address space; this group's transport does not (use ring)"));
  }
  if (!p.peer_inputs.empty() && static_cast<int>(p.peer_inputs.size()) != p.size) {
    return absl::InvalidArgumentError(absl::StrCat("all-reduce 'direct' got ", p.peer_inputs.size(),
                                                   " peer inputs for ", p.size, " ranks"));
  }
  return std::unique_ptr<CollectiveAlgorithm>(new AllReduceDirect(p));
}

int64_t AllReduceDirect::SliceBegin(int r) const {
  // The first num_elements % size slices hold one element more.
  const int64_t base = p_.num_elements / p_.size, extra = p_.num_elements % p_.size;
  return r * base + std::min<int64_t>(r, extra);
}

absl::Status AllReduceDirect::Run(Transport& t, const void* input, void* output) {
  const int n = p_.size, r = p_.rank;
  const size_t elem = DataTypeSize(p_.dtype);
  if (p_.num_elements == 0) return absl::OkStatus();  // the same on every rank
  // 1. Exchange addresses unless the caller knows them. Receives are posted first (sends complete when
  // matched).
  std::vector<Buffers> peers(n);
  peers[r] = {input, output};
  if (!p_.peer_inputs.empty()) {
    // Known up front (one shared output): no exchange, so a rank starts
    // reducing without waiting for its peers to be scheduled.
    for (int q = 0; q < n; ++q) peers[q] = {p_.peer_inputs[q], output};
  } else {
    STRATA_RETURN_IF_ERROR(ExchangeWithPeers(t, kTagAddresses, &peers[r], peers.data(), sizeof(Buffers)));
  }
  // 2. Reduce this rank's slice from every input straight into its output,
  // then copy it to the outputs that are not the same buffer.
  const int64_t begin = SliceBegin(r), end = SliceBegin(r + 1);
  if (begin < end) {
    std::vector<const void*> inputs(n);
    for (int q = 0; q < n; ++q) inputs[q] = peers[q].input;
    ReduceInputs(p_.merge_op, p_.final_op, p_.dtype, inputs.data(), n, begin, end, output, n);
    const char* slice = static_cast<const char*>(output) + begin * elem;
    for (int q = 0; q < n; ++q) {
      bool seen = peers[q].output == output;
      for (int j = 0; j < q && !seen; ++j) seen = peers[j].output == peers[q].output;
      if (!seen) CopyBytes(static_cast<char*>(peers[q].output) + begin * elem, slice, (end - begin) * elem);
    }
  }
  // 3. Barrier: once every rank has said it is done, every slice is written
  // everywhere and nobody reads a peer's buffers any more.
  return ExchangeWithPeers(t, kTagDone, nullptr, nullptr, 0);
}

DirectReduction::DirectReduction(MergeOp merge_op, FinalOp final_op, DataType dtype,
                                 std::vector<const void*> inputs, int64_t num_elements,
                                 void* output, int64_t divisor)
    : DirectReduction(merge_op, final_op, dtype, {Segment{std::move(inputs), output}},
                      num_elements, divisor) {}

DirectReduction::DirectReduction(MergeOp merge_op, FinalOp final_op, DataType dtype,
                                 std::vector<Segment> segments, int64_t num_elements,
                                 int64_t divisor)
    : merge_op_(merge_op),
      final_op_(final_op),
      dtype_(dtype),
      segments_(std::move(segments)),
      num_elements_(num_elements),
      divisor_(divisor) {
  // Chunks of 1/32 of the output, 64 KiB to 1 MiB, in whole 4 KiB pages:
  // small enough that two threads finish within a chunk's time of each
  // other, large enough that taking one (an atomic on a shared line) costs
  // nothing next to it, and page-aligned so that two threads never write
  // one cache line. A chunk stays within one segment.
  const int64_t elem = DataTypeSize(dtype);
  const int64_t bytes = num_elements * elem * static_cast<int64_t>(segments_.size());
  int64_t chunk = std::min<int64_t>(std::max<int64_t>(bytes / 32, 64 << 10), 1 << 20);
  chunk = chunk / 4096 * 4096;
  chunk_elements_ = std::max<int64_t>(1, chunk / elem);
  chunks_per_segment_ = (num_elements + chunk_elements_ - 1) / chunk_elements_;
  num_chunks_ = chunks_per_segment_ * static_cast<int64_t>(segments_.size());
}

int64_t DirectReduction::Work() {
  const int64_t elem = DataTypeSize(dtype_);
  for (int64_t taken = 0;; ++taken) {
    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) return taken;
    if (!aborted_.load(std::memory_order_relaxed)) {
      const Segment& seg = segments_[c / chunks_per_segment_];
      const int64_t begin = (c % chunks_per_segment_) * chunk_elements_;
      const int64_t end = std::min(num_elements_, begin + chunk_elements_);
      if (seg.inputs.size() == 1 && final_op_ != FinalOp::kDiv) {
        std::memcpy(static_cast<char*>(seg.output) + begin * elem,
                    static_cast<const char*>(seg.inputs[0]) + begin * elem, (end - begin) * elem);
      } else {
        ReduceInputs(merge_op_, final_op_, dtype_, seg.inputs.data(),
                     static_cast<int>(seg.inputs.size()), begin, end, seg.output, divisor_);
      }
    }
    // Release: whoever sees the count complete sees every chunk's writes.
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks_) {
      MutexLock l(&mu_);
      done_.SignalAll();
    }
  }
}

void DirectReduction::WaitDone() {
  // What is left is at most one chunk per other thread (tens of
  // microseconds): spinning beats a futex wake-up (35-60 us on a busy VM),
  // and yielding lets that thread have this core if it lost its own.
  for (int i = 0; i < 4000 && !Done(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  const absl::Time yield_until = absl::Now() + absl::Microseconds(500);
  while (!Done() && absl::Now() < yield_until) sched_yield();
  MutexLock l(&mu_);
  while (!Done()) done_.Wait(&mu_);
}

void DirectReduction::Abort(const absl::Status& status) {
  MutexLock l(&mu_);
  if (status_.ok()) status_ = status.ok() ? absl::AbortedError("all-reduce aborted") : status;
  aborted_.store(true, std::memory_order_relaxed);
}

absl::Status DirectReduction::status() const {
  MutexLock l(&mu_);
  return status_;
}

}  // namespace strata
