// ParameterServerStrategy: variables live on parameter-server ("ps") tasks
// and each worker trains asynchronously against them, as TensorFlow's
// ParameterServerStrategy and MXNet's dist_async kvstore: a worker's step
// reads the variables from the ps tasks, computes its gradients on its own
// device and applies them there, never waiting for another worker.
//
//   // on each ps task: serve until told to stop
//   auto ps = *ParameterServerTask::Start("/job:ps/replica:0/task:0", "10.0.0.3:2222");
//   // on each worker: the same model code as under any strategy
//   ParameterServerOptions o;
//   o.worker_task = "/job:worker/replica:0/task:1";
//   o.ps_tasks = {{"/job:ps/replica:0/task:0", "10.0.0.3:2222",
//                  {"/job:ps/replica:0/task:0/device:CPU:0"}}, ...};
//   auto s = *ParameterServerStrategy::Create(o, "/cpu:0");
//   StrategyScope in_scope = s->Scope();               // variables go to the ps tasks
//   ... s->Run(root, step_fn, inputs) ...              // one replica: this worker's device
//   auto session = *Session::Create(root, s->session_options());
//
// Placement: variables made under the strategy go to the ps tasks' first
// devices round-robin in creation order (TensorFlow's default), except that
// a variable made in a scope already on a ps device stays there (an
// optimizer's slots are made on their variable's device). With a
// variable_partitioner a large variable is split into partitions, each
// placed as the next variable would be. The ops that read
// or update a variable run where it lives (a resource op follows its
// handle), so a step sends the values a worker reads to it and its
// gradients to the ps tasks, where the optimizer applies them; nothing the
// worker does waits for another worker. The worker's session registers its
// partitions with the ps tasks when it plans a step (runtime/remote_tasks.h,
// runtime/rpc/worker_service.h).
//
// One worker's run is synchronous training: it equals OneDeviceStrategy's
// on the same data (strategy/parameter_server_strategy_test.cc). With several
// workers each applies its own gradients as they come (no all-reduce, no
// lockstep); num_replicas_in_sync() is 1.
//
// Thread-safety and ownership: as for Strategy (strategy.h); the strategy
// owns its connections to the ps tasks and must outlive its sessions.
#ifndef STRATA_STRATEGY_PARAMETER_SERVER_STRATEGY_H_
#define STRATA_STRATEGY_PARAMETER_SERVER_STRATEGY_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/rpc/grpc_remote_tasks.h"
#include "runtime/rpc/worker_service.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"
#include "strategy/strategy.h"
#include "train/partitioned_variable.h"

namespace strata {
namespace distribute {

struct ParameterServerOptions {
  // This worker, "/job:worker/replica:0/task:1": its devices get this job
  // and task.
  std::string worker_task;
  // The ps tasks in order, each with its server's address and its devices
  // (variables go to each one's first device).
  std::vector<RemoteTaskAddress> ps_tasks;
  std::optional<JobToken> job_token;
  std::optional<TlsConfig> tls;
  // Splits large variables over the ps tasks along dimension 0
  // (train/partitioned_variable.h; TensorFlow's variable_partitioner):
  // partition p goes to the next ps task round-robin, an embedding lookup
  // gathers only the rows it needs from each and its gradient goes back as
  // rows to the partitions that own them. Unset: no variable is split.
  train::Partitioner variable_partitioner;
  // > 0: a ps task that does not answer for this long while a step waits
  // on it (frozen: SIGSTOP, a hung host) fails the step, Unavailable naming
  // it (gRPC keepalive pings every second). Zero: only the step's deadline
  // finds it.
  absl::Duration ps_timeout = absl::ZeroDuration();
};

class ParameterServerStrategy : public Strategy {
 public:
  // `device` names one device of `machine` (whose job and task are set
  // from worker_task). InvalidArgument naming the option for no ps task, a
  // ps task that is also this worker, a malformed task or device.
  static absl::StatusOr<std::unique_ptr<ParameterServerStrategy>> Create(
      const ParameterServerOptions& ps, const std::string& device = "/cpu:0",
      DeviceOptions machine = DeviceOptions(), const StrategyOptions& options = StrategyOptions());

  // Where variables go: each ps task's first device, in task order.
  const std::vector<std::string>& ps_devices() const { return ps_devices_; }

 protected:
  absl::StatusOr<std::unique_ptr<train::Variable>> CreateDistributedVariable(
      const strata::Scope& scope, const train::VariableArgs& args,
      const train::VariableCreatorFn& next) override;

 private:
  using Strategy::Strategy;

  std::unique_ptr<GrpcRemoteTasks> remote_;
  std::vector<std::string> ps_devices_;
  std::vector<std::string> all_ps_devices_;
  train::Partitioner partitioner_;
  int next_ps_ = 0;
};

// A ps task: its devices, the worker service over them and the gRPC server
// at its address, serving until destroyed.
class ParameterServerTask {
 public:
  struct Options {
    std::string task;       // "/job:ps/replica:0/task:0"
    std::string address;    // "host:port" to listen on (port 0: any free one)
    DeviceOptions devices;  // job and task are set from `task`
    std::optional<JobToken> job_token;
    std::optional<TlsConfig> tls;
  };
  static absl::StatusOr<std::unique_ptr<ParameterServerTask>> Start(Options options);
  ~ParameterServerTask();

  const std::string& address() const { return server_->address(); }
  // This task's devices, full names.
  std::vector<std::string> devices() const;
  DeviceMgr* device_mgr() const { return devices_.get(); }
  WorkerServiceImpl* service() const { return service_.get(); }

 private:
  ParameterServerTask() = default;
  std::unique_ptr<DeviceMgr> devices_;
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<GrpcServer> server_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_PARAMETER_SERVER_STRATEGY_H_
