#include "strategy/multi_worker_mirrored_strategy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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
#include "runtime/remote_rendezvous.h"
#include "strategy/strategy_devices.h"

namespace strata {
namespace distribute {

// Everything a worker process holds for its cluster. Destroyed in reverse:
// the executor (uses the transport and reports to the client) first, the
// server (the chief's coordination service) last.

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
absl::StatusOr<std::vector<std::string>> TaskHosts(
    const ClusterSpec& cluster, const std::vector<TaskId>& tasks, CoordinationClient& client,
    const std::string& prefix, int worker, const std::string& host,
    const std::vector<std::string>& task_names, absl::Duration timeout) {
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

// What Create resolves before it starts anything.
struct CreatePlan {
  int worker = 0;
  std::vector<TaskId> tasks;
  std::vector<std::string> task_names;
  std::string fingerprint;
  std::string chief_address;
  std::string prefix;  // of this cluster's keys in the service's store
  Listening listening;
  std::optional<JobToken> job_token;
  std::optional<TlsConfig> tls;
};

// The job token and TLS: given, or from the environment.
absl::Status ResolveSecurity(const ClusterSpec& cluster, const MultiWorkerOptions& multi_worker,
                             CreatePlan* plan) {
  plan->job_token = multi_worker.job_token;
  if (!plan->job_token.has_value()) {
    STRATA_ASSIGN_OR_RETURN(plan->job_token,
                            ResolveJobToken(/*token_file=*/"", multi_worker.insecure_no_job_token));
  }
  if (!plan->job_token.has_value()) {
    std::fprintf(stderr,
                 "strata: WARNING: %s runs without a job token (--insecure_no_job_token): it "
                 "serves anyone who can reach its ports, and any of them can end or steer the "
                 "job\n",
                 cluster.TaskPrefix().c_str());
  }
  plan->tls = multi_worker.tls;
  if (!plan->tls.has_value()) {
    absl::StatusOr<std::optional<TlsConfig>> from_env = ResolveTls(TlsFiles{});
    if (!from_env.ok()) {
      return AnnotateStatus(from_env.status(), absl::StrCat(cluster.TaskPrefix(), ": "));
    }
    plan->tls = *std::move(from_env);
  }
  return absl::OkStatus();
}

// The cluster's tasks, names, chief and where this task listens.
absl::Status PlanCluster(const ClusterSpec& cluster, const MultiWorkerOptions& multi_worker,
                         CreatePlan* plan) {
  plan->tasks = TrainingTasks(cluster);
  for (const TaskId& t : plan->tasks) plan->task_names.push_back(ClusterSpec::TaskPrefix(t));
  plan->fingerprint = ClusterFingerprint(cluster.ToClusterDef());
  STRATA_ASSIGN_OR_RETURN(plan->chief_address,
                          cluster.address(cluster.chief().type, cluster.chief().index));
  std::string chief_host;
  int chief_port = 0;
  STRATA_RETURN_IF_ERROR(ParseHostPort(plan->chief_address, &chief_host, &chief_port));
  // Keys of this cluster in the service's store are namespaced by the
  // chief's address and the cluster, so two clusters on one host never
  // share a shared-memory segment. (The fingerprint is stable across
  // processes; absl::Hash is not.)
  plan->prefix = absl::StrCat("mwms-", chief_port, "-", plan->fingerprint);
  STRATA_ASSIGN_OR_RETURN(plan->listening, WhereToListen(cluster, chief_host, chief_port,
                                                         multi_worker.listen_on_all_interfaces,
                                                         multi_worker.startup_timeout));
  return absl::OkStatus();
}

}  // namespace

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

  // Create's steps, in order.
  // 1. This task's server (the chief's hosts the coordination service); 2.
  // the registration, which waits for every task; then every task's host.
  absl::StatusOr<std::vector<std::string>> Connect(const ClusterSpec& cluster,
                                                   const CreatePlan& plan,
                                                   const std::vector<std::string>& devices);
  // 3. The cross-worker data plane (none for NCCL's GPU replicas or one
  // worker); sets transport_kind.
  absl::StatusOr<std::unique_ptr<Transport>> ConnectDataPlane(const CreatePlan& plan,
                                                              const std::vector<std::string>& hosts,
                                                              bool use_nccl);
  // 3b. With steps_span_workers: the transport and links for tensors
  // between workers' partitions, and the other workers' devices.
  absl::Status ConnectSteps(const CreatePlan& plan, const std::vector<std::string>& hosts,
                            const std::vector<std::string>& local_devices);
  // A transport of `kind` ("shm", "tcp") between the workers, its keys
  // under the cluster's prefix and `suffix`.
  absl::StatusOr<std::unique_ptr<Transport>> ConnectTransport(const CreatePlan& plan,
                                                              const std::vector<std::string>& hosts,
                                                              const std::string& kind,
                                                              const std::string& suffix);
  // 4. The executor: a failed cross-worker collective is the cluster's
  // error, and the cluster's error fails the collectives.
  absl::Status MakeExecutor(const CreatePlan& plan, std::unique_ptr<Transport> transport,
                            DeviceMgr* gpus, const std::vector<std::string>& devices);
  // Hangs named by default (hang_watchdog.h), and on the cluster's error
  // every task's flight recorder printed.
  void WatchForHangsAndErrors(const CreatePlan& plan, const std::string& task);

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
  // Every worker's devices, as registered (worker order).
  std::vector<std::string> all_devices;
  // steps_span_workers: what sessions across the workers use.
  std::unique_ptr<Transport> steps_transport;
  std::unique_ptr<TaskLinks> steps_links;
  std::vector<std::string> remote_devices;
  // Last: stopped first (its threads use the client).
  std::unique_ptr<HangWatchdog> watchdog;
};

absl::StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> MultiWorkerMirroredStrategy::Create(
    const ClusterSpec& cluster, const std::vector<std::string>& devices,
    const DeviceOptions& machine_in, const StrategyOptions& options,
    const MultiWorkerOptions& multi_worker) {
  CreatePlan plan;
  plan.worker = cluster.worker_id();
  if (plan.worker < 0) {
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
  STRATA_RETURN_IF_ERROR(ResolveSecurity(cluster, multi_worker, &plan));
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
  STRATA_RETURN_IF_ERROR(PlanCluster(cluster, multi_worker, &plan));

  auto rt = std::make_unique<Runtime>();
  rt->options = multi_worker;
  STRATA_ASSIGN_OR_RETURN(const std::vector<std::string> hosts,
                          rt->Connect(cluster, plan, resolved));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                          rt->ConnectDataPlane(plan, hosts, use_nccl));
  if (multi_worker.steps_span_workers && plan.tasks.size() > 1) {
    STRATA_RETURN_IF_ERROR(rt->ConnectSteps(plan, hosts, resolved));
  }
  STRATA_RETURN_IF_ERROR(rt->MakeExecutor(plan, std::move(transport),
                                          use_nccl ? local.device_mgr.get() : nullptr, resolved));
  rt->WatchForHangsAndErrors(plan, cluster.TaskPrefix());

  std::unique_ptr<MultiWorkerMirroredStrategy> s(new MultiWorkerMirroredStrategy(
      std::move(resolved), machine, options, cluster, std::move(rt)));
  // The devices outlive the NCCL executor in `rt` (a member of the derived
  // class, destroyed first).
  if (local.device_mgr != nullptr) s->AdoptDevices(std::move(local.device_mgr));
  return s;
}

absl::StatusOr<std::vector<std::string>> MultiWorkerMirroredStrategy::Runtime::Connect(
    const ClusterSpec& cluster, const CreatePlan& plan, const std::vector<std::string>& devices) {
  GrpcServerOptions server_options;
  server_options.address = plan.listening.server_address;
  server_options.host_coordination_service = cluster.is_chief();
  server_options.coordination.tasks = plan.task_names;
  server_options.coordination.service_task = ClusterSpec::TaskPrefix(cluster.chief());
  server_options.coordination.cluster_fingerprint = plan.fingerprint;
  server_options.coordination.heartbeat_timeout = options.heartbeat_timeout;
  server_options.coordination.register_timeout = options.startup_timeout;
  server_options.job_token = plan.job_token;
  server_options.tls = plan.tls;
  STRATA_ASSIGN_OR_RETURN(server, GrpcServer::Start(server_options));

  CoordinationClientOptions client_options;
  client_options.service_address = plan.chief_address;
  client_options.service_task = ClusterSpec::TaskPrefix(cluster.chief());
  client_options.task = cluster.TaskPrefix();
  client_options.devices = devices;
  client_options.cluster_fingerprint = plan.fingerprint;
  client_options.incarnation = RandomIncarnation();
  client_options.register_timeout = options.startup_timeout;
  client_options.job_token = plan.job_token;
  client_options.tls = plan.tls;
  STRATA_ASSIGN_OR_RETURN(client, CoordinationClient::Connect(client_options));
  STRATA_ASSIGN_OR_RETURN(all_devices, client->Register());
  const int num_workers = static_cast<int>(plan.tasks.size());
  if (all_devices.size() != devices.size() * plan.tasks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiWorkerMirroredStrategy: every worker needs the same number of devices; ",
        cluster.TaskPrefix(), " has ", devices.size(), " and the cluster ", all_devices.size(),
        " over ", num_workers, " workers: ", absl::StrJoin(all_devices, ", ")));
  }
  // Every task's host, as each task sees itself (a rendezvous cluster's
  // spec has only the chief's).
  return TaskHosts(cluster, plan.tasks, *client, plan.prefix, plan.worker, plan.listening.host,
                   plan.task_names, options.startup_timeout);
}

// Whether every task's address has the same host: shared memory reaches
// them all.
std::string DefaultTransportKind(const std::string& option, const std::vector<std::string>& hosts) {
  if (option != "auto") return option;
  for (const std::string& h : hosts) {
    if (h != hosts[0]) return "tcp";
  }
  return "shm";
}

absl::StatusOr<std::unique_ptr<Transport>> MultiWorkerMirroredStrategy::Runtime::ConnectTransport(
    const CreatePlan& plan, const std::vector<std::string>& hosts, const std::string& kind,
    const std::string& suffix) {
  const int num_workers = static_cast<int>(plan.tasks.size());
  if (kind == "shm") {
    ShmTransportOptions o;
    o.key_prefix = absl::StrCat(plan.prefix, "-shm", suffix);
    o.connect_timeout = options.startup_timeout;
    // A worker's collectives wait while its own threads still compute
    // (backward, the input pipeline): a waiting rank polls briefly, then
    // yields its core to them before it sleeps. Measured with the MLP
    // 784-512-512-10, 2 workers x 1 thread (docs/performance.md): polling
    // 5 us and yielding 200 us gave 59-68k examples/s; polling 20 ms (the
    // transport's choice for a rank alone on its core) 33-35k.
    o.adaptive_wait = false;
    o.spin_duration = absl::Microseconds(5);
    o.yield_duration = absl::Microseconds(200);
    return ConnectShmTransport(plan.worker, num_workers, *client, o);
  }
  TcpTransportOptions o;
  o.host = hosts[plan.worker];
  o.key_prefix = absl::StrCat(plan.prefix, "/tcp", suffix);
  o.connect_timeout = options.startup_timeout;
  o.job_token = plan.job_token;
  o.tls = plan.tls;
  return ConnectTcpTransport(plan.worker, num_workers, *client, o);
}

absl::Status MultiWorkerMirroredStrategy::Runtime::ConnectSteps(
    const CreatePlan& plan, const std::vector<std::string>& hosts,
    const std::vector<std::string>& local_devices) {
  STRATA_ASSIGN_OR_RETURN(
      steps_transport,
      ConnectTransport(plan, hosts, DefaultTransportKind(options.transport, hosts), "/steps"));
  STRATA_ASSIGN_OR_RETURN(TaskLinks links, TaskLinks::Create(steps_transport.get(), plan.task_names));
  steps_links = std::make_unique<TaskLinks>(std::move(links));
  for (const std::string& d : all_devices) {
    if (std::find(local_devices.begin(), local_devices.end(), d) == local_devices.end()) {
      remote_devices.push_back(d);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> MultiWorkerMirroredStrategy::Runtime::ConnectDataPlane(
    const CreatePlan& plan, const std::vector<std::string>& hosts, bool use_nccl) {
  const int num_workers = static_cast<int>(plan.tasks.size());
  std::string kind = DefaultTransportKind(options.transport, hosts);
  std::unique_ptr<Transport> transport;
  if (use_nccl) kind = "nccl";
  if (num_workers > 1 && !use_nccl) {
    STRATA_ASSIGN_OR_RETURN(transport, ConnectTransport(plan, hosts, kind, ""));
  }
  transport_kind = kind;
  return transport;
}

absl::Status MultiWorkerMirroredStrategy::Runtime::MakeExecutor(
    const CreatePlan& plan, std::unique_ptr<Transport> transport, DeviceMgr* gpus,
    const std::vector<std::string>& devices) {
  const int worker = plan.worker;
  const int num_workers = static_cast<int>(plan.tasks.size());
  const std::vector<std::string>& task_names = plan.task_names;
  CoordinationClient* client = this->client.get();
  Runtime* runtime = this;
  auto report = [client, runtime, task_names](const absl::Status& s) {
    const absl::Status named(s.code(), NameRanks(std::string(s.message()), task_names));
    // This task's answer to the chief's post-mortem now: it may be gone
    // before its client hears of the error it reports.
    if (runtime->watchdog != nullptr) runtime->watchdog->OnClusterError(named);
    (void)client->ReportError(named);
  };
  if (gpus != nullptr) {
    // NCCL's unique ids go through the coordination service's store, under
    // a prefix of this cluster incarnation (the chief's): the store's keys
    // are insert-once.
    const std::string incarnation_key = absl::StrCat(plan.prefix, "/nccl_incarnation");
    std::string incarnation;
    if (worker == 0) {
      incarnation = absl::StrCat(absl::Hex(client->incarnation()));
      STRATA_RETURN_IF_ERROR(client->Insert(incarnation_key, incarnation));
    } else {
      STRATA_ASSIGN_OR_RETURN(incarnation, client->Get(incarnation_key, options.startup_timeout));
    }
    GpuCollectiveOptions go;
    go.worker_rank = worker;
    go.num_workers = num_workers;
    go.worker_names = task_names;
    go.store = client;
    go.key_prefix = absl::StrCat("nccl/", incarnation);
    go.on_fatal_error = report;
    STRATA_ASSIGN_OR_RETURN(GpuCollectives nccl, MakeGpuCollectives(*gpus, devices, std::move(go)));
    gpu_executor = std::move(nccl.executor);
    abort_collectives = std::move(nccl.abort);
  } else {
    DistributedCollectiveExecutorOptions eo;
    eo.worker_rank = worker;
    eo.num_workers = num_workers;
    eo.worker_names = task_names;
    eo.transport = std::move(transport);
    eo.on_fatal_error = report;
    STRATA_ASSIGN_OR_RETURN(executor, DistributedCollectiveExecutor::Create(std::move(eo)));
    abort_collectives = [e = executor.get()](const absl::Status& s) { e->Abort(s); };
  }
  return absl::OkStatus();
}

void MultiWorkerMirroredStrategy::Runtime::WatchForHangsAndErrors(const CreatePlan& plan,
                                                                  const std::string& task) {
  const int num_workers = static_cast<int>(plan.tasks.size());
  // Hangs named by default: a collective waiting past the heartbeat
  // timeout, or SIGUSR1, gets the chief's diagnosis (hang_watchdog.h).
  if (num_workers > 1) {
    HangWatchdogOptions wo;
    wo.store = client.get();
    wo.key_prefix = absl::StrCat(plan.prefix, "/diag");
    wo.rank = plan.worker;
    wo.task_names = plan.task_names;
    wo.stall_threshold = options.heartbeat_timeout;
    if (server != nullptr && server->coordination_service() != nullptr) {
      CoordinationServiceImpl* service = server->coordination_service();
      wo.peek = [service](const std::string& key) { return service->PeekKeyValue(key); };
    }
    watchdog = HangWatchdog::Start(std::move(wo));
    HangWatchdog::InstallSignalHandler();
  }
  // On the cluster's error every task prints its flight recorder (what it
  // was doing when the cluster failed), and the chief one diagnosis of
  // every task's.
  abort_collectives = [abort = std::move(abort_collectives), watchdog = watchdog.get(),
                       steps = steps_transport.get(), task](const absl::Status& s) {
    // Steps across the workers wait no longer for a lost worker's tensors.
    if (steps != nullptr) steps->Abort(s);
    const std::string dump = FormatSnapshot(FlightRecorder::Process().Snapshot(task, 8));
    std::fprintf(stderr, "strata: %s at the cluster's error: %s", task.c_str(), dump.c_str());
    if (watchdog != nullptr) watchdog->OnClusterError(s);
    abort(s);
  };
  client->SetErrorCallback(abort_collectives);
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

absl::StatusOr<SessionOptions> MultiWorkerMirroredStrategy::session_options_across_workers() const {
  if (!runtime_->options.steps_span_workers) {
    return absl::FailedPreconditionError(
        "MultiWorkerMirroredStrategy: sessions across the workers need "
        "MultiWorkerOptions::steps_span_workers");
  }
  SessionOptions o = session_options();
  if (runtime_->steps_links != nullptr) {
    o.remote_devices = runtime_->remote_devices;
    o.task_links = runtime_->steps_links.get();
  }
  return o;
}

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
