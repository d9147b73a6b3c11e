// DistributedCollectiveExecutor: the CollectiveExecutor of one worker process
// of a multi-worker cluster. W workers (ranks 0..W-1) each run a Session over
// L local devices (the same L everywhere); a collective's group_size is the
// global replica count W*L and its group_key/instance_key are the same on
// every worker. This executor meets the L local participants of a collective
// the way LocalCollectiveExecutor does (it is one, with the run replaced),
// then runs the cross-worker part over `transport`, this worker's end of the
// cross-worker communicator:
//   - all-reduce is hierarchical: the L local inputs are reduced in one pass
//     into a scratch buffer, the W local sums are all-reduced across workers
//     (algorithm from SelectAlgorithm(..., transport->kind()):
//     over TCP the pipelined ring, over shared memory AllReduceShm), and the
//     L local outputs share that one buffer; Div divides by the global
//     group_size;
//   - all-gather: output is worker-major, then local device order (a
//     device's global rank is worker_rank * L + its index among this
//     worker's member device names sorted);
//   - broadcast: the workers exchange who holds the sender, then broadcast
//     across workers from that one, and every local participant gets it.
// With num_workers == 1 it is exactly a LocalCollectiveExecutor.
//
// Ordered collectives: AllReduceShm reduces in the segment's one workspace, so
// every worker must run those all-reduces one at a time and in one order, while
// each worker's graph starts them in its own order. Worker 0 decides: it runs
// them in the order they start on it and announces each through the transport's
// shared workspace (SharedWorkspace::Announce) just before; the others run them
// in announced order, each waiting for the announced one to start here. One
// lane thread per executor runs them; the last arriver's thread queues an
// instance straight there (no pool thread, whose wake-up per collective costs
// 35-60 us on a VM and preempts a busy core) unless the workers must first
// compare descriptors. This cannot deadlock while every worker runs the same
// graphs: an instance started on worker 0 depends only on collectives that
// finished there, hence everywhere, so it starts everywhere. Empty all-reduces
// skip the order (they move nothing). All-gathers and reduce-scatters by the
// segment's algorithms ("shm") take the same lane.
//
// Matching across workers does not use step_id (processes may run different
// numbers of Session::Run calls): the k-th execution of (group_key,
// instance_key) here meets the k-th on every other worker, and its messages
// carry tags built from (group_key, instance_key, k mod 2^14, algorithm
// tag), so group_key must be in [0, 65536) and instance_key in [0, 2^24).
// Before the first execution of a (group, instance), for every broadcast, and
// whenever this worker's description changes, the workers exchange a
// fixed-size descriptor (type, dtype, shape, merge/final op, hint, group
// size) and compare it before any data moves: a mismatch is InvalidArgument
// on every worker, naming every worker and what it has. (Were only some
// workers' descriptions to change, the others would not expect an exchange
// and that collective would time out instead.) Concurrent executions of one
// (group, instance) must start in the same order on every worker.
//
// Every cross-worker execution is recorded in the flight recorder
// (flight_recorder.h) from its start here to its end, for hang diagnoses.
//
// Failures: a cross-worker part that has not finished within the
// collective's timeout fails with DeadlineExceeded naming the worker tasks
// it still waits for; a transport error, a timeout or a cancelled step
// while data moves breaks the communicator: it is aborted, on_fatal_error
// runs once with that error, and every later collective fails at once with
// it. (A description mismatch does not break it: every worker sees it
// alike. A local device that never arrives fails this worker's local
// participants as in LocalCollectiveExecutor; the peers then time out.)
//
//   DistributedCollectiveExecutorOptions o;
//   o.worker_rank = 1; o.num_workers = 2;
//   o.worker_names = {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"};
//   o.transport = std::move(tcp_transport);      // rank 1 of 2
//   o.on_fatal_error = [&](const absl::Status& s) { coordination->ReportError(s); };
//   STRATA_ASSIGN_OR_RETURN(auto ce, DistributedCollectiveExecutor::Create(std::move(o)));
//   session_options.collective_executor = ce.get();
//
// Thread-safety: thread-safe; collectives of different instances run
// concurrently, each cross-worker part on a worker-pool thread. Ownership:
// owns the transport; every collective must have finished (its `done`
// called) before the executor is destroyed. on_fatal_error runs on an
// executor thread without locks held; it must not destroy the executor.
#ifndef STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_H_
#define STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "kernels/collective.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/collective/local_collective_executor.h"
#include "runtime/collective/transport/shared_workspace.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

struct DistributedCollectiveExecutorOptions {
  int worker_rank = 0;
  int num_workers = 1;
  // Task names by worker rank, for errors ("/job:worker/replica:0/task:1");
  // empty: "/job:worker/replica:0/task:<rank>".
  std::vector<std::string> worker_names;
  // This worker's end of the cross-worker communicator (rank worker_rank of
  // num_workers). Null exactly when num_workers == 1.
  std::unique_ptr<Transport> transport;
  // For collectives whose timeout_seconds is <= 0. Must be positive.
  absl::Duration default_timeout = absl::Seconds(60);
  // Called once, with the error, when the cross-worker communicator breaks
  // (timeout, peer or transport failure, cancelled step mid-transfer).
  std::function<void(const absl::Status&)> on_fatal_error;
  // Where each cross-worker collective is recorded (flight_recorder.h);
  // null: the process's recorder.
  FlightRecorder* recorder = nullptr;
};

class DistributedCollectiveExecutor : public LocalCollectiveExecutor {
 public:
  // InvalidArgument for inconsistent options (ranks, names, transport).
  static absl::StatusOr<std::unique_ptr<DistributedCollectiveExecutor>> Create(
      DistributedCollectiveExecutorOptions options);
  ~DistributedCollectiveExecutor() override;

  void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                    CancellationManager* cancellation, DoneCallback done) override;

  // The error that broke the cross-worker communicator; OK while it works.
  absl::Status fatal_error() const ABSL_LOCKS_EXCLUDED(dmu_);
  // Breaks the communicator from outside (the cluster reported a lost
  // task): cross-worker parts in flight and every later collective fail
  // with `status`; on_fatal_error runs with it unless the communicator was
  // already broken. Idempotent: the first error is kept.
  void Abort(const absl::Status& status) ABSL_LOCKS_EXCLUDED(dmu_) { Fail(status); }

  // What the workers compare before moving data (fixed size; defined in the
  // .cc).
  struct Descriptor;

 protected:
  absl::StatusOr<int> LocalGroupSize(const CollectiveParams& params) const override;
  bool BroadcastSenderMayBeRemote() const override { return num_workers_ > 1; }
  void Start(std::shared_ptr<Instance> inst) override;
  void AbortStarted(const std::shared_ptr<Instance>& inst, const absl::Status& status,
                    bool is_timeout) override;

 private:
  class TaggedTransport;
  // One cross-worker execution: which peers it still waits for.
  struct Run {
    uint64_t tag_base = 0;
    uint64_t record = 0;                       // its flight recorder sequence number
    bool exchange = false;                     // compare descriptors first
    bool ordered ABSL_GUARDED_BY(mu) = false;  // queued for the workspace (see above)
    mutable Mutex mu;
    std::map<int, int> pending ABSL_GUARDED_BY(mu);  // peer worker -> ops in flight
    bool failed ABSL_GUARDED_BY(mu) = false;         // an operation ended in error
  };
  // Per (group_key, instance_key): the execution count and the description
  // last agreed on.
  struct Series {
    uint32_t next = 0;
    bool agreed = false;
    std::string description;
  };

  // An all-reduce's cross-worker part, ready to run (defined in the .cc).
  struct AllReduceJob;
  // The queue of ordered collectives, by Run::tag_base (the same id on
  // every worker).
  struct Lane {
    std::deque<uint64_t> order;  // worker 0: in the order they started
    std::map<uint64_t, std::function<void(absl::Status)>> ready;
    bool has_announced = false;  // not worker 0: `announced` runs next
    uint64_t announced = 0;
    bool stop = false;    // the destructor: the lane thread exits
    absl::Status broken;  // the communicator broke: fail at once
  };

  explicit DistributedCollectiveExecutor(DistributedCollectiveExecutorOptions options);

  // The cross-worker part and the local fan-out of a started instance.
  void RunInstance(std::shared_ptr<Instance> inst, std::shared_ptr<Run> run);
  // Ends a run: a failure that is not `symmetric` breaks the communicator;
  // every local participant gets `status` and `output`.
  void FinishRun(const std::shared_ptr<Instance>& inst, absl::Status status, bool symmetric,
                 Tensor output);
  // As FinishRun, each local participant (by index) getting its own output
  // (a reduce-scatter's blocks).
  void FinishRunEach(const std::shared_ptr<Instance>& inst, absl::Status status, bool symmetric,
                     std::vector<Tensor> outputs);
  absl::StatusOr<std::string> AllReduceAlgorithm(const CollectiveParams& p,
                                                 const Transport& t) const;
  // Whether a collective by `algorithm` runs on the lane (the segment's).
  bool IsOrdered(const std::string& algorithm, int64_t num_elements) const;
  // The job of `inst` with `algorithm` (AllReduceAlgorithm's pick), the
  // local inputs already summed.
  absl::StatusOr<std::unique_ptr<AllReduceJob>> PrepareAllReduce(Instance& inst,
                                                                 const std::string& algorithm);
  absl::Status RunAllReduce(AllReduceJob& job, Transport& t);
  // Queues `fn` under `id` for the ordered workspace; it runs with OK in its
  // turn, or with the error that broke the communicator.
  void SubmitOrdered(uint64_t id, std::function<void(absl::Status)> fn)
      ABSL_LOCKS_EXCLUDED(lane_mu_);
  // The lane thread: runs the queue in order until the destructor stops it.
  void LaneLoop() ABSL_LOCKS_EXCLUDED(lane_mu_);
  // Queues an all-reduce job for the lane; ends the run on failure.
  void SubmitAllReduce(std::shared_ptr<Instance> inst, const std::shared_ptr<Run>& run,
                       std::unique_ptr<AllReduceJob> job);
  void BreakLane(const absl::Status& status) ABSL_LOCKS_EXCLUDED(lane_mu_);
  // Where ordered run `id` stands, for a timeout's message.
  std::string LaneState(uint64_t id) const ABSL_LOCKS_EXCLUDED(lane_mu_);
  // "group 1 instance 7 (execution 3 mod 2^14)".
  static std::string LaneIdText(uint64_t id);
  // The cross-worker algorithm of an all-gather or reduce-scatter: "shm"
  // ones run on the lane, like AllReduceShm.
  absl::StatusOr<std::string> GatherScatterAlgorithm(const Instance& inst, const Transport& t) const;
  absl::Status RunAllGather(Instance& inst, Transport& t, const std::string& algorithm, Tensor* out);
  // Reduce-scatter: the local inputs merged, the cross-worker reduce-scatter
  // of this worker's region of blocks, each participant's block into
  // (*outs)[participant index].
  absl::Status RunReduceScatter(Instance& inst, Transport& t, const std::string& algorithm,
                                std::vector<Tensor>* outs);
  // Queues an all-gather or reduce-scatter by `algorithm` for the lane.
  void SubmitGatherScatter(std::shared_ptr<Instance> inst, const std::shared_ptr<Run>& run,
                           std::string algorithm);
  absl::Status RunBroadcast(Instance& inst, Transport& t, const std::vector<Descriptor>& all,
                            Tensor* out);
  // Sends ours to every peer and receives theirs; `all` by worker rank.
  absl::Status ExchangeDescriptors(Transport& t, const Descriptor& mine,
                                   std::vector<Descriptor>* all);
  absl::Status CompareDescriptors(const Instance& inst, const std::vector<Descriptor>& all) const;
  // Breaks the communicator: the first error is kept, the transport
  // aborted and on_fatal_error run, once.
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(dmu_);
  std::string PendingPeers(const Run& run) const;

  const int worker_rank_;
  const int num_workers_;
  const std::vector<std::string> worker_names_;
  const std::unique_ptr<Transport> transport_;
  const std::function<void(const absl::Status&)> on_fatal_error_;
  FlightRecorder* const recorder_;

  mutable Mutex dmu_;
  absl::Status fatal_ ABSL_GUARDED_BY(dmu_);
  std::map<std::pair<int, int>, Series> series_ ABSL_GUARDED_BY(dmu_);
  std::map<uint64_t, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(dmu_);  // by Instance::id

  // The transport's shared workspace (ordered all-reduces), or nullptr.
  SharedWorkspace* const workspace_;
  mutable Mutex lane_mu_;
  Lane lane_ ABSL_GUARDED_BY(lane_mu_);
  std::thread lane_thread_;  // started with the first ordered collective
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_H_
