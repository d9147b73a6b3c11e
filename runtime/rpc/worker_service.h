// WorkerServiceImpl: the gRPC service a task hosts to run graph partitions
// on request (runtime/remote_tasks.h): a parameter server's, holding
// variables every client task's steps read and update. Added to the task's
// GrpcServer (GrpcServerOptions::services).
//
//   WorkerServiceOptions o;
//   o.task = "/job:ps/replica:0/task:0";
//   o.devices = device_mgr.get();                  // this task's devices
//   auto service = *WorkerServiceImpl::Create(o);
//   server_options.services.push_back(service.get());
//   server_options.max_message_bytes = kWorkerMaxMessageBytes;
//
// RunFunction runs a function the task registered by name (a worker's
// training step, for a ClusterCoordinator), with the caller's arguments.
//
// RegisterGraph imports a client's partition for one of this task's devices
// and plans it once; the same graph (by content) registered again, by any
// client, gets the same handle. Partitions must not feed or fetch (no _Arg
// or _Retval): the client keeps its feeds and fetches. RunStep runs the
// partitions a client names, once, over one bidirectional stream: the
// client's tensors for them arrive on it (each checked against the
// receiving _Recv's dtype and shape before it is allocated), their tensors
// for the client (or, relayed by it, another task) leave on it, and a last
// message carries the step's status. Steps of many clients run at once and
// share the devices' variables. A client that aborts or goes away (its
// stream ends first) cancels only its own step.
//
// Every call must carry the job token's proof when one is configured
// (runtime/security/rpc_auth.h); otherwise it is refused, Unauthenticated,
// before anything runs.
//
// The process must link the kernels its clients place on it (a trainer
// links //kernels/cpu:all_kernels).
//
// Thread-safety: the handlers run concurrently. Ownership: the devices and
// pool (when given) must outlive the service; the service must outlive the
// server it is added to.
#ifndef STRATA_RUNTIME_RPC_WORKER_SERVICE_H_
#define STRATA_RUNTIME_RPC_WORKER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/device.h"
#include "runtime/remote_tasks.h"
#include "runtime/security/job_token.h"
#include "runtime/security/rpc_auth.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

// The message size a task hosting the worker service should allow: a
// tensor crosses in one message.
inline constexpr int kWorkerMaxMessageBytes = 1 << 30;

struct WorkerServiceOptions {
  // This task, "/job:ps/replica:0/task:0"; every device must be its.
  std::string task;
  // Not owned.
  DeviceMgr* devices = nullptr;
  // Where partitions' expensive kernels run (not owned); nullptr: a pool
  // of hardware-concurrency threads of its own.
  Eigen::ThreadPoolInterface* pool = nullptr;
  // The job's token; none: calls are not authenticated.
  std::optional<JobToken> job_token;
  // Most partitions registered at once (distinct graphs): more are refused
  // with ResourceExhausted.
  int max_graphs = 4096;
  // A received tensor whose shape the receiver does not fully know is
  // refused beyond this many bytes.
  uint64_t max_tensor_bytes = uint64_t{1} << 30;
};

// A function a task runs on request (RunFunction): its results, or its
// error (returned to the caller as the function's, not the call's).
using WorkerFunction =
    std::function<absl::StatusOr<std::vector<Tensor>>(const std::vector<Tensor>& args)>;

class WorkerServiceImpl final : public WorkerService::Service {
 public:
  // InvalidArgument for a missing or malformed task, no devices, or a
  // device that is not the task's.
  static absl::StatusOr<std::unique_ptr<WorkerServiceImpl>> Create(WorkerServiceOptions options);
  ~WorkerServiceImpl() override;

  grpc::Status RegisterGraph(grpc::ServerContext* ctx, const RegisterGraphRequest* request,
                             RegisterGraphResponse* response) override;
  grpc::Status RunStep(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<RunStepResponse, RunStepRequest>* stream) override;

  grpc::Status RunFunction(grpc::ServerContext* ctx, const RunFunctionRequest* request,
                           RunFunctionResponse* response) override;

  // Makes `fn` callable as `name` (replacing an earlier one of that name).
  // Calls of one function may run concurrently, and one may still be
  // running after its caller gave up on it: what `fn` uses must outlive the
  // server's shutdown (shut the server down first).
  void RegisterFunction(const std::string& name, WorkerFunction fn);

  int64_t steps_started() const { return steps_.load(std::memory_order_relaxed); }
  int64_t functions_run() const { return functions_run_.load(std::memory_order_relaxed); }
  int num_graphs() const;

 private:
  struct Registered;
  class Step;
  explicit WorkerServiceImpl(WorkerServiceOptions options);
  absl::StatusOr<uint64_t> Register(const RegisterGraphRequest& request);

  const WorkerServiceOptions options_;
  std::unique_ptr<Eigen::ThreadPoolInterface> owned_pool_;
  Eigen::ThreadPoolInterface* pool_ = nullptr;
  RpcVerifier verifier_;
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> functions_run_{0};
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Registered>> graphs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const WorkerFunction>> functions_
      ABSL_GUARDED_BY(mu_);
};

// A tensor as it crosses in a StepTensor, and back: the value (an
// uninitialized tensor is dead) of the rendezvous key. Unimplemented for
// dtypes not copied byte for byte (strings).
absl::Status EncodeStepTensor(const std::string& key, const Tensor& value, StepTensor* out);
// Hands `t` to `sink`: Accept (which checks it before anything is
// allocated), the bytes copied in, Deliver. An error is the refusal.
absl::Status ReceiveStepTensor(const StepTensor& t, RemoteStepSink* sink);
// `t` as a host tensor from `allocator`, checked first (any dtype copied
// byte for byte and shape, at most `max_bytes`); InvalidArgument naming it.
absl::StatusOr<Tensor> DecodeStepTensor(const StepTensor& t, Allocator* allocator,
                                        uint64_t max_bytes);

}  // namespace strata

#endif  // STRATA_RUNTIME_RPC_WORKER_SERVICE_H_
