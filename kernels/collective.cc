#include "kernels/collective.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace strata {

absl::StatusOr<MergeOp> ParseMergeOp(const std::string& s) {
  if (s == "Add") return MergeOp::kAdd;
  if (s == "Mul") return MergeOp::kMul;
  if (s == "Min") return MergeOp::kMin;
  if (s == "Max") return MergeOp::kMax;
  return absl::InvalidArgumentError(
      absl::StrCat("merge_op is '", s, "', expected one of Add, Mul, Min, Max"));
}

absl::StatusOr<FinalOp> ParseFinalOp(const std::string& s) {
  if (s == "Id") return FinalOp::kId;
  if (s == "Div") return FinalOp::kDiv;
  return absl::InvalidArgumentError(absl::StrCat("final_op is '", s, "', expected Id or Div"));
}

const char* CollectiveTypeName(CollectiveType t) {
  switch (t) {
    case CollectiveType::kAllReduce: return "all-reduce";
    case CollectiveType::kAllGather: return "all-gather";
    case CollectiveType::kBroadcastSend: return "broadcast-send";
    case CollectiveType::kBroadcastRecv: return "broadcast-recv";
    case CollectiveType::kReduceScatter: return "reduce-scatter";
  }
  return "unknown collective";
}

absl::Status CheckReduceScatterShape(const CollectiveParams& p) {
  if (p.type != CollectiveType::kReduceScatter) return absl::OkStatus();
  if (p.shape.dims() == 0 || p.group_size < 1 || p.shape.dim_size(0) % p.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce-scatter needs an input whose dimension 0 splits into the group's ", p.group_size,
        " equal blocks, got shape ", p.shape.DebugString()));
  }
  return absl::OkStatus();
}

const char* MergeOpName(MergeOp op) {
  switch (op) {
    case MergeOp::kAdd: return "Add";
    case MergeOp::kMul: return "Mul";
    case MergeOp::kMin: return "Min";
    case MergeOp::kMax: return "Max";
  }
  return "unknown merge op";
}

namespace {

// How long synchronous callers waited lately (an exponential moving
// average over all of them, in nanoseconds), which decides whether the next
// one polls before it sleeps.
std::atomic<int64_t> recent_wait_ns{0};

// A caller that waits for the other participants sleeps on a futex, and on
// the shared VMs Strata is measured on being woken costs 20-60 us: more than
// a whole 1 MiB all-reduce among a process's devices. So while recent waits
// were short, a caller first polls for up to twice the recent wait (at most
// kMaxPoll), and sleeps only if that did not suffice. A poll first helps
// with the executor's pending work (the other participants' reduction, say:
// a polling thread on another core is a free helper), else yields its core
// to whichever thread is runnable (with fewer cores than participants, the
// thread being waited for). Once waits grow long (a loaded machine, slow
// peers, large tensors), polling could not pay for itself and callers go
// straight to sleep; an executor can also decline it (PollWhileWaiting).
// Measured with //runtime/collective:collective_bench, interleaved with the
// sleeping wait on a quiet machine: 4 devices on 2 cores, 1 MiB 45-54 ->
// 36-40 us per all-reduce (busbw 0.46-0.55 -> 0.63-0.70 of memcpy).
constexpr int64_t kMaxPollNs = 50'000;

}  // namespace

absl::StatusOr<Tensor> CollectiveExecutor::Execute(const CollectiveParams& params, Tensor input,
                                                   Allocator* allocator,
                                                   CancellationManager* cancellation) {
  Notification done;
  std::atomic<bool> finished{false};
  absl::Status status;
  Tensor output;
  const absl::Time start = absl::Now();
  ExecuteAsync(params, std::move(input), allocator, cancellation,
               [&](absl::Status s, Tensor out) {
                 status = std::move(s);
                 output = std::move(out);
                 finished.store(true, std::memory_order_release);
                 done.Notify();
               });
  const int64_t recent = recent_wait_ns.load(std::memory_order_relaxed);
  if (recent < kMaxPollNs && !finished.load(std::memory_order_acquire) &&
      PollWhileWaiting(params)) {
    const absl::Time until = start + absl::Nanoseconds(std::min(kMaxPollNs, 2 * recent + 5'000));
    while (!finished.load(std::memory_order_acquire) && absl::Now() < until) {
      if (!HelpWhileWaiting()) sched_yield();
    }
  }
  done.WaitForNotification();
  // A racy average is fine: it only tunes the next wait.
  const int64_t waited = absl::ToInt64Nanoseconds(absl::Now() - start);
  recent_wait_ns.store(recent + (std::min<int64_t>(waited, 10 * kMaxPollNs) - recent) / 8,
                       std::memory_order_relaxed);
  if (!status.ok()) return status;
  return output;
}

}  // namespace strata
