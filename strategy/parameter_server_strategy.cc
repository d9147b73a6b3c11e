#include "strategy/parameter_server_strategy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/device_name.h"
#include "strategy/strategy_devices.h"

namespace strata {
namespace distribute {

namespace {

// The job and task of "/job:j/replica:r/task:t"; InvalidArgument naming
// `what` otherwise.
absl::Status ParseTask(const std::string& task, const std::string& what, DeviceOptions* machine) {
  absl::StatusOr<DeviceName> n = DeviceName::Parse(task);
  if (!n.ok() || !n->has_job || !n->has_replica || !n->has_task || n->has_type) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", task, "' is not a task (/job:j/replica:r/task:t)"));
  }
  machine->job = n->job;
  machine->replica = n->replica;
  machine->task = n->task;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServerStrategy>> ParameterServerStrategy::Create(
    const ParameterServerOptions& ps, const std::string& device, DeviceOptions machine,
    const StrategyOptions& options) {
  STRATA_RETURN_IF_ERROR(ParseTask(ps.worker_task, "ParameterServerOptions.worker_task", &machine));
  if (ps.ps_tasks.empty()) {
    return absl::InvalidArgumentError(
        "ParameterServerOptions.ps_tasks: none; a parameter-server strategy needs a ps task");
  }
  GrpcRemoteTasksOptions ro;
  ro.local_task = ps.worker_task;
  ro.tasks = ps.ps_tasks;
  ro.job_token = ps.job_token;
  ro.tls = ps.tls;
  if (ps.ps_timeout > absl::ZeroDuration()) {
    ro.keepalive = std::min(absl::Seconds(1), ps.ps_timeout);
    ro.keepalive_timeout = ps.ps_timeout;
  }
  auto remote = GrpcRemoteTasks::Create(ro);
  if (!remote.ok()) return AnnotateStatus(remote.status(), "ParameterServerOptions: ");
  STRATA_ASSIGN_OR_RETURN(PreparedDevices local,
                          PrepareDevices({device}, machine, /*default_to_gpus=*/false));
  std::unique_ptr<ParameterServerStrategy> s(
      new ParameterServerStrategy(std::move(local.devices), local.options, options));
  if (local.device_mgr != nullptr) s->AdoptDevices(std::move(local.device_mgr));
  s->remote_ = *std::move(remote);
  s->set_remote_tasks(s->remote_.get());
  s->partitioner_ = ps.variable_partitioner;
  for (const RemoteTaskAddress& t : ps.ps_tasks) {
    s->ps_devices_.push_back(t.devices.front());
    s->all_ps_devices_.insert(s->all_ps_devices_.end(), t.devices.begin(), t.devices.end());
  }
  return s;
}

absl::StatusOr<std::unique_ptr<train::Variable>> ParameterServerStrategy::CreateDistributedVariable(
    const strata::Scope& scope, const train::VariableArgs& args,
    const train::VariableCreatorFn& next) {
  for (const std::string& d : all_ps_devices_) {
    if (scope.device() == d) return next(scope, args);  // e.g. a slot beside its variable
  }
  const int parts = partitioner_ ? partitioner_(args.shape, args.dtype) : 1;
  return train::CreatePartitioned(
      scope, args, std::max(parts, 1), [&](int, const train::VariableArgs& part) {
        const std::string& device = ps_devices_[next_ps_++ % ps_devices_.size()];
        return next(scope.WithDevice(device), part);
      });
}

absl::StatusOr<std::unique_ptr<ParameterServerTask>> ParameterServerTask::Start(Options options) {
  STRATA_RETURN_IF_ERROR(ParseTask(options.task, "ParameterServerTask.task", &options.devices));
  std::unique_ptr<ParameterServerTask> t(new ParameterServerTask());
  STRATA_ASSIGN_OR_RETURN(t->devices_, CreateCpuDeviceMgr(options.devices));
  WorkerServiceOptions wo;
  wo.task = options.task;
  wo.devices = t->devices_.get();
  wo.job_token = options.job_token;
  STRATA_ASSIGN_OR_RETURN(t->service_, WorkerServiceImpl::Create(wo));
  GrpcServerOptions so;
  so.address = options.address;
  so.services = {t->service_.get()};
  so.max_message_bytes = kWorkerMaxMessageBytes;
  so.job_token = options.job_token;
  so.tls = options.tls;
  STRATA_ASSIGN_OR_RETURN(t->server_, GrpcServer::Start(so));
  return t;
}

ParameterServerTask::~ParameterServerTask() {
  server_.reset();  // no call in flight once it is gone
  service_.reset();
}

std::vector<std::string> ParameterServerTask::devices() const {
  std::vector<std::string> out;
  for (const Device* d : devices_->devices()) out.push_back(d->name());
  return out;
}

}  // namespace distribute
}  // namespace strata
