#include "strategy/multi_worker_mirrored_strategy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/str_join.h"
#include "base/ip_address.h"
#include "base/mutex.h"
#include "base/status.h"
#include "graph/ops/collective_ops.h"
#include "runtime/collective/distributed_collective_executor.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/collective/hang_watchdog.h"
#include "runtime/collective/transport/shm_transport.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/coordination/coordination_client.h"
#include "runtime/coordination/coordination_service.h"
#include "runtime/coordination/grpc_server.h"
#include "strategy/strategy_devices.h"

namespace strata {
namespace distribute {

// Everything a worker process holds for its cluster. Destroyed in reverse:
// the executor (uses the transport and reports to the client) first, the
// server (the chief's coordination service) last.
struct MultiWorkerMirroredStrategy::Runtime {
  // The client's error callback aborts the executor: its threads stop
  // first, else a cluster error arriving while a failed run tears down
  // called Abort on a destroyed executor (trainers died of SIGSEGV in
  // DistributedCollectiveExecutor::Fail, before printing their error).
  ~Runtime() {
    // The error's post-mortem (HangWatchdog::OnClusterError) goes through
    // the client: this task's answer, and on the chief the others'.
    if (watchdog != nullptr) watchdog->AwaitClusterErrorReport(absl::Seconds(3));
    if (client != nullptr) client->Stop();
  }

  MultiWorkerOptions options;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<CoordinationClient> client;
  std::string transport_kind;
  std::unique_ptr<DistributedCollectiveExecutor> executor;
  // GPU replicas: NCCL instead of `executor` (strategy_devices.h), and how
  // the cluster's error aborts whichever executor the strategy uses.
  std::unique_ptr<CollectiveExecutor> gpu_executor;
  std::function<void(const absl::Status&)> abort_collectives;
  bool shut_down = false;
  // Last: stopped first (its threads use the client).
  std::unique_ptr<HangWatchdog> watchdog;
};

namespace {

// The training tasks (chief, then workers) in worker order, as task names.
std::vector<TaskId> TrainingTasks(const ClusterSpec& cluster) {
  std::vector<TaskId> out;
  for (int i = 0; i < cluster.num_tasks(kChiefJob); ++i) out.push_back({kChiefJob, i});
  for (int i = 0; i < cluster.num_tasks(kWorkerJob); ++i) out.push_back({kWorkerJob, i});
  return out;
}

// Transports name peers by rank; a user knows tasks. "rank 1" becomes
// "rank 1 (/job:worker/replica:0/task:1)".
std::string NameRanks(const std::string& message, const std::vector<std::string>& tasks) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t at = message.find("rank ", i);
    if (at == std::string::npos) break;
    size_t end = at + 5;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    out.append(message, i, end - i);
    if (end > at + 5 && end - at - 5 < 7) {
      const int rank = std::stoi(message.substr(at + 5, end - at - 5));
      if (rank >= 0 && rank < static_cast<int>(tasks.size())) {
        absl::StrAppend(&out, " (", tasks[rank], ")");
      }
    }
    i = end;
  }
  out.append(message, i, std::string::npos);
  return out;
}

struct Listening {
  std::string host;            // this task's host, as peers reach it
  std::string server_address;  // where its gRPC server listens
};

// A task listens at its address in the spec; a task of a rendezvous
// cluster, which has none, at a free port of its address facing the chief.
// A TFJob task listens on every interface at its port.
absl::StatusOr<Listening> WhereToListen(const ClusterSpec& cluster, const std::string& chief_host,
                                        int chief_port, bool all_interfaces,
                                        absl::Duration timeout) {
  Listening out;
  std::string host;
  int port = 0;
  if (!cluster.task_address().empty()) {
    STRATA_RETURN_IF_ERROR(ParseHostPort(cluster.task_address(), &host, &port));
  } else {
    // The chief's host may not resolve or be routable yet (a network still
    // coming up, a name not yet published): retry, as registration does,
    // until the start-up timeout.
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration backoff = absl::Milliseconds(100);
    absl::StatusOr<std::string> local = LocalAddressToward(chief_host, chief_port);
    while (!local.ok() && absl::Now() + backoff < deadline) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
      local = LocalAddressToward(chief_host, chief_port);
    }
    if (!local.ok()) {
      return AnnotateStatus(local.status(), absl::StrCat(cluster.TaskPrefix(),
                                                         ": finding this host's address "
                                                         "toward the chief: "));
    }
    host = *local;
  }
  out.host = host;
  const std::string bind_host = all_interfaces ? "::" : host;
  out.server_address = bind_host.find(':') != std::string::npos
                           ? absl::StrCat("[", bind_host, "]:", port)
                           : absl::StrCat(bind_host, ":", port);
  return out;
}

// Every training task's host, in worker order: from the spec, or (a
// rendezvous cluster, whose spec has only the chief's) each task publishes
// its own in the service's store and reads every other's.
absl::StatusOr<std::vector<std::string>> TaskHosts(const ClusterSpec& cluster,
                                                   const std::vector<TaskId>& tasks,
                                                   CoordinationClient& client,
                                                   const std::string& prefix, int worker,
                                                   const std::string& host,
                                                   const std::vector<std::string>& task_names,
                                                   absl::Duration timeout) {
  if (!cluster.addresses_from_rendezvous()) {
    std::vector<std::string> hosts;
    for (const TaskId& t : tasks) {
      STRATA_ASSIGN_OR_RETURN(std::string address, cluster.address(t.type, t.index));
      std::string h;
      int port = 0;
      STRATA_RETURN_IF_ERROR(ParseHostPort(address, &h, &port));
      hosts.push_back(std::move(h));
    }
    return hosts;
  }
  STRATA_RETURN_IF_ERROR(client.Insert(absl::StrCat(prefix, "/host/", worker), host));
  std::vector<std::string> hosts;
  for (size_t i = 0; i < task_names.size(); ++i) {
    absl::StatusOr<std::string> h = client.Get(absl::StrCat(prefix, "/host/", i), timeout);
    if (!h.ok()) {
      return AnnotateStatus(h.status(), absl::StrCat("the host of ", task_names[i], ": "));
    }
    hosts.push_back(*std::move(h));
  }
  return hosts;
}

uint64_t RandomIncarnation() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v == 0 ? 1 : v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> MultiWorkerMirroredStrategy::Create(
    const ClusterSpec& cluster, const std::vector<std::string>& devices,
    const DeviceOptions& machine_in, const StrategyOptions& options,
    const MultiWorkerOptions& multi_worker) {
  const int worker = cluster.worker_id();
  if (worker < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MultiWorkerMirroredStrategy: task ", cluster.TaskPrefix(),
                     " does not train (only chief and worker tasks do)"));
  }
  if (multi_worker.transport != "auto" && multi_worker.transport != "shm" &&
      multi_worker.transport != "tcp") {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: transport '",
                                                   multi_worker.transport,
                                                   "' is not one of auto, shm, tcp"));
  }
  std::optional<JobToken> job_token = multi_worker.job_token;
  if (!job_token.has_value()) {
    STRATA_ASSIGN_OR_RETURN(job_token,
                            ResolveJobToken(/*token_file=*/"", multi_worker.insecure_no_job_token));
  }
  if (!job_token.has_value()) {
    std::fprintf(stderr,
                 "strata: WARNING: %s runs without a job token (--insecure_no_job_token): it "
                 "serves anyone who can reach its ports, and any of them can end or steer the "
                 "job\n",
                 cluster.TaskPrefix().c_str());
  }
  std::optional<TlsConfig> tls = multi_worker.tls;
  if (!tls.has_value()) {
    absl::StatusOr<std::optional<TlsConfig>> from_env = ResolveTls(TlsFiles{});
    if (!from_env.ok()) {
      return AnnotateStatus(from_env.status(), absl::StrCat(cluster.TaskPrefix(), ": "));
    }
    tls = *std::move(from_env);
  }
  // This worker's devices carry its task's name, as in TensorFlow.
  DeviceOptions machine = machine_in;
  machine.job = cluster.task_type();
  machine.task = cluster.task_index();
  // None given: every local GPU, else the first CPU. GPU replicas reduce
  // with NCCL across the workers, with no shm/TCP data plane.
  STRATA_ASSIGN_OR_RETURN(PreparedDevices local,
                          PrepareDevices(devices, machine, /*default_to_gpus=*/true));
  STRATA_RETURN_IF_ERROR(CheckNotMixed("MultiWorkerMirroredStrategy", local.devices));
  machine = local.options;
  std::vector<std::string> resolved = local.devices;
  const bool use_nccl = local.device_mgr != nullptr && AllGpus(resolved);

  const std::vector<TaskId> tasks = TrainingTasks(cluster);
  std::vector<std::string> task_names;
  for (const TaskId& t : tasks) task_names.push_back(ClusterSpec::TaskPrefix(t));
  const std::string fingerprint = ClusterFingerprint(cluster.ToClusterDef());
  STRATA_ASSIGN_OR_RETURN(std::string chief_address,
                          cluster.address(cluster.chief().type, cluster.chief().index));
  std::string chief_host;
  int chief_port = 0;
  STRATA_RETURN_IF_ERROR(ParseHostPort(chief_address, &chief_host, &chief_port));
  // Keys of this cluster in the service's store are namespaced by the
  // chief's address and the cluster, so two clusters on one host never
  // share a shared-memory segment. (The fingerprint is stable across
  // processes; absl::Hash is not.)
  const std::string prefix = absl::StrCat("mwms-", chief_port, "-", fingerprint);
  STRATA_ASSIGN_OR_RETURN(
      const Listening listening,
      WhereToListen(cluster, chief_host, chief_port, multi_worker.listen_on_all_interfaces,
                    multi_worker.startup_timeout));

  auto rt = std::make_unique<Runtime>();
  rt->options = multi_worker;

  // 1. This task's server, on exactly its address; the chief's hosts the
  // coordination service.
  GrpcServerOptions server_options;
  server_options.address = listening.server_address;
  server_options.host_coordination_service = cluster.is_chief();
  server_options.coordination.tasks = task_names;
  server_options.coordination.service_task = ClusterSpec::TaskPrefix(cluster.chief());
  server_options.coordination.cluster_fingerprint = fingerprint;
  server_options.coordination.heartbeat_timeout = multi_worker.heartbeat_timeout;
  server_options.coordination.register_timeout = multi_worker.startup_timeout;
  server_options.job_token = job_token;
  server_options.tls = tls;
  STRATA_ASSIGN_OR_RETURN(rt->server, GrpcServer::Start(server_options));

  // 2. Registration: waits for every task; returns their devices.
  CoordinationClientOptions client_options;
  client_options.service_address = chief_address;
  client_options.service_task = ClusterSpec::TaskPrefix(cluster.chief());
  client_options.task = cluster.TaskPrefix();
  client_options.devices = resolved;
  client_options.cluster_fingerprint = fingerprint;
  client_options.incarnation = RandomIncarnation();
  client_options.register_timeout = multi_worker.startup_timeout;
  client_options.job_token = job_token;
  client_options.tls = tls;
  STRATA_ASSIGN_OR_RETURN(rt->client, CoordinationClient::Connect(client_options));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all_devices, rt->client->Register());
  const int num_workers = static_cast<int>(tasks.size());
  if (all_devices.size() != resolved.size() * tasks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiWorkerMirroredStrategy: every worker needs the same number of devices; ",
        cluster.TaskPrefix(), " has ", resolved.size(), " and the cluster ", all_devices.size(),
        " over ", num_workers, " workers: ", absl::StrJoin(all_devices, ", ")));
  }

  // Every task's host, as each task sees itself (a rendezvous cluster's
  // spec has only the chief's).
  STRATA_ASSIGN_OR_RETURN(const std::vector<std::string> hosts,
                          TaskHosts(cluster, tasks, *rt->client, prefix, worker, listening.host,
                                    task_names, multi_worker.startup_timeout));

  // 3. The cross-worker data plane.
  std::string kind = multi_worker.transport;
  if (kind == "auto") {
    kind = "shm";
    for (const std::string& h : hosts) {
      if (h != hosts[0]) kind = "tcp";
    }
  }
  std::unique_ptr<Transport> transport;
  if (use_nccl) kind = "nccl";
  if (num_workers > 1 && !use_nccl) {
    if (kind == "shm") {
      ShmTransportOptions o;
      o.key_prefix = absl::StrCat(prefix, "-shm");
      o.connect_timeout = multi_worker.startup_timeout;
      // A worker's collectives wait while its own threads still compute
      // (backward, the input pipeline): a waiting rank polls briefly, then
      // yields its core to them before it sleeps. Measured with the MLP
      // 784-512-512-10, 2 workers x 1 thread (docs/performance.md): polling
      // 5 us and yielding 200 us gave 59-68k examples/s; polling 20 ms (the
      // transport's choice for a rank alone on its core) 33-35k.
      o.adaptive_wait = false;
      o.spin_duration = absl::Microseconds(5);
      o.yield_duration = absl::Microseconds(200);
      STRATA_ASSIGN_OR_RETURN(transport, ConnectShmTransport(worker, num_workers, *rt->client, o));
    } else {
      TcpTransportOptions o;
      o.host = hosts[worker];
      o.key_prefix = absl::StrCat(prefix, "/tcp");
      o.connect_timeout = multi_worker.startup_timeout;
      o.job_token = job_token;
      o.tls = tls;
      STRATA_ASSIGN_OR_RETURN(transport, ConnectTcpTransport(worker, num_workers, *rt->client, o));
    }
  }
  rt->transport_kind = kind;

  // 4. The executor: local, then across workers. A failed cross-worker
  // collective is the cluster's error; the cluster's error fails the
  // collectives.
  CoordinationClient* client = rt->client.get();
  Runtime* runtime = rt.get();
  auto report = [client, runtime, task_names](const absl::Status& s) {
    const absl::Status named(s.code(), NameRanks(std::string(s.message()), task_names));
    // This task's answer to the chief's post-mortem now: it may be gone
    // before its client hears of the error it reports.
    if (runtime->watchdog != nullptr) runtime->watchdog->OnClusterError(named);
    (void)client->ReportError(named);
  };
  if (use_nccl) {
    // NCCL's unique ids go through the coordination service's store, under
    // a prefix of this cluster incarnation (the chief's): the store's keys
    // are insert-once.
    const std::string incarnation_key = absl::StrCat(prefix, "/nccl_incarnation");
    std::string incarnation;
    if (worker == 0) {
      incarnation = absl::StrCat(absl::Hex(rt->client->incarnation()));
      STRATA_RETURN_IF_ERROR(rt->client->Insert(incarnation_key, incarnation));
    } else {
      STRATA_ASSIGN_OR_RETURN(incarnation,
                              rt->client->Get(incarnation_key, multi_worker.startup_timeout));
    }
    GpuCollectiveOptions go;
    go.worker_rank = worker;
    go.num_workers = num_workers;
    go.worker_names = task_names;
    go.store = rt->client.get();
    go.key_prefix = absl::StrCat("nccl/", incarnation);
    go.on_fatal_error = report;
    STRATA_ASSIGN_OR_RETURN(GpuCollectives nccl,
                            MakeGpuCollectives(*local.device_mgr, resolved, std::move(go)));
    rt->gpu_executor = std::move(nccl.executor);
    rt->abort_collectives = std::move(nccl.abort);
  } else {
    DistributedCollectiveExecutorOptions eo;
    eo.worker_rank = worker;
    eo.num_workers = num_workers;
    eo.worker_names = task_names;
    eo.transport = std::move(transport);
    eo.on_fatal_error = report;
    STRATA_ASSIGN_OR_RETURN(rt->executor, DistributedCollectiveExecutor::Create(std::move(eo)));
    DistributedCollectiveExecutor* executor = rt->executor.get();
    rt->abort_collectives = [executor](const absl::Status& s) { executor->Abort(s); };
  }
  // Hangs named by default: a collective waiting past the heartbeat
  // timeout, or SIGUSR1, gets the chief's diagnosis (hang_watchdog.h).
  if (num_workers > 1) {
    HangWatchdogOptions wo;
    wo.store = rt->client.get();
    wo.key_prefix = absl::StrCat(prefix, "/diag");
    wo.rank = worker;
    wo.task_names = task_names;
    wo.stall_threshold = multi_worker.heartbeat_timeout;
    if (rt->server != nullptr && rt->server->coordination_service() != nullptr) {
      CoordinationServiceImpl* service = rt->server->coordination_service();
      wo.peek = [service](const std::string& key) { return service->PeekKeyValue(key); };
    }
    rt->watchdog = HangWatchdog::Start(std::move(wo));
    HangWatchdog::InstallSignalHandler();
  }
  // On the cluster's error every task prints its flight recorder (what it
  // was doing when the cluster failed), and the chief one diagnosis of
  // every task's.
  rt->abort_collectives = [abort = std::move(rt->abort_collectives), watchdog = rt->watchdog.get(),
                           task = cluster.TaskPrefix()](const absl::Status& s) {
    const std::string dump = FormatSnapshot(FlightRecorder::Process().Snapshot(task, 8));
    std::fprintf(stderr, "strata: %s at the cluster's error: %s", task.c_str(), dump.c_str());
    if (watchdog != nullptr) watchdog->OnClusterError(s);
    abort(s);
  };
  rt->client->SetErrorCallback(rt->abort_collectives);

  std::unique_ptr<MultiWorkerMirroredStrategy> s(new MultiWorkerMirroredStrategy(
      std::move(resolved), machine, options, cluster, std::move(rt)));
  // The devices outlive the NCCL executor in `rt` (a member of the derived
  // class, destroyed first).
  if (local.device_mgr != nullptr) s->AdoptDevices(std::move(local.device_mgr));
  return s;
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(std::vector<std::string> devices,
                                                         DeviceOptions machine,
                                                         StrategyOptions options,
                                                         ClusterSpec cluster,
                                                         std::unique_ptr<Runtime> runtime)
    : MirroredStrategy(std::move(devices), std::move(machine), std::move(options),
                       cluster.num_workers(), cluster.worker_id()),
      cluster_(std::move(cluster)),
      runtime_(std::move(runtime)) {
  for (const TaskId& t : TrainingTasks(cluster_)) task_names_.push_back(ClusterSpec::TaskPrefix(t));
  set_collective_executor(runtime_->gpu_executor != nullptr
                              ? runtime_->gpu_executor.get()
                              : static_cast<CollectiveExecutor*>(runtime_->executor.get()));
}

absl::Status MultiWorkerMirroredStrategy::NameTasks(const absl::Status& status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(), NameRanks(std::string(status.message()), task_names_));
}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() = default;

std::vector<std::string> MultiWorkerMirroredStrategy::worker_task_names() const {
  std::vector<std::string> names;
  for (const TaskId& t : TrainingTasks(cluster_)) names.push_back(ClusterSpec::TaskPrefix(t));
  return names;
}

std::string MultiWorkerMirroredStrategy::transport_kind() const { return runtime_->transport_kind; }

absl::Status MultiWorkerMirroredStrategy::cluster_error() const {
  return runtime_->client->error();
}

void MultiWorkerMirroredStrategy::OnClusterError(std::function<void(absl::Status)> callback) {
  runtime_->client->SetErrorCallback(
      [abort = runtime_->abort_collectives, callback = std::move(callback)](absl::Status s) {
        // The user's first: aborting may wait on the chief (the executor
        // reports its error there), up to an RPC timeout when it is gone.
        callback(s);
        abort(s);
      });
}

void MultiWorkerMirroredStrategy::ReportError(const absl::Status& error) {
  if (!runtime_->client->error().ok()) return;
  if (runtime_->watchdog != nullptr) runtime_->watchdog->OnClusterError(error);
  (void)runtime_->client->ReportError(error);
}

absl::Status MultiWorkerMirroredStrategy::Shutdown() {
  if (runtime_->shut_down) return absl::OkStatus();
  runtime_->shut_down = true;
  return runtime_->client->Shutdown(runtime_->options.shutdown_timeout);
}

Output MultiWorkerMirroredStrategy::SyncInitialValue(const strata::Scope& scope, Output initial,
                                                     const train::VariableArgs& args) {
  if (num_workers() == 1) return initial;
  const int key = NextWorkerInstanceKey();
  const ops::CollectiveAttrs attrs =
      ops::CollectiveAttrs().TimeoutSeconds(options().collective_timeout_seconds);
  const strata::Scope s = scope.WithDevice(devices()[0]);
  if (is_chief()) {
    return ops::CollectiveBcastSend(s.WithOpName("broadcast_initial_value"), initial, num_workers(),
                                    worker_group_key(), key, attrs);
  }
  return ops::CollectiveBcastRecv(s.WithOpName("broadcast_initial_value"), args.dtype, args.shape,
                                  num_workers(), worker_group_key(), key, attrs);
}

}  // namespace distribute
}  // namespace strata
