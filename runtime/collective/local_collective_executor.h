// LocalCollectiveExecutor: the CollectiveExecutor for the devices of one
// process (a Session's virtual CPU devices, say). It
//   - resolves groups: group_key -> its group_size member devices; a device's
//     rank is its index among the members' names sorted, so every participant
//     derives the same ranks;
//   - matches instances: the calls with the same (group_key, instance_key,
//     step_id) meet; once all group_size have arrived it checks that they
//     agree (collective type, dtype, shape, merge/final op, hint; exactly one
//     broadcast sender), picks the algorithm from those group-wide values only
//     (SelectAlgorithm; all-reduce with hint auto: direct, whose ranks all
//     write one output buffer that every rank's output tensor shares) and
//     runs it: direct all-reduce as one chunked job (DirectReduction) on the
//     last arriver's thread, joined by spinning helper threads, one per
//     other core; other algorithms run every rank's part over an
//     InProcessMailbox, each on its own thread (the last arriver's on its
//     calling thread);
//   - bounds the wait: a collective that has not finished within its timeout
//     (the op's timeout_seconds, else the executor's default) fails on every
//     participant that arrived with DeadlineExceeded naming the missing
//     devices and ranks;
//   - aborts on cancellation: cancelling any participant's step fails the
//     whole instance with the step's status.
// A failure of any rank aborts the others (their error is the first one).
//
//   LocalCollectiveExecutor ce;   // LocalCollectiveExecutorOptions: default_timeout (60 s)
//   // on each of N threads, one per device:
//   absl::StatusOr<Tensor> sum = ce.Execute(params_for_my_device, my_tensor, allocator, &step_cm);
//
// Thread-safety: thread-safe. Ownership: it owns its worker threads and its
// timer thread; every collective must have finished (its `done` called)
// before it is destroyed.
#ifndef STRATA_RUNTIME_COLLECTIVE_LOCAL_COLLECTIVE_EXECUTOR_H_
#define STRATA_RUNTIME_COLLECTIVE_LOCAL_COLLECTIVE_EXECUTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "kernels/cancellation.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithms/all_reduce_direct.h"
#include "runtime/collective/transport/in_process_transport.h"
#include "runtime/collective/worker_pool.h"

namespace strata {

struct LocalCollectiveExecutorOptions {
  // For collectives whose timeout_seconds is <= 0. Must be positive.
  absl::Duration default_timeout = absl::Seconds(60);
};

class LocalCollectiveExecutor : public CollectiveExecutor {
 public:
  explicit LocalCollectiveExecutor(LocalCollectiveExecutorOptions options = {});
  ~LocalCollectiveExecutor() override;

  void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                    CancellationManager* cancellation, DoneCallback done) override;

  // Takes a share of a direct all-reduce's chunks that a helper thread has
  // not started yet.
  bool HelpWhileWaiting() override;
  // Only when this process's participants outnumber its cores: otherwise
  // every participant has a core, the helper threads take the other cores,
  // and a polling waiter would only take a core from them.
  bool PollWhileWaiting(const CollectiveParams& params) const override;

  // Worker threads started so far (for tests of thread reuse).
  int num_worker_threads() const { return workers_.num_threads(); }

  using InstanceKey = std::tuple<int, int, int64_t>;  // group, instance, step

 protected:
  // Extension points for an executor whose groups span processes
  // (DistributedCollectiveExecutor): the meeting of this process's
  // participants (groups, instances, timeouts, cancellation) stays here; what
  // runs once they have met is the subclass's. The defaults are the
  // in-process behaviour described above.
  struct Participant {
    CollectiveParams params;
    Tensor input;
    Allocator* allocator = nullptr;
    CancellationManager* cancellation = nullptr;
    CancellationToken token = kInvalidCancellationToken;
    DoneCallback done;
    int rank = -1;  // among this process's participants, by device name
  };
  struct Instance {
    uint64_t id = 0;
    InstanceKey key;
    int expected = 0;  // participants in this process (LocalGroupSize)
    std::vector<Participant> participants;  // arrival order; fixed once started
    bool started = false;
    int running = 0;  // participants started and not yet finished
    absl::Duration timeout;
    absl::Time deadline;     // creation + timeout
    bool timed_out = false;  // the watchdog has aborted it (guarded by mu_)
    std::string algorithm;
    std::shared_ptr<InProcessMailbox> mailbox;
    // Direct collectives (set before the job starts, then only read): each
    // participant's output, by arrival index: for all-reduce and all-gather
    // one buffer that every rank's output shares, for reduce-scatter each
    // rank's own block.
    std::vector<Tensor> direct_outputs;
    // A direct collective run as one chunked job, and the first abort of the
    // started instance (both guarded by the executor's lock): whichever of
    // RunDirect and AbortStarted comes second aborts the job.
    std::shared_ptr<DirectReduction> direct;
    absl::Status abort_status;
  };

  // How many of a collective's params.group_size participants live in this
  // process (InvalidArgument when that cannot be). Default: all of them.
  virtual absl::StatusOr<int> LocalGroupSize(const CollectiveParams& params) const {
    return params.group_size;
  }
  // Whether a broadcast may have no sender among this process's
  // participants (it is in another process). Default: false.
  virtual bool BroadcastSenderMayBeRemote() const { return false; }
  // Runs an instance whose local participants have all arrived, agree and
  // have their ranks; called on the last arriver's thread. It must end every
  // participant, through FinishParticipant or FailInstance. Default: the
  // algorithm over an in-process mailbox, each rank on its own thread.
  virtual void Start(std::shared_ptr<Instance> inst);
  // A started instance timed out (`is_timeout`, `status` is the timer's) or
  // its step was cancelled (`status` is the step's). Called without locks.
  // Default: aborts the mailbox with a DeadlineExceeded naming the instance.
  virtual void AbortStarted(const std::shared_ptr<Instance>& inst, const absl::Status& status,
                            bool is_timeout);
  // Ends participant `index` of a started instance; the last one to end
  // retires the instance (its timer and key).
  void FinishParticipant(const std::shared_ptr<Instance>& inst, int index, absl::Status status,
                         Tensor output) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every participant of a started instance none of which has run.
  void FailInstance(const std::shared_ptr<Instance>& inst, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // "all-reduce 'node' (group 1, instance 2, step 3, group_size 4)".
  std::string Describe(const Instance& inst) const;
  WorkerPool& workers() { return workers_; }
  // For a subclass whose overrides or tasks use its own members, to call
  // from its destructor, in this order: StopWatchdog stops the deadline timer
  // (waiting for a running Watchdog, which calls the virtual AbortStarted),
  // so that it never runs into a half-destroyed subclass (the base class's
  // members outlive the subclass's); StopWorkers joins the worker threads
  // (WorkerPool::Stop). Both idempotent.
  void StopWatchdog() { timer_.Stop(); }
  void StopWorkers() { workers_.Stop(); }

 private:
  class Helpers;  // threads that take chunks of a DirectReduction

  struct Group {
    int size = 0;
    int local_size = 0;             // members in this process
    std::set<std::string> members;  // sorted: a member's rank is its index
  };

  // Moves `p` into its instance (on error `p` is left as it was); returns the
  // instance when it became complete, else nullptr. `*cancelled`: p's step
  // was cancelled before it joined.
  absl::StatusOr<std::shared_ptr<Instance>> Join(Participant& p, bool* cancelled)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Checks agreement, assigns ranks and runs every rank's part.
  void Launch(std::shared_ptr<Instance> inst);
  // The in-process direct all-reduce, on the last arriver's thread with
  // helper threads; ends every participant.
  void RunDirect(std::shared_ptr<Instance> inst);
  void RunParticipant(std::shared_ptr<Instance> inst, int index);
  // Makes the watchdog run by `deadline`.
  void ArmWatchdog(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aborts every instance past its deadline (DeadlineExceeded) and re-arms
  // for the next deadline.
  void Watchdog() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails an instance (timeout, cancellation): before it started, every
  // arrived participant ends with `status`; after, its mailbox is aborted.
  void AbortInstance(const InstanceKey& key, uint64_t id, const absl::Status& status,
                     bool is_timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Deregisters the participant's cancellation callback and runs `done`.
  static void Finish(Participant& p, absl::Status status, Tensor output);
  // Finishes each on a worker thread (never inside a cancellation callback).
  void FailAll(std::vector<Participant> ps, const absl::Status& status);
  std::string MissingParticipants(const Instance& inst) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LocalCollectiveExecutorOptions options_;

  mutable Mutex mu_;
  absl::flat_hash_map<int, Group> groups_ ABSL_GUARDED_BY(mu_);
  std::map<InstanceKey, std::shared_ptr<Instance>> instances_ ABSL_GUARDED_BY(mu_);
  uint64_t next_instance_id_ ABSL_GUARDED_BY(mu_) = 1;
  // The one timer entry that enforces every instance's deadline.
  absl::Time watchdog_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t watchdog_id_ ABSL_GUARDED_BY(mu_) = 0;

  // Destroyed first (reverse order): the timer's and workers' callbacks use
  // the members above.
  std::unique_ptr<Helpers> helpers_;
  WorkerPool workers_;
  DeadlineTimer timer_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_LOCAL_COLLECTIVE_EXECUTOR_H_
