// GrpcRemoteTasks: RemoteTasks (runtime/remote_tasks.h) over gRPC, calling
// the WorkerServiceImpl (worker_service.h) each task hosts. A client task's
// session uses it to run its partitions on parameter-server tasks:
//
//   GrpcRemoteTasksOptions o;
//   o.local_task = "/job:worker/replica:0/task:0";
//   o.tasks = {{"/job:ps/replica:0/task:0", "10.0.0.3:2222",
//               {"/job:ps/replica:0/task:0/device:CPU:0"}}};
//   auto remote = *GrpcRemoteTasks::Create(o);
//   session_options.remote_tasks = remote.get();
//
// Each step with a task is one RunStep stream: the client's tensors for the
// task's partitions are written to it as they are sent, the task's for the
// client are read on a thread of the step's own (never a pool thread that a
// partition may need), and the task's last message ends the step there. An
// unreachable or failed task fails the step with the task and its address
// named; a failed client step cancels the stream.
//
// Thread-safety: every method may be called concurrently.
#ifndef STRATA_RUNTIME_RPC_GRPC_REMOTE_TASKS_H_
#define STRATA_RUNTIME_RPC_GRPC_REMOTE_TASKS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/remote_tasks.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"

namespace strata {

struct RemoteTaskAddress {
  std::string task;                  // "/job:ps/replica:0/task:0"
  std::string address;               // its gRPC server, "host:port"
  std::vector<std::string> devices;  // its devices, full names
};

struct GrpcRemoteTasksOptions {
  std::string local_task;
  std::vector<RemoteTaskAddress> tasks;
  std::optional<JobToken> job_token;
  std::optional<TlsConfig> tls;
  // How long registering a partition may take.
  absl::Duration register_timeout = absl::Seconds(60);
  // Largest message received (a tensor crosses in one).
  int max_message_bytes = 1 << 30;
  // > 0: while a step is open, each task is pinged every `keepalive`, and
  // the step fails (Unavailable naming the task) when a ping goes
  // unanswered for keepalive_timeout: a frozen task is found that soon.
  absl::Duration keepalive = absl::ZeroDuration();
  absl::Duration keepalive_timeout = absl::Seconds(20);
};

class GrpcRemoteTasks : public RemoteTasks {
 public:
  // InvalidArgument for a task named twice, the local task among them, a
  // task without an address or devices, or a device not of its task.
  static absl::StatusOr<std::unique_ptr<GrpcRemoteTasks>> Create(GrpcRemoteTasksOptions options);

  const std::string& local_task() const override { return options_.local_task; }
  std::vector<std::string> tasks() const override;
  std::vector<std::string> devices() const override;
  absl::StatusOr<uint64_t> RegisterPartition(const std::string& task, const std::string& device,
                                             const ::tensorflow::GraphDef& graph) override;
  std::unique_ptr<RemoteStep> StartStep(const std::string& task, std::vector<uint64_t> handles,
                                        RemoteStepSink* sink, absl::Duration timeout) override;

 private:
  struct Peer {
    RemoteTaskAddress address;
    std::unique_ptr<WorkerService::Stub> stub;
  };
  explicit GrpcRemoteTasks(GrpcRemoteTasksOptions options) : options_(std::move(options)) {}

  const GrpcRemoteTasksOptions options_;
  absl::flat_hash_map<std::string, Peer> peers_;  // by task; const after Create
};

}  // namespace strata

#endif  // STRATA_RUNTIME_RPC_GRPC_REMOTE_TASKS_H_
