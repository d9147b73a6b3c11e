// MultiWorkerMirroredStrategy: synchronous data-parallel training across the
// processes (workers) of a cluster, as
// tf.distribute.MultiWorkerMirroredStrategy. Model code written for
// MirroredStrategy works unchanged: every worker runs the same program; its
// replicas are its local devices, and collectives span every replica of
// every worker.
//
//   absl::StatusOr<ClusterSpec> spec = ClusterSpecFromEnvironment();  // TF_CONFIG
//   DeviceOptions machine;                                            // this worker's devices
//   auto s = *MultiWorkerMirroredStrategy::Create(*spec, {"/cpu:0"}, machine);
//   s->num_replicas_in_sync();   // workers x local devices
//   s->is_chief();               // worker 0 (chief:0, else worker:0) writes checkpoints
//   ... the same graph building and training loop as with MirroredStrategy ...
//   STRATA_RETURN_IF_ERROR(s->Shutdown());   // every worker, at the end
//
// What Create does, in order: starts this task's gRPC server on exactly its
// address from the cluster spec (the chief's also hosts the coordination
// service: coordination_service.h; in a rendezvous cluster, whose spec has
// only the chief's address, a task listens on a free port of its address
// facing the chief), registers with the coordination service
// (tasks may start in any order; registration waits up to startup_timeout
// for the others; a task whose cluster spec differs is refused, and the
// others fail too), tells the others its host through the service's
// key-value store, connects the cross-worker data plane (shared memory
// when every task's address has the same host, else TCP; `transport`
// overrides) with addresses exchanged through the service's key-value
// store, and makes the collective executor the sessions use: collectives
// reduce locally, then across workers (distributed_collective_executor.h).
//
// Variables are initialised on the chief and broadcast: every worker's
// first copy starts from the chief's initial value (SyncInitialValue), the
// other local copies from that. The input is auto-sharded
// (DistributedDataset, AUTO by default): by file where the pipeline reads at
// least as many files as there are workers (each worker reads its own
// files, in batches of global / workers), else by example (each worker
// takes its share of every global batch, so the cluster trains on the
// examples one process with all the replicas would); either way no two
// workers train on the same example. Only the chief should write checkpoints; every worker
// can restore one (the trainer does both).
//
// Failures: heartbeats run in the background; a lost task (killed, frozen,
// partitioned), an error any task reports (ReportError) and a failed
// collective become the cluster's error, delivered to every task
// (cluster_error()); collectives in flight and later ones fail with it, so
// a step never waits on a dead peer past the heartbeat timeout.
//
// Thread-safety: as for Strategy; cluster_error() and ReportError() may be
// called from any thread. Ownership: the strategy owns the server, the
// coordination client, the transport and the collective executor; sessions
// that run its graphs must be destroyed before it.
#ifndef STRATA_STRATEGY_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define STRATA_STRATEGY_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"
#include "strategy/cluster_resolver.h"
#include "strategy/mirrored_strategy.h"

namespace strata {
namespace distribute {

struct MultiWorkerOptions {
  // A task silent this long is declared lost (the coordination service's
  // heartbeat timeout; the chief's value is the cluster's).
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // How long start-up waits for every task to register and connect.
  absl::Duration startup_timeout = absl::Seconds(120);
  // How long Shutdown waits for the other tasks to finish.
  absl::Duration shutdown_timeout = absl::Seconds(60);
  // "auto" (shared memory when every task's address has the same host,
  // else TCP), "shm" or "tcp".
  std::string transport = "auto";
  // The job's token (runtime/security/job_token.h): the coordination
  // service and the data plane serve only tasks that prove it. Unset: read
  // from the environment (STRATA_JOB_TOKEN_FILE, STRATA_JOB_TOKEN; tools/
  // launch sets the latter), and Create fails with FailedPrecondition saying
  // where to put one if there is none, unless insecure_no_job_token (which
  // prints a warning: anyone who reaches a port can end or steer the job).
  std::optional<JobToken> job_token;
  bool insecure_no_job_token = false;
  // Mutual TLS (runtime/security/tls.h) on the coordination service's
  // gRPC and the TCP data plane (shared memory stays on one host). Unset:
  // from the environment (STRATA_TLS_CERT_FILE, STRATA_TLS_KEY_FILE,
  // STRATA_TLS_CA_FILE), else none. Every task's certificate must name
  // the host of its address in the cluster spec.
  std::optional<TlsConfig> tls;
  // The gRPC server listens on every interface at the task's port instead
  // of its address (Kubeflow's TFJob: a pod's own service name may not
  // resolve before the pod is ready). Peers still dial the spec's address.
  bool listen_on_all_interfaces = false;
  // Steps may place nodes on other workers' devices (pipeline stages on
  // other workers, strategy/pipeline.h): Create connects a second
  // transport between the workers for those tensors (shared memory or TCP,
  // chosen as the data plane's; CPU tensors), and
  // session_options_across_workers() gives sessions that span the workers
  // (SessionOptions::task_links). The cluster's error ends it too.
  bool steps_span_workers = false;
};

class MultiWorkerMirroredStrategy : public MirroredStrategy {
 public:
  // `devices`: this worker's devices, as for MirroredStrategy (every worker
  // must have as many). InvalidArgument for a cluster without workers or a
  // task that does not train (ps, evaluator), a bad device or transport;
  // the start-up errors above otherwise (naming the task or address).
  static absl::StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> Create(
      const ClusterSpec& cluster, const std::vector<std::string>& devices,
      const DeviceOptions& machine = DeviceOptions(),
      const StrategyOptions& options = StrategyOptions(),
      const MultiWorkerOptions& multi_worker = MultiWorkerOptions());
  ~MultiWorkerMirroredStrategy() override;

  const ClusterSpec& cluster() const { return cluster_; }
  bool is_chief() const { return worker_index() == 0; }
  // This task, "/job:worker/replica:0/task:1".
  std::string task_name() const { return cluster_.TaskPrefix(); }
  // Every training task's name, by worker index (the chief first).
  std::vector<std::string> worker_task_names() const;
  // "shm" or "tcp": what carries the cross-worker collectives; "nccl" when
  // the local devices are GPUs (NCCL carries them, no shm/TCP data plane;
  // its unique ids go through the coordination service's key-value store
  // under a prefix of the chief's incarnation, and the cluster's error
  // aborts the NCCL communicators).
  std::string transport_kind() const;
  // session_options() for a session that spans the workers (SPMD: every
  // worker creates it from the same graph and runs the same steps):
  // every other worker's devices and the links to them. FailedPrecondition
  // unless created with MultiWorkerOptions::steps_span_workers.
  absl::StatusOr<SessionOptions> session_options_across_workers() const;

  // The cluster's first error (a lost or restarted task, an error a task
  // reported, a failed cross-worker collective); OK while all is well.
  absl::Status cluster_error() const;
  // Runs `callback` once with the cluster's first error, on a background
  // thread (at once if it is already known).
  void OnClusterError(std::function<void(absl::Status)> callback);
  // `status` with every "rank N" of a cross-worker transport's message
  // followed by the task it is ("rank 1 (/job:worker/replica:0/task:1)").
  absl::Status NameTasks(const absl::Status& status) const;
  // Tells every task that this one failed with `error` (their collectives
  // fail with it); a no-op once the cluster has an error.
  void ReportError(const absl::Status& error);
  // The shutdown barrier: returns once every task has called it (or with
  // the error that stopped one). Call it once at the end on every worker, so
  // that the chief, which hosts the coordination service, leaves last.
  absl::Status Shutdown();

 protected:
  // Chief: broadcasts `initial` to the other workers' first copies;
  // others: receive it.
  Output SyncInitialValue(const strata::Scope& scope, Output initial,
                          const train::VariableArgs& args) override;

 private:
  struct Runtime;
  MultiWorkerMirroredStrategy(std::vector<std::string> devices, DeviceOptions machine,
                              StrategyOptions options, ClusterSpec cluster,
                              std::unique_ptr<Runtime> runtime);

  const ClusterSpec cluster_;
  std::unique_ptr<Runtime> runtime_;
  std::vector<std::string> task_names_;  // by worker index
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_MULTI_WORKER_MIRRORED_STRATEGY_H_
