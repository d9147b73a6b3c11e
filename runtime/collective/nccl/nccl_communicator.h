// NcclClique: the NCCL communicators of one clique that live in this process
// (one per local GPU), the collectives issued on them as one grouped launch,
// their abort, and a watchdog that turns NCCL's asynchronous errors into a
// Status. Two ways to make one:
//   - CreateLocal(ordinals): every rank is in this process (MirroredStrategy
//     on the local GPUs), ncclCommInitAll; rank i is ordinals[i].
//   - CreateRanks(first_rank, nranks, ordinals, store, key) / CreateRank:
//     a clique spread over processes (MultiWorkerMirroredStrategy: one rank
//     per (worker, local GPU)). Rank 0 makes the ncclUniqueId and publishes
//     it in the cluster's KeyValueStore under `key`; the others block-get it
//     (nccl_unique_id.h). The communicators are created non-blocking
//     (ncclConfig_t blocking = 0) and polled with ncclCommGetAsyncError
//     against the init timeout: a rank that never joins gives
//     DeadlineExceeded naming the ranks still waiting, not a hang.
//
//   STRATA_ASSIGN_OR_RETURN(auto clique, NcclClique::CreateLocal({0, 1}));
//   std::vector<NcclLaunch> l = {{in0, out0, stream0}, {in1, out1, stream1}};
//   STRATA_RETURN_IF_ERROR(clique->AllReduce(l, n, DT_FLOAT, MergeOp::kAdd, FinalOp::kDiv));
//   // out0/out1 hold the mean once stream0/stream1 reach this point.
//
// Collectives are enqueued on the given cudaStream_t of each local rank and
// return without synchronizing. NCCL errors that happen later (a peer died, a
// network error) surface through ncclCommGetAsyncError: the watchdog thread
// polls it, and the first error breaks the clique: its communicators are
// aborted (ncclCommAbort, which also ends kernels blocked on a dead peer),
// `on_error` runs once with the error, and every later call returns it.
// Errors name the clique's ranks and GPUs and carry NCCL's error string and
// last-error text (ncclGetErrorString, ncclGetLastError).
//
// Thread-safety: thread-safe. Launches are serialized (NCCL requires calls on
// one communicator to come from one thread at a time). Abort may be called
// from any thread, including while a launch is polling a non-blocking
// communicator. Ownership: the clique owns its communicators; the destructor
// finalizes and destroys them (aborts them if broken). Streams and buffers are
// borrowed for the duration of the enqueue; the work they receive must finish
// (or the clique be aborted) before the buffers are freed. `store` is used
// only during CreateRanks. on_error must not destroy the clique.
#ifndef STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_
#define STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "graph/types.h"
#include "kernels/collective.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {

// float32, float16, bfloat16, float64, int32, int64, int8, uint8; otherwise
// InvalidArgument naming the dtype and the supported ones.
absl::StatusOr<ncclDataType_t> ToNcclDataType(DataType dtype);
// Add/Mul/Min/Max -> ncclSum/ncclProd/ncclMin/ncclMax; with FinalOp::kDiv,
// Add becomes ncclAvg (NCCL divides by the rank count: floats pre-multiply
// by 1/n, integers truncate after the sum, as Strata's CPU Div does); Div with
// another merge op is InvalidArgument (TensorFlow defines Div only after Add).
absl::StatusOr<ncclRedOp_t> ToNcclRedOp(MergeOp op, FinalOp final_op);
// An NCCL result as a Status: `context`, NCCL's string for `result` and, when
// non-empty, `last_error` (ncclGetLastError). Unavailable for system and
// remote errors (a peer or the network), InvalidArgument for invalid
// argument/usage, Internal for the rest. OK for ncclSuccess.
absl::Status NcclResultToStatus(ncclResult_t result, const std::string& context,
                                const std::string& last_error = "");

// A fresh ncclUniqueId (ncclGetUniqueId) as kNcclUniqueIdBytes bytes. Needs no
// GPU (NCCL opens its bootstrap socket here), only a network interface.
absl::StatusOr<std::string> MakeNcclUniqueId();

struct NcclCliqueOptions {
  // How long CreateRanks waits for every rank to join (the unique-id Get
  // included).
  absl::Duration init_timeout = absl::Seconds(60);
  // How often the watchdog polls ncclCommGetAsyncError; zero: no watchdog
  // thread (CheckAsyncErrors may still be called).
  absl::Duration watchdog_interval = absl::Milliseconds(100);
  // Runs once with the error that broke the clique (an asynchronous NCCL
  // error, a launch that timed out, or Abort), on the thread that found it.
  std::function<void(const absl::Status&)> on_error;
};

// One local rank's part of a collective: device buffers on that rank's GPU and
// the stream (cudaStream_t) the collective is enqueued on.
struct NcclLaunch {
  const void* send = nullptr;
  void* recv = nullptr;
  void* stream = nullptr;
};

class NcclClique {
 public:
  // Ranks 0..n-1 on GPUs ordinals[0..n-1], all in this process. Errors:
  // InvalidArgument (empty or repeated ordinals), FailedPrecondition (no GPU
  // or an ordinal past the device count, naming cudaGetDeviceCount's answer),
  // NCCL's error otherwise.
  static absl::StatusOr<std::unique_ptr<NcclClique>> CreateLocal(const std::vector<int>& ordinals,
                                                                 NcclCliqueOptions options = {});
  // Ranks first_rank..first_rank+n-1 of an nranks clique on GPUs
  // ordinals[0..n-1], the rest in other processes that call this with the
  // same nranks and key. The unique id goes through `store` under `key`
  // (insert-once: each clique needs a fresh key). Errors as CreateLocal, plus
  // InvalidArgument (ranks out of range, a malformed id in the store) and
  // DeadlineExceeded (rank 0 never published, or a rank never joined within
  // init_timeout, naming them).
  static absl::StatusOr<std::unique_ptr<NcclClique>> CreateRanks(
      int first_rank, int nranks, const std::vector<int>& ordinals, KeyValueStore* store,
      const std::string& key, NcclCliqueOptions options = {});
  // One rank of a multi-process clique (CreateRanks with one ordinal).
  static absl::StatusOr<std::unique_ptr<NcclClique>> CreateRank(int rank, int nranks, int ordinal,
                                                                KeyValueStore* store,
                                                                const std::string& key,
                                                                absl::Duration timeout);
  ~NcclClique();
  NcclClique(const NcclClique&) = delete;
  NcclClique& operator=(const NcclClique&) = delete;

  int nranks() const { return nranks_; }
  int first_rank() const { return first_rank_; }
  int num_local() const { return static_cast<int>(ordinals_.size()); }
  const std::vector<int>& ordinals() const { return ordinals_; }
  // "NCCL clique of 4 ranks (ranks 2-3 here on GPUs 0,1)".
  std::string Describe() const;

  // Each takes one NcclLaunch per local rank, in local rank order, enqueues
  // the collective on every local rank's stream as one NCCL group and
  // returns. `deadline` bounds the wait for a non-blocking communicator that
  // is still connecting to its peers; past it the clique is aborted
  // (DeadlineExceeded). A broken clique fails at once with the error that
  // broke it (FailedPrecondition).
  //
  // recv[i] = op over all ranks of send (count elements each).
  absl::Status AllReduce(absl::Span<const NcclLaunch> launches, int64_t count, DataType dtype,
                         MergeOp op, FinalOp final_op, absl::Time deadline = absl::InfiniteFuture());
  // recv (recv_count elements) = block r (this rank's) of op over all
  // ranks of send (nranks * recv_count elements each).
  absl::Status ReduceScatter(absl::Span<const NcclLaunch> launches, int64_t recv_count,
                             DataType dtype, MergeOp op, FinalOp final_op,
                             absl::Time deadline = absl::InfiniteFuture());
  // recv (nranks * send_count elements) = every rank's send in rank order.
  absl::Status AllGather(absl::Span<const NcclLaunch> launches, int64_t send_count, DataType dtype,
                         absl::Time deadline = absl::InfiniteFuture());
  // recv = root's send (`root` is a clique rank; send is read only on root).
  absl::Status Broadcast(absl::Span<const NcclLaunch> launches, int64_t count, DataType dtype,
                         int root, absl::Time deadline = absl::InfiniteFuture());

  // Polls ncclCommGetAsyncError on every communicator once (what the
  // watchdog does); an error breaks the clique. Returns the clique's status.
  absl::Status CheckAsyncErrors();
  // OK while the clique works; else the error that broke it.
  absl::Status status() const;
  // Breaks the clique with `reason`: every communicator is aborted
  // (ncclCommAbort), on_error runs unless it already has, and every later
  // call fails. Idempotent: the first reason is kept.
  void Abort(const absl::Status& reason);

 private:
  NcclClique(int first_rank, int nranks, std::vector<int> ordinals, NcclCliqueOptions options);

  // Polls until no communicator is ncclInProgress or `deadline`; the first
  // error (or the timeout) is returned and breaks the clique.
  absl::Status WaitReadyLocked(absl::Time deadline, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  // Checks the launches, then issues `issue(i, comm, stream)` for every local
  // rank inside one ncclGroupStart/End.
  absl::Status Launch(const std::string& what, absl::Span<const NcclLaunch> launches,
                      bool needs_send, absl::Time deadline,
                      const std::function<ncclResult_t(int, ncclComm_t, cudaStream_t)>& issue)
      ABSL_LOCKS_EXCLUDED(call_mu_);
  absl::Status IssueGrouped(const std::string& what, absl::Span<const NcclLaunch> launches,
                            bool needs_send, absl::Time deadline,
                            const std::function<ncclResult_t(int, ncclComm_t, cudaStream_t)>& issue)
      ABSL_LOCKS_EXCLUDED(call_mu_);
  // Records the first error; returns false if the clique was already broken.
  bool MarkBroken(const absl::Status& s) ABSL_LOCKS_EXCLUDED(state_mu_);
  // Runs on_error once the clique is broken, once; call without call_mu_
  // (on_error may call Abort).
  void NotifyIfBroken() ABSL_LOCKS_EXCLUDED(call_mu_, state_mu_);
  void AbortCommsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  absl::Status CheckAsyncErrorsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  std::string LastError(ncclComm_t comm) const;
  void StartWatchdog();
  void WatchdogLoop();

  // Const after construction.
  const int first_rank_;
  const int nranks_;
  const std::vector<int> ordinals_;
  const NcclCliqueOptions options_;

  // Serializes NCCL calls on the communicators and guards their lifetime.
  mutable Mutex call_mu_;
  std::vector<ncclComm_t> comms_ ABSL_GUARDED_BY(call_mu_);

  mutable Mutex state_mu_;
  absl::Status status_ ABSL_GUARDED_BY(state_mu_);
  bool notified_ ABSL_GUARDED_BY(state_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(state_mu_) = false;
  CondVar stop_cv_;
  // Read without locks by a launch polling a non-blocking communicator, so
  // that Abort from another thread ends the poll.
  std::atomic<bool> broken_{false};
  std::thread watchdog_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_
