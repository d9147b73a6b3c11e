// CoordinationServiceImpl: the state machine of the coordination service the
// chief hosts for its cluster (TensorFlow's CoordinationService, written for
// Strata). It knows the cluster's training tasks and tracks, for each, its
// registration (incarnation, devices), its heartbeats and whether it left;
// it also holds the barriers, the insert-once key-value store and the
// cluster's first error, which every task learns through PollForError.
// gRPC-free, so it can be tested directly; CoordinationGrpcService (below)
// serves it over the RPCs of proto/coordination.proto.
//
//   CoordinationServiceOptions opts;
//   opts.tasks = {"/job:chief/replica:0/task:0", "/job:worker/replica:0/task:0"};
//   opts.cluster_fingerprint = ClusterFingerprint(spec.ToClusterDef());
//   CoordinationServiceImpl service(opts);        // starts the heartbeat checker
//   // from each task's RPC handler:
//   absl::StatusOr<RegisterResult> r =
//       service.RegisterTask(task, incarnation, devices, fingerprint, absl::Seconds(60));
//
// Errors that become the cluster's error (the first one is kept and handed to
// every task's PollForError; blocked registrations, barriers and Gets then
// fail with it):
//  - a task silent past heartbeat_timeout: Unavailable "task T lost: no
//    heartbeat for 10s";
//  - a registered task registering again with a new incarnation once the
//    cluster started: Aborted "task T restarted (incarnation a -> b)";
//  - a registration whose cluster fingerprint differs from the chief's:
//    InvalidArgument naming the task and both fingerprints;
//  - ReportError from any task, with the reporter's code.
//
// Waiting without threads: each call that waits (RegisterTask,
// WaitForBarrier, GetKeyValue, PollForError, ShutdownTask) has an
// asynchronous form (...Async) that queues the wait and returns; its `done`
// runs once with the result when the state it waits for arrives, its
// deadline passes (the service's timer thread), the cluster fails, the
// service stops, or CancelWait ends it. The gRPC service answers with those,
// so a waiting call holds no thread; the blocking forms wrap them.
//
// Thread-safety: every method may be called concurrently; the waits always
// end within their timeout, and at once after Stop(). `done` callbacks run
// without the service's lock held, on the calling thread when the answer is
// immediate. Ownership: holds its state; the destructor stops the timer
// thread (checking heartbeats and deadlines).
#ifndef STRATA_RUNTIME_COORDINATION_COORDINATION_SERVICE_H_
#define STRATA_RUNTIME_COORDINATION_COORDINATION_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "base/mutex.h"
#include "proto/cluster.pb.h"
#include "proto/coordination.grpc.pb.h"
#include "runtime/security/job_token.h"
#include "runtime/security/rpc_auth.h"

namespace strata {

// The cluster's training tasks (chief, then workers by index) as task names
// "/job:chief/replica:0/task:0", "/job:worker/replica:0/task:0", ... (the
// order of ClusterSpec::worker_id). Other jobs (ps, evaluator) are left out.
std::vector<std::string> CoordinatedTasks(const tensorflow::ClusterDef& cluster);

// A short hex digest of a cluster (jobs, indices, addresses), equal on two
// tasks exactly when their cluster definitions are; stable across processes.
std::string ClusterFingerprint(const tensorflow::ClusterDef& cluster);

struct CoordinationServiceOptions {
  // The tasks that must register, in task order (CoordinatedTasks). The
  // first is the one hosting the service, unless service_task says otherwise.
  std::vector<std::string> tasks;
  std::string service_task;
  // Registrations with another fingerprint are refused; empty: not checked.
  std::string cluster_fingerprint;
  // A registered task silent this long is declared lost.
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // For registrations that ask for no timeout of their own.
  absl::Duration register_timeout = absl::Seconds(60);
  // Bounds on the key-value store (ResourceExhausted naming the key past
  // them): bytes of one value, keys, and bytes of all keys and values. The
  // job's own entries are a few addresses and ids of at most a few hundred
  // bytes each.
  size_t max_value_bytes = 64 << 10;
  size_t max_keys = 1 << 16;
  size_t max_store_bytes = 64 << 20;
  // Calls waiting at once (each holds a little memory, no thread); past it
  // a call that would wait is refused with ResourceExhausted. 0: 64 per
  // task plus 1024.
  size_t max_waiting_calls = 0;
  // The clock of heartbeats and deadlines (null: Env::Default()); a test's
  // manual clock (base/testing/test_env.h) runs them without waiting. Not
  // owned; outlives the service.
  Env* env = nullptr;
};

// How a wait ended (the async forms' `done` gets the result it implies).
enum class WaitEnd { kReady, kDeadline, kAborted, kCancelled, kRefused };
// A queued wait's handle, for CancelWait; kNoWait when the call did not wait.
using WaitId = uint64_t;
inline constexpr WaitId kNoWait = 0;

struct PollResult {
  absl::Status poll;           // the poll's own status (as PollForError returns)
  absl::Status cluster_error;  // the cluster's error, OK if none came
};

// Whether the caller of a blocking call has gone away (its RPC cancelled or
// its connection lost): the call then returns Cancelled at once instead of
// holding its thread until its timeout. Null: the caller never goes away.
using CallerGone = std::function<bool()>;

struct RegisterResult {
  std::vector<std::string> devices;  // every task's devices, in task order
  std::vector<std::string> tasks;
  std::string service_task;
  absl::Duration heartbeat_timeout;
};

class CoordinationServiceImpl {
 public:
  // Checks the options (InvalidArgument: no tasks, a duplicate task, a
  // non-positive timeout) and starts the heartbeat checker.
  static absl::StatusOr<std::unique_ptr<CoordinationServiceImpl>> Create(
      CoordinationServiceOptions options);
  ~CoordinationServiceImpl();

  CoordinationServiceImpl(const CoordinationServiceImpl&) = delete;
  CoordinationServiceImpl& operator=(const CoordinationServiceImpl&) = delete;

  // Registers `task` and waits until every task has registered (or the
  // cluster has an error, or `timeout` passes: DeadlineExceeded naming the
  // tasks that never registered). Registering again with the same
  // incarnation is a retry; with a new one before every task registered it
  // replaces the old process, after that it is a restart (cluster error).
  absl::StatusOr<RegisterResult> RegisterTask(const std::string& task, uint64_t incarnation,
                                              const std::vector<std::string>& devices,
                                              const std::string& cluster_fingerprint,
                                              absl::Duration timeout,
                                              const CallerGone& caller_gone = nullptr);

  // Records that `task` is alive. FailedPrecondition if it is not
  // registered, already declared lost or gone; Aborted (and a cluster error)
  // if `incarnation` is not the registered one.
  absl::Status Heartbeat(const std::string& task, uint64_t incarnation);

  // Waits until every task of `participants` (empty: all tasks) has called
  // WaitForBarrier with this id. The first caller fixes the participants and
  // the deadline (its time + `timeout`); on the deadline the barrier fails
  // for everyone with DeadlineExceeded naming the tasks that did not arrive.
  // An id names one barrier: calling a finished barrier again gives its
  // result.
  absl::Status WaitForBarrier(const std::string& barrier_id, const std::string& task,
                              absl::Duration timeout, std::vector<std::string> participants,
                              const CallerGone& caller_gone = nullptr);

  // AlreadyExists naming the key if it was inserted before;
  // ResourceExhausted past the store's bounds (options).
  absl::Status InsertKeyValue(const std::string& key, const std::string& value);
  // The key's value once inserted; DeadlineExceeded naming the key after
  // `timeout`; the cluster's error if one happens first.
  absl::StatusOr<std::string> GetKeyValue(const std::string& key, absl::Duration timeout,
                                          const CallerGone& caller_gone = nullptr);
  // The key's value if inserted, else NotFound; never waits, and answers
  // after the cluster's error too (for the chief's post-mortem of it, in
  // this process only: no RPC reaches it).
  absl::StatusOr<std::string> PeekKeyValue(const std::string& key) const;

  // Makes `error` (with `task` named) the cluster's error unless it has one.
  absl::Status ReportError(const std::string& task, const absl::Status& error);

  // Waits until the cluster has an error and puts it in `*cluster_error`;
  // after `timeout` without one, leaves it OK. The return value is the
  // poll's own status: Unavailable after Stop(), InvalidArgument for an
  // unknown task.
  absl::Status PollForError(const std::string& task, absl::Duration timeout,
                            absl::Status* cluster_error, const CallerGone& caller_gone = nullptr);

  // The shutdown barrier: returns once every task that has not failed called
  // it; DeadlineExceeded naming the missing tasks after `timeout`. The
  // caller is no longer expected to heartbeat afterwards either way.
  absl::Status ShutdownTask(const std::string& task, absl::Duration timeout,
                            const CallerGone& caller_gone = nullptr);

  // The asynchronous forms of the waiting calls above (same arguments and
  // results): `done` runs exactly once. The id is for CancelWait (kNoWait if
  // the answer was immediate: `done` has run already).
  WaitId RegisterTaskAsync(const std::string& task, uint64_t incarnation,
                           const std::vector<std::string>& devices,
                           const std::string& cluster_fingerprint, absl::Duration timeout,
                           std::function<void(absl::StatusOr<RegisterResult>)> done);
  WaitId WaitForBarrierAsync(const std::string& barrier_id, const std::string& task,
                             absl::Duration timeout, std::vector<std::string> participants,
                             std::function<void(absl::Status)> done);
  WaitId GetKeyValueAsync(const std::string& key, absl::Duration timeout,
                          std::function<void(absl::StatusOr<std::string>)> done);
  WaitId PollForErrorAsync(const std::string& task, absl::Duration timeout,
                           std::function<void(PollResult)> done);
  WaitId ShutdownTaskAsync(const std::string& task, absl::Duration timeout,
                           std::function<void(absl::Status)> done);
  // Ends wait `id` as if its caller went away (Cancelled; a barrier keeps
  // the arrival, a poll returns no error); nothing if it already ended.
  void CancelWait(WaitId id);

  // The cluster's first error; OK if none.
  absl::Status cluster_error() const;
  // Calls waiting right now (for tests and diagnosis).
  int blocked_calls() const;
  const std::vector<std::string>& tasks() const { return options_.tasks; }

  // Ends every waiting call (they return Unavailable) and stops the timer
  // thread. Idempotent; the destructor calls it.
  void Stop();

 private:
  enum class TaskState { kUnregistered, kRegistered, kFailed, kShutdown };
  struct Task {
    TaskState state = TaskState::kUnregistered;
    uint64_t incarnation = 0;
    std::vector<std::string> devices;
    absl::Time last_heartbeat;
  };
  struct Barrier {
    std::set<std::string> participants;
    std::set<std::string> arrived;
    absl::Time deadline;
    bool done = false;
    absl::Status result;
  };

  // A queued wait: done when ready() (evaluated under mu_ after every
  // change of state), or at the deadline, a cluster error, Stop(), a cancel
  // or a refusal; finish(end) computes the result under mu_ and returns what
  // to run without the lock (the caller's `done` with that result).
  struct Waiter {
    std::function<bool()> ready;
    absl::Time deadline;
    std::function<std::function<void()>(WaitEnd)> finish;
  };
  using Runnables = std::vector<std::function<void()>>;

  explicit CoordinationServiceImpl(CoordinationServiceOptions options);

  absl::Status CheckTask(const std::string& task) const;
  // Sets the cluster's error if it has none yet.
  void SetErrorLocked(absl::Status error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends `w` at once if it can (ready, the cluster failed, stopped, past its
  // deadline, too many waiting), else queues it. Its id, or kNoWait.
  WaitId StartWaitLocked(Waiter w, Runnables* run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the queued waits that are ready or aborted, again while that
  // changes state (a barrier's timeout readies its other waiters).
  void WakeLocked(Runnables* run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the queued waits whose deadline is past.
  void ExpireLocked(absl::Time now, Runnables* run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void RunAll(Runnables& run);
  // A blocking call: `start(done)` starts the async form; waits for `done`,
  // checking `caller_gone` every kCallerCheckPeriod (then CancelWait).
  template <typename T>
  T Block(const std::function<WaitId(std::function<void(T)>)>& start,
          const CallerGone& caller_gone);
  static constexpr absl::Duration kCallerCheckPeriod = absl::Milliseconds(200);
  // Cancelled for a call whose caller went away.
  static absl::Status CallerGoneError(const std::string& what);
  // The status of a wait that ended by `end` (kAborted: the cluster's error
  // or Stop; kCancelled; kRefused) for the call `what`.
  absl::Status EndedLocked(WaitEnd end, const std::string& what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The status a waiting call returns when it was ended by an error or Stop.
  absl::Status AbortedCallLocked(const std::string& what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllRegisteredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckHeartbeatsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer thread: heartbeats every period, waits' deadlines on time.
  void TimerLoop();

  // Const after construction.
  const CoordinationServiceOptions options_;
  Env* const env_;

  mutable Mutex mu_;
  std::map<std::string, Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // every task registered once
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Barrier> barriers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  size_t store_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> shutting_down_ ABSL_GUARDED_BY(mu_);
  std::map<WaitId, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  WaitId next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  // A wait was queued: the timer thread recomputes its next deadline.
  bool timer_changed_ ABSL_GUARDED_BY(mu_) = false;
  size_t max_waiting_calls_ = 0;  // const after construction

  std::thread timer_;
};

// Serves a CoordinationServiceImpl over gRPC (proto/coordination.proto),
// with gRPC's callback API: a call that waits (registration, a barrier, a
// get, an error poll, the shutdown barrier) is answered when the service's
// wait ends, holding no thread meanwhile; a caller that goes away (its call
// cancelled, its connection lost) ends its wait at once. Waits last at most
// the request's timeout and never past the caller's deadline. `impl` must outlive this service;
// null on a task that does not host the service: every call then fails with FailedPrecondition
// naming `address` (a gRPC sync server needs at least one service).
class CoordinationGrpcService final : public CoordinationService::CallbackService {
 public:
  // With a token every call must carry its proof (runtime/security/
  // rpc_auth.h) and is refused with Unauthenticated otherwise, before the
  // handler reads anything; refusals are logged (at most 20 a minute, then
  // counted). No token: every call is served (--insecure_no_job_token).
  CoordinationGrpcService(CoordinationServiceImpl* impl, std::string address,
                          std::optional<JobToken> token = std::nullopt)
      : impl_(impl), address_(std::move(address)), verifier_(std::move(token)) {}

  grpc::ServerUnaryReactor* RegisterTask(grpc::CallbackServerContext* ctx,
                                         const RegisterTaskRequest* req,
                                         RegisterTaskResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const HeartbeatRequest* req,
                                      HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* WaitForBarrier(grpc::CallbackServerContext* ctx,
                                           const WaitForBarrierRequest* req,
                                           WaitForBarrierResponse* resp) override;
  grpc::ServerUnaryReactor* InsertKeyValue(grpc::CallbackServerContext* ctx,
                                           const InsertKeyValueRequest* req,
                                           InsertKeyValueResponse* resp) override;
  grpc::ServerUnaryReactor* GetKeyValue(grpc::CallbackServerContext* ctx,
                                        const GetKeyValueRequest* req,
                                        GetKeyValueResponse* resp) override;
  grpc::ServerUnaryReactor* ReportError(grpc::CallbackServerContext* ctx,
                                        const ReportErrorRequest* req,
                                        ReportErrorResponse* resp) override;
  grpc::ServerUnaryReactor* PollForError(grpc::CallbackServerContext* ctx,
                                         const PollForErrorRequest* req,
                                         PollForErrorResponse* resp) override;
  grpc::ServerUnaryReactor* ShutdownTask(grpc::CallbackServerContext* ctx,
                                         const ShutdownTaskRequest* req,
                                         ShutdownTaskResponse* resp) override;

 private:
  grpc::Status NotHosted() const;
  // OK, or the refusal to return (logged).
  grpc::Status Authorize(const grpc::ServerContextBase& ctx, absl::string_view method,
                         const google::protobuf::Message& request);
  // The checks every call starts with (the proof, a hosted service): OK to
  // go on, else the status to finish with.
  grpc::Status Admit(const grpc::ServerContextBase& ctx, absl::string_view method,
                     const google::protobuf::Message& request);
  // Finishes a call that does not wait.
  static grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx,
                                          const grpc::Status& status);

 public:
  // Returns once every reactor of a waiting call is gone (after the server
  // shut down: no new calls come). GrpcServer's destructor calls it before
  // the service dies, so no reaction (a late OnCancel) touches a dead
  // service; the destructor too.
  void AwaitReactorsGone();
  ~CoordinationGrpcService() override { AwaitReactorsGone(); }
  // Reactor bookkeeping (WaitReactor in the .cc).
  void ReactorMade();
  void ReactorGone();

 private:
  Mutex reactors_mu_;
  int live_reactors_ ABSL_GUARDED_BY(reactors_mu_) = 0;

  CoordinationServiceImpl* const impl_;
  const std::string address_;
  RpcVerifier verifier_;
  Mutex log_mu_;
  absl::Time log_window_start_ ABSL_GUARDED_BY(log_mu_) = absl::InfinitePast();
  int logged_in_window_ ABSL_GUARDED_BY(log_mu_) = 0;
  int64_t unlogged_ ABSL_GUARDED_BY(log_mu_) = 0;
};

// absl::Status <-> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

}  // namespace strata

#endif  // STRATA_RUNTIME_COORDINATION_COORDINATION_SERVICE_H_
