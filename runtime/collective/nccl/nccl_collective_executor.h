// NcclCollectiveExecutor: the CollectiveExecutor (kernels/collective.h) for
// GPU devices, over NCCL. It is a LocalCollectiveExecutor with the run
// replaced: the meeting of this process's participants (groups, ranks by
// sorted device name, instance matching, agreement checks, the timeout that
// names missing devices, cancellation) is the base class's; once every local
// participant has arrived it
//   1. gets the group's NcclClique, made on first use: CreateLocal over the
//      members' GPUs with one worker, else CreateRanks with one NCCL rank per
//      (worker, local GPU) -- global rank worker_rank * L + local rank -- and
//      the unique id published by worker 0 in `store` under
//      "<key_prefix>/group/<group_key>";
//   2. allocates each output from its participant's allocator, records an
//      event on each device's compute stream and makes that device's
//      collective stream (one per device, owned here) wait for it, so the
//      collective sees its input and a recycled output buffer is no longer in
//      use by earlier kernels;
//   3. issues one grouped NCCL call across the local ranks on the collective
//      streams (all-reduce: Add/Mul/Min/Max, Div as ncclAvg; all-gather:
//      worker-major then local rank order; broadcast: the sender's global
//      rank is found with a one-element NCCL sum when it may be on another
//      worker);
//   4. waits on a worker thread (polling an event per device) until the
//      collective has finished on every device, then ends every participant.
// Compute streams never wait for collectives: kernels that consume an output
// are enqueued only after `done`, when it is complete, so the compute stream
// keeps running other kernels while a collective is in flight.
//
// Failures break the executor, as in DistributedCollectiveExecutor: a
// collective that does not finish within its timeout (DeadlineExceeded
// naming the instance and the workers), a step cancelled mid-collective, an
// asynchronous NCCL error found by a clique's watchdog, a clique that cannot
// be made, or Abort() -- each aborts every clique (ncclCommAbort), runs
// on_fatal_error once, and fails every later collective at once with that
// error. Bad input (a non-GPU device, disagreeing participants, a dtype NCCL
// lacks) fails only that collective.
//
//   NcclCollectiveExecutorOptions o;
//   o.devices = {gpu0, gpu1};                 // this process's GPU devices
//   o.worker_rank = 1; o.num_workers = 2;     // one worker: leave the defaults
//   o.store = coordination_client;            // needed with several workers
//   o.key_prefix = "nccl/run-42";             // unique per cluster incarnation
//   o.on_fatal_error = [&](const absl::Status& s) { coordination->ReportError(s); };
//   STRATA_ASSIGN_OR_RETURN(auto ce, NcclCollectiveExecutor::Create(std::move(o)));
//   session_options.collective_executor = ce.get();
//
// Across workers, collectives of one group must start in the same order on
// every worker (NCCL's rule), and the participants' descriptions are not
// compared across workers (a shape that differs between workers times out).
//
// Thread-safety: thread-safe. Launches of all cliques are serialized so that
// every device's collective stream sees them in one order. Ownership: the
// devices and the store are borrowed and must outlive the executor; every
// collective must have finished before it is destroyed. on_fatal_error runs
// without locks held and must not destroy the executor.
#ifndef STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COLLECTIVE_EXECUTOR_H_
#define STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COLLECTIVE_EXECUTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "kernels/collective.h"
#include "kernels/device_base.h"
#include "runtime/collective/local_collective_executor.h"
#include "runtime/collective/nccl/nccl_communicator.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {

struct NcclCollectiveExecutorOptions {
  // This process's GPU devices (each with a gpu_context()), one per ordinal.
  std::vector<const DeviceBase*> devices;
  int worker_rank = 0;
  int num_workers = 1;
  // Task names by worker rank, for errors; empty: "/job:worker/replica:0/task:<rank>".
  std::vector<std::string> worker_names;
  // Carries the NCCL unique ids between workers; required when num_workers > 1.
  KeyValueStore* store = nullptr;
  // Keys are "<key_prefix>/group/<group_key>"; the store's keys are
  // insert-once, so a restarted job needs a new prefix.
  std::string key_prefix = "nccl";
  // For collectives whose timeout_seconds is <= 0, and for making a clique.
  absl::Duration default_timeout = absl::Seconds(60);
  // How often each clique's watchdog polls for asynchronous NCCL errors.
  absl::Duration watchdog_interval = absl::Milliseconds(100);
  // Called once with the error that broke the executor.
  std::function<void(const absl::Status&)> on_fatal_error;
};

class NcclCollectiveExecutor : public LocalCollectiveExecutor {
 public:
  // InvalidArgument for inconsistent options (no devices, a device without a
  // GPU context, a repeated ordinal, ranks, a missing store). Touches no GPU:
  // streams and cliques are made on first use.
  static absl::StatusOr<std::unique_ptr<NcclCollectiveExecutor>> Create(
      NcclCollectiveExecutorOptions options);
  ~NcclCollectiveExecutor() override;

  void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                    CancellationManager* cancellation, DoneCallback done) override;

  // OK while the executor works; else the error that broke it.
  absl::Status fatal_error() const ABSL_LOCKS_EXCLUDED(dmu_);
  // Breaks the executor from outside (the cluster lost a task): every clique
  // is aborted, collectives in flight and later ones fail with `status`, and
  // on_fatal_error runs unless it already has. Idempotent.
  void Abort(const absl::Status& status) ABSL_LOCKS_EXCLUDED(dmu_) { Fail(status); }

 protected:
  absl::StatusOr<int> LocalGroupSize(const CollectiveParams& params) const override;
  bool BroadcastSenderMayBeRemote() const override { return num_workers_ > 1; }
  void Start(std::shared_ptr<Instance> inst) override;
  void AbortStarted(const std::shared_ptr<Instance>& inst, const absl::Status& status,
                    bool is_timeout) override;

 private:
  struct DeviceState {
    std::string name;
    int ordinal = -1;
    void* compute_stream = nullptr;     // the device's (borrowed)
    void* collective_stream = nullptr;  // ours, made on first use under dmu_
  };
  // One group's clique, made once by the first instance of the group.
  struct GroupClique {
    Mutex mu;
    bool tried ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    std::shared_ptr<NcclClique> clique ABSL_GUARDED_BY(mu);
    std::vector<int> ordinals ABSL_GUARDED_BY(mu);
  };

  explicit NcclCollectiveExecutor(NcclCollectiveExecutorOptions options);

  void RunInstance(std::shared_ptr<Instance> inst);
  absl::Status RunNccl(Instance& inst, std::vector<Tensor>* outputs);
  absl::StatusOr<std::shared_ptr<NcclClique>> GetClique(int group_key, const std::vector<int>& ordinals,
                                                        absl::Time deadline);
  absl::StatusOr<void*> CollectiveStream(DeviceState& d) ABSL_LOCKS_EXCLUDED(dmu_);
  // The sender's global rank: every rank contributes to a one-element NCCL
  // sum on its collective stream, in `scratch` (one device int64 per rank).
  absl::StatusOr<int> FindBroadcastRoot(Instance& inst, NcclClique& clique,
                                        const std::vector<DeviceState*>& devs,
                                        const std::vector<int>& order, std::vector<Tensor>& scratch,
                                        absl::Time deadline);
  // Waits until every event has completed; on a fatal error returns it (after
  // a bounded wait for the aborted kernels; see the .cc).
  absl::Status WaitForEvents(const std::vector<DeviceState*>& devs, const std::vector<void*>& events,
                             const std::string& what, std::vector<Tensor>* keep_alive);
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(dmu_);
  std::string WorkerList() const;

  const std::vector<std::string> worker_names_;
  const int worker_rank_;
  const int num_workers_;
  KeyValueStore* const store_;
  const std::string key_prefix_;
  const absl::Duration default_timeout_;
  const absl::Duration watchdog_interval_;
  const std::function<void(const absl::Status&)> on_fatal_error_;
  std::map<std::string, DeviceState> devices_;  // by name; the map is const after Create

  // Every clique's grouped launch, so that the collective streams of all
  // devices receive the NCCL kernels of different cliques in one order.
  Mutex launch_mu_;

  mutable Mutex dmu_;
  absl::Status fatal_ ABSL_GUARDED_BY(dmu_);
  std::map<int, std::shared_ptr<GroupClique>> cliques_ ABSL_GUARDED_BY(dmu_);
  // Buffers an aborted collective may still be touching on the GPU: kept
  // until the executor is destroyed rather than reused.
  std::vector<Tensor> graveyard_ ABSL_GUARDED_BY(dmu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_NCCL_NCCL_COLLECTIVE_EXECUTOR_H_
