// ClusterCoordinator: the chief's side of asynchronous training with
// parameter servers, as tf.distribute.experimental.coordinator.
// ClusterCoordinator: Schedule queues a closure (a function each worker
// registered by name, runtime/rpc/worker_service.h, usually one training
// step on the worker's own data) and returns at once with a RemoteValue;
// each worker runs closures one at a time as it becomes free; Join waits
// for everything scheduled.
//
//   // each worker: register its step, serve (ParameterServerStrategy for the model)
//   worker_service->RegisterFunction("train_step", [&](const std::vector<Tensor>&) {
//     return RunOneStep(*session, *iterator);   // its own dataset iterator
//   });
//   // the chief:
//   auto coordinator = *ClusterCoordinator::Create(options);   // the workers' addresses
//   for (int i = 0; i < steps; ++i) losses.push_back(coordinator->Schedule("train_step"));
//   STRATA_RETURN_IF_ERROR(coordinator->Join());
//   absl::StatusOr<std::vector<Tensor>> last = losses.back()->Fetch();
//
// Worker failure: a closure whose call fails because its worker cannot be
// reached (the worker died, its host went away) goes back to the front of
// the queue and runs on another worker: every closure runs at least once,
// possibly more than once (TensorFlow's guarantee). The lost worker is
// probed every `probe_interval` and takes closures again once it answers
// (a restarted worker, with a dataset it built anew). Closures wait while
// no worker is available.
//
// Closure failure: a function that fails on its worker (a bad batch, a
// parameter server that is gone: Unavailable naming the ps task) fails its
// RemoteValue with the error prefixed by the worker's task; Join then
// returns the first such error and the closures still queued are cancelled
// (their values fail with Cancelled naming it), as TensorFlow's Join
// raises. Later Schedule calls run again.
//
// Staleness: `max_staleness` k >= 0 bounds how far workers drift apart: a
// worker starts a closure only while it has finished at most k more than
// the available worker that finished fewest (stale-synchronous parallel,
// counting closures as steps). -1: unbounded (fully asynchronous).
//
// Thread-safety: every method may be called from any thread. Ownership:
// the coordinator owns its connections and worker threads; RemoteValues
// outlive it (a value still pending when it is destroyed fails Cancelled).
#ifndef STRATA_STRATEGY_CLUSTER_COORDINATOR_H_
#define STRATA_STRATEGY_CLUSTER_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "graph/tensor.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"

namespace strata {
namespace distribute {

// The result of a scheduled closure: its function's results once it ran.
class RemoteValue {
 public:
  // Waits until the closure ran (or failed, or was cancelled).
  absl::StatusOr<std::vector<Tensor>> Fetch() const;
  bool ready() const;
  // The task whose run produced the value ("" while pending).
  std::string worker() const;

 private:
  friend class ClusterCoordinator;
  void Set(absl::StatusOr<std::vector<Tensor>> value, std::string worker);

  mutable Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<std::vector<Tensor>> value_ ABSL_GUARDED_BY(mu_);
  std::string worker_ ABSL_GUARDED_BY(mu_);
};

struct CoordinatedWorker {
  std::string task;     // "/job:worker/replica:0/task:0"
  std::string address;  // its gRPC server, "host:port"
};

struct ClusterCoordinatorOptions {
  std::vector<CoordinatedWorker> workers;
  std::optional<JobToken> job_token;
  std::optional<TlsConfig> tls;
  // How often a lost worker is probed.
  absl::Duration probe_interval = absl::Milliseconds(500);
  // See the file comment; -1: unbounded.
  int max_staleness = -1;
  // Largest message (a closure's arguments or results).
  int max_message_bytes = 1 << 30;
};

class ClusterCoordinator {
 public:
  // InvalidArgument naming the option for no worker, a worker named twice
  // or without an address, or max_staleness < -1.
  static absl::StatusOr<std::unique_ptr<ClusterCoordinator>> Create(
      ClusterCoordinatorOptions options);
  // Stops the worker threads after their current call; pending values fail.
  ~ClusterCoordinator();

  // Queues a run of `function` with `args` on some worker.
  std::shared_ptr<RemoteValue> Schedule(const std::string& function, std::vector<Tensor> args = {});
  // Waits until every closure scheduled so far ran; the first closure error
  // since the last Join (then the queue was cancelled), else OK.
  absl::Status Join();
  // Whether nothing is queued or running.
  bool Done() const;

  // Counts, for tests and progress lines.
  int num_available_workers() const;
  // Closures that were rescheduled after their worker was lost.
  int64_t num_rescheduled() const;
  // Closures each worker finished (successfully), by worker index.
  std::vector<int64_t> finished_per_worker() const;

 private:
  struct Closure {
    uint64_t id = 0;
    std::string function;
    std::vector<Tensor> args;
    std::shared_ptr<RemoteValue> value;
  };
  struct Worker {
    bool available = true;
    int64_t finished = 0;
  };
  explicit ClusterCoordinator(ClusterCoordinatorOptions options) : options_(std::move(options)) {}
  void WorkerLoop(int w);
  // Whether worker `w` may start a closure now (staleness, availability).
  bool MayStart(int w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One call of `c` on worker `w`: OK, the function's error (kept in the
  // value), or Unavailable when the worker could not be reached.
  bool RunOn(int w, const Closure& c, absl::StatusOr<std::vector<Tensor>>* result);
  bool Probe(int w);

  const ClusterCoordinatorOptions options_;
  std::vector<std::unique_ptr<WorkerService::Stub>> stubs_;  // by worker; const after Create
  mutable Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::deque<Closure> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t rescheduled_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_CLUSTER_COORDINATOR_H_
