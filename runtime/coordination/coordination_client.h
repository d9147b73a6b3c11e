// CoordinationClient: a task's agent of the cluster's coordination service
// (TensorFlow's CoordinationServiceAgent). It registers the task with the
// chief, sends heartbeats, long-polls for the cluster's error, and offers
// barriers, the shared key-value store (it is a KeyValueStore) and the
// shutdown barrier. The chief runs one too, talking to its own server.
//
//   CoordinationClientOptions opts;
//   opts.service_address = "10.0.0.1:2222";            // the chief's address
//   opts.task = "/job:worker/replica:0/task:1";
//   opts.devices = {"/job:worker/replica:0/task:1/device:CPU:0"};
//   opts.cluster_fingerprint = ClusterFingerprint(spec.ToClusterDef());
//   STRATA_ASSIGN_OR_RETURN(auto client, CoordinationClient::Connect(opts));
//   client->SetErrorCallback([](absl::Status s) { /* abort collectives, exit */ });
//   STRATA_ASSIGN_OR_RETURN(std::vector<std::string> devices, client->Register());
//   STRATA_RETURN_IF_ERROR(client->WaitForBarrier("init", absl::Seconds(30)));
//   ... training ...
//   STRATA_RETURN_IF_ERROR(client->Shutdown(absl::Seconds(30)));
//
// Failure detection: the error callback runs exactly once, with the
// cluster's first error: a task lost (no heartbeat within the service's
// heartbeat timeout), a task restarted, an error some task reported, or the
// chief itself unreachable for longer than the heartbeat timeout
// ("chief task /job:chief/replica:0/task:0 lost: ..."). Once the client
// knows of an error, its blocked calls (Get, WaitForBarrier, Shutdown)
// return that error.
//
// Register() retries while the chief is not up yet (tasks start in any
// order) until register_timeout.
//
// Thread-safety: every method may be called concurrently. The callback runs
// on a background thread of the client (or in SetErrorCallback's caller if
// the error is already known) and must not destroy the client. Ownership:
// the destructor stops the background threads at once; destroying the
// client without Shutdown() is, for the others, this task dying: they
// declare it lost after the heartbeat timeout. Whatever the callback uses
// must outlive the client, or be torn down only after Stop(): once Stop()
// returns the callback is not running and never runs again.
#ifndef STRATA_RUNTIME_COORDINATION_COORDINATION_CLIENT_H_
#define STRATA_RUNTIME_COORDINATION_COORDINATION_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "proto/coordination.grpc.pb.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"

namespace strata {

struct CoordinationClientOptions {
  // The chief's "host:port" and, for messages, its task name (else learned
  // at registration).
  std::string service_address;
  std::string service_task;
  // This task, its devices and its cluster's fingerprint (ClusterFingerprint).
  std::string task;
  std::vector<std::string> devices;
  std::string cluster_fingerprint;
  // 0: a random one. A new process must use a new incarnation.
  uint64_t incarnation = 0;
  // How long Register() waits for the chief to be up and all tasks to register.
  absl::Duration register_timeout = absl::Seconds(60);
  // 0: a fifth of the service's heartbeat timeout (told at registration).
  absl::Duration heartbeat_interval = absl::ZeroDuration();
  // Largest message sent or received (the server's cap is the same by default).
  int max_message_bytes = 4 << 20;
  // The job's token: every call carries its proof (runtime/security/
  // rpc_auth.h). None: calls carry none, which a service with a token refuses.
  std::optional<JobToken> job_token;
  // Mutual TLS (runtime/security/tls.h) to a service that has it: this
  // task's certificate, and the CA the service's must chain to and name
  // the host of service_address. None: plaintext.
  std::optional<TlsConfig> tls;
};

class CoordinationClient : public KeyValueStore {
 public:
  // Creates the channel; no RPC yet. InvalidArgument for a missing address
  // or task.
  static absl::StatusOr<std::unique_ptr<CoordinationClient>> Connect(
      CoordinationClientOptions options);
  ~CoordinationClient() override;

  CoordinationClient(const CoordinationClient&) = delete;
  CoordinationClient& operator=(const CoordinationClient&) = delete;

  // Registers this task and waits until every task has; returns every
  // task's devices in task order, and starts the heartbeat and error-poll
  // threads. Once only.
  absl::StatusOr<std::vector<std::string>> Register();

  // `callback` receives the cluster's first error, once. If it is already
  // known, runs at once in this thread.
  void SetErrorCallback(std::function<void(absl::Status)> callback);

  // Tells every task that this one failed with `error`.
  absl::Status ReportError(const absl::Status& error);

  // Waits until `tasks` (empty: all) reached barrier `id`; DeadlineExceeded
  // naming the missing tasks after `timeout`.
  absl::Status WaitForBarrier(const std::string& id, absl::Duration timeout,
                              const std::vector<std::string>& tasks = {});

  // The shutdown barrier; then stops heartbeats and polling (also when it
  // fails: DeadlineExceeded naming the tasks that did not shut down).
  absl::Status Shutdown(absl::Duration timeout);

  absl::Status Insert(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

  // Stops heartbeats and polling at once, without the shutdown barrier (for
  // the others, as if this task died), and cancels calls in flight. Returns
  // once the background threads ended: a callback they were running has
  // returned, and none runs later. Idempotent; called by the destructor.
  // From within the callback it does not wait for the calling thread.
  void Stop();

  // The cluster's first error as this client knows it; OK if none.
  absl::Status error() const;
  uint64_t incarnation() const { return options_.incarnation; }
  const std::string& task() const { return options_.task; }

  // Test hook: the heartbeat thread stops sending, as if the process froze.
  void PauseHeartbeatsForTest();

 private:
  explicit CoordinationClient(CoordinationClientOptions options);

  // Runs one RPC with a deadline of `rpc_timeout`; the call is cancelled
  // when the client stops or, if `blocking` (a call that waits on other
  // tasks), when it learns of the cluster's error, which it then returns.
  // `rpc` is the method's name (signed with the request), `what` names the
  // call in error messages.
  template <typename Method, typename Request, typename Response>
  absl::Status Call(Method method, absl::string_view rpc, const std::string& what,
                    const Request& request, Response* response, absl::Duration rpc_timeout,
                    bool blocking);
  // Adds context naming the service to an error of `what`.
  absl::Status Annotate(const std::string& what, const absl::Status& s) const;

  // Records the cluster's first error and runs the callback (outside mu_).
  void SetError(absl::Status error);
  void HeartbeatLoop();
  void PollLoop();
  // Waits up to `d`; false once the client stops.
  bool SleepFor(absl::Duration d);
  std::string ServiceTaskName() const;

  // Const after construction (service_task_ after Register).
  CoordinationClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<CoordinationService::Stub> stub_;

  mutable Mutex mu_;
  std::string service_task_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_timeout_ ABSL_GUARDED_BY(mu_) = absl::Seconds(10);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeats_paused_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool error_delivered_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(absl::Status)> callback_ ABSL_GUARDED_BY(mu_);
  // Calls in flight -> whether they are `blocking` (see Call).
  std::map<grpc::ClientContext*, bool> in_flight_ ABSL_GUARDED_BY(mu_);

  std::thread heartbeat_thread_ ABSL_GUARDED_BY(mu_);
  std::thread poll_thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COORDINATION_COORDINATION_CLIENT_H_
