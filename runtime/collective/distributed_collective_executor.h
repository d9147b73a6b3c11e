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
//     (algorithm from SelectCrossProcessAlgorithm(..., transport->kind()):
//     over TCP the pipelined ring; over shared memory the ring, never
//     AllReduceShm, whose one workspace needs every worker to run the
//     collectives in one agreed order), and the L local outputs share that
//     one buffer;
//     Div divides by the global group_size;
//   - all-gather: output is worker-major, then local device order (a
//     device's global rank is worker_rank * L + its index among this
//     worker's member device names sorted);
//   - broadcast: the workers exchange who holds the sender, then broadcast
//     across workers from that one, and every local participant gets it.
// With num_workers == 1 it is exactly a LocalCollectiveExecutor.
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
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "graph/mutex.h"
#include "kernels/collective.h"
#include "runtime/collective/local_collective_executor.h"
#include "runtime/collective/transport.h"

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
    bool exchange = false;  // compare descriptors first
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

  explicit DistributedCollectiveExecutor(DistributedCollectiveExecutorOptions options);

  // The cross-worker part and the local fan-out of a started instance.
  void RunInstance(std::shared_ptr<Instance> inst, std::shared_ptr<Run> run);
  absl::Status RunAllReduce(Instance& inst, Transport& t, Tensor* out);
  absl::Status RunAllGather(Instance& inst, Transport& t, Tensor* out);
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

  mutable Mutex dmu_;
  absl::Status fatal_ ABSL_GUARDED_BY(dmu_);
  std::map<std::pair<int, int>, Series> series_ ABSL_GUARDED_BY(dmu_);
  std::map<uint64_t, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(dmu_);  // by Instance::id
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_H_
