#include "runtime/session.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "base/status.h"
#include "graph/graph_def_import.h"
#include "kernels/call_frame.h"
#include "kernels/cancellation.h"
#include "kernels/collective.h"
#include "kernels/eigen_views.h"
#include "runtime/collective/local_collective_executor.h"
#include "runtime/executor.h"
#include "runtime/inline_pool.h"
#include "runtime/local_rendezvous.h"
#include "runtime/partition.h"
#include "runtime/placement.h"
#include "runtime/remote_rendezvous.h"
#include "runtime/remote_tasks.h"
#include "runtime/subgraph.h"

namespace strata {

// Everything a step of one (feeds, fetches, targets) signature needs; built
// once, read-only afterwards, shared by concurrent steps.
struct Session::Plan {
  std::vector<std::string> feed_names;
  std::vector<DataType> feed_types;
  std::vector<PartialTensorShape> feed_shapes;
  int num_fetches = 0;
  struct Part {
    Device* device;
    std::unique_ptr<Executor> executor;
    // Set where the partition runs recorded (then `executor` is unused).
    std::unique_ptr<RecordedPartition> recorded;
  };
  // Why partitions on devices that record could not be (RecordedPartition).
  std::string not_recorded;
  // "the step fetching {...} with targets {...}": for messages.
  std::string description;
  std::vector<Part> parts;
  // Partition devices with memory of their own (GPUs): values crossing to or
  // from them are copied in the rendezvous, and the step waits for their
  // streams once at its end. Empty for CPU-only plans (no cost there).
  std::vector<Device*> async_devices;
  std::vector<std::string> partition_devices;
  std::vector<::tensorflow::GraphDef> partition_graphs;
  // Steps spanning tasks: whether this task's partitions exchange tensors
  // with another task's, what they accept from them, the signature's hash
  // and how many times it ran (together they pair up the tasks' steps).
  bool crosses_tasks = false;
  RemoteRecvSpecs remote_recvs;
  uint64_t signature_hash = 0;
  mutable std::atomic<uint64_t> runs{0};
  // Partitions on tasks that run them on request (SessionOptions::
  // remote_tasks): each task's registered handles; `remote_recvs` is then
  // keyed by the full rendezvous key.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> requested;
};

namespace {

// For a session spanning tasks: a copy of every _Retval on the first
// device of each other task, so that every task gets every fetch (each
// task's plan is the same; each runs its own copy).
absl::Status AddRetvalsForEveryTask(Graph* g, const DeviceMgr& cluster) {
  std::vector<std::pair<std::string, Device*>> tasks;  // task -> its first device
  for (Device* d : cluster.devices()) {
    STRATA_ASSIGN_OR_RETURN(std::string t, TaskOfDevice(d->name()));
    bool seen = false;
    for (const auto& [name, first] : tasks) seen = seen || name == t;
    if (!seen) tasks.emplace_back(t, d);
  }
  std::vector<Node*> retvals;
  for (Node* n : g->nodes()) {
    if (n->IsOp("_Retval")) retvals.push_back(n);
  }
  for (Node* r : retvals) {
    STRATA_ASSIGN_OR_RETURN(std::string own, TaskOfDevice(r->assigned_device_name()));
    const Edge* in = r->input_edge(0);
    if (in == nullptr) return absl::InternalError(absl::StrCat(r->DebugString(), " has no input"));
    for (const auto& [task, device] : tasks) {
      if (task == own) continue;
      ::tensorflow::NodeDef def = r->def();
      def.set_name(g->NewName(absl::StrCat(r->name(), "/for", task)));
      def.clear_input();
      def.set_device(device->name());
      STRATA_ASSIGN_OR_RETURN(Node * copy, g->AddNode(std::move(def)));
      copy->set_assigned_device_name(device->name());
      STRATA_RETURN_IF_ERROR(g->AddEdge(in->src, in->src_output, copy, 0).status());
    }
  }
  return absl::OkStatus();
}

// Whether a device of `cluster` (by full name) is this process's.
std::function<bool(const std::string&)> IsLocalIn(const DeviceMgr& cluster) {
  return [&cluster](const std::string& name) {
    absl::StatusOr<Device*> d = cluster.LookupDevice(name);
    return !d.ok() || (*d)->local();
  };
}

// What a local partition of a session spanning tasks exchanges with other
// tasks: sets `crosses` and adds each _Recv from another task to `recvs`
// (by RemoteRendezvous::WireName).
absl::Status ScanCrossTaskEdges(const Graph& g, Device* device, const DeviceMgr& cluster,
                                bool* crosses, RemoteRecvSpecs* recvs) {
  RemoteRecvSpecs by_key;
  STRATA_RETURN_IF_ERROR(ScanRecvsFromOtherTasks(g, device, IsLocalIn(cluster), crosses, &by_key));
  for (auto& [key, spec] : by_key) {
    STRATA_ASSIGN_OR_RETURN(std::string wire, RemoteRendezvous::WireName(key));
    (*recvs)[wire] = std::move(spec);
  }
  return absl::OkStatus();
}

}  // namespace

Session::Session(std::unique_ptr<Graph> graph, SessionOptions options,
                 std::unique_ptr<DeviceMgr> owned, DeviceMgr* devices, Device* default_device,
                 std::unique_ptr<DeviceMgr> cluster_devices)
    : graph_(std::move(graph)),
      options_(std::move(options)),
      owned_devices_(std::move(owned)),
      devices_(devices),
      default_device_(default_device),
      cluster_devices_(std::move(cluster_devices)) {
  inter_op_pool_ = options_.inter_op_pool;
  if (inter_op_pool_ == nullptr) {
    int threads = options_.inter_op_threads;
    if (threads <= 0) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    owned_pool_ = std::make_unique<Eigen::ThreadPool>(threads);
    inter_op_pool_ = owned_pool_.get();
  }
  remote_continuations_ = inter_op_pool_;
  if (options_.task_links != nullptr && dynamic_cast<InlinePool*>(inter_op_pool_) != nullptr) {
    remote_pool_ = std::make_unique<Eigen::ThreadPool>(1);
    remote_continuations_ = remote_pool_.get();
  }
  collectives_ = options_.collective_executor;
  if (collectives_ == nullptr) {
    LocalCollectiveExecutorOptions copts;
    copts.default_timeout = options_.collective_timeout;
    owned_collectives_ = std::make_unique<LocalCollectiveExecutor>(copts);
    collectives_ = owned_collectives_.get();
  }
}

Session::~Session() {
  // Executors (in the plans) go before the pool and the devices they use.
  MutexLock l(&mu_);
  plans_.clear();
}

namespace {

// The placement view of a session spanning tasks, checked against the links.
absl::StatusOr<std::unique_ptr<DeviceMgr>> ClusterDevices(const DeviceMgr& local,
                                                          const SessionOptions& options) {
  const TaskLinks& links = *options.task_links;
  for (const Device* d : local.devices()) {
    STRATA_ASSIGN_OR_RETURN(std::string task, TaskOfDevice(d->name()));
    if (task != links.local_task()) {
      return absl::InvalidArgumentError(absl::StrCat("SessionOptions.task_links: this process is ",
                                                     links.local_task(), " but its device ",
                                                     d->name(), " is not"));
    }
  }
  auto cluster = DeviceMgr::CreateWithRemote(local, options.remote_devices, links.tasks());
  if (!cluster.ok()) return AnnotateStatus(cluster.status(), "SessionOptions.remote_devices: ");
  return cluster;
}

// The placement view of a session with tasks that run partitions on request.
absl::StatusOr<std::unique_ptr<DeviceMgr>> RequestedClusterDevices(const DeviceMgr& local,
                                                                   const SessionOptions& options) {
  const RemoteTasks& remote = *options.remote_tasks;
  if (options.task_links != nullptr || !options.remote_devices.empty()) {
    return absl::InvalidArgumentError(
        "SessionOptions.remote_tasks cannot be combined with task_links or remote_devices");
  }
  for (const Device* d : local.devices()) {
    STRATA_ASSIGN_OR_RETURN(std::string task, TaskOfDevice(d->name()));
    if (task != remote.local_task()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SessionOptions.remote_tasks: this process is ", remote.local_task(),
                       " but its device ", d->name(), " is not"));
    }
  }
  std::vector<std::string> tasks = remote.tasks();
  tasks.insert(tasks.begin(), remote.local_task());
  auto cluster = DeviceMgr::CreateWithRemote(local, remote.devices(), tasks);
  if (!cluster.ok()) return AnnotateStatus(cluster.status(), "SessionOptions.remote_tasks: ");
  return cluster;
}

// Feeds and fetches stay with the client: an _Arg or _Retval placed on a
// task that runs partitions on request moves to `home`.
void KeepCallFrameHome(Graph* g, const DeviceMgr& cluster, const Device* home) {
  for (Node* n : g->nodes()) {
    if (!n->IsOp("_Arg") && !n->IsOp("_Retval")) continue;
    absl::StatusOr<Device*> d = cluster.LookupDevice(n->assigned_device_name());
    if (d.ok() && !(*d)->local()) n->set_assigned_device_name(home->name());
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::CreateFromOwnedGraph(std::unique_ptr<Graph> g,
                                                                       SessionOptions options) {
  std::unique_ptr<DeviceMgr> owned;
  DeviceMgr* devices = options.device_mgr;
  if (devices == nullptr) {
    STRATA_ASSIGN_OR_RETURN(owned, CreateCpuDeviceMgr(options.devices));
    devices = owned.get();
  }
  Device* default_device = devices->devices().front();
  if (!options.default_device.empty()) {
    auto d = devices->LookupDevice(options.default_device);
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SessionOptions.default_device: ", d.status().message()));
    }
    default_device = *d;
  }
  if (options.collective_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("SessionOptions.collective_timeout is ",
                                                   absl::FormatDuration(options.collective_timeout),
                                                   ", must be positive"));
  }
  if (options.cross_task_step_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SessionOptions.cross_task_step_timeout is ",
                     absl::FormatDuration(options.cross_task_step_timeout), ", must be positive"));
  }
  if (options.inter_op_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SessionOptions.inter_op_threads is ", options.inter_op_threads));
  }
  std::unique_ptr<DeviceMgr> cluster;
  if (options.remote_tasks != nullptr) {
    STRATA_ASSIGN_OR_RETURN(cluster, RequestedClusterDevices(*devices, options));
  } else if (options.task_links != nullptr) {
    STRATA_ASSIGN_OR_RETURN(cluster, ClusterDevices(*devices, options));
    // The same on every task: the first task's first device.
    if (options.default_device.empty()) default_device = cluster->devices().front();
  } else if (!options.remote_devices.empty()) {
    return absl::InvalidArgumentError("SessionOptions.remote_devices given without task_links");
  }
  return std::unique_ptr<Session>(new Session(std::move(g), std::move(options), std::move(owned),
                                              devices, default_device, std::move(cluster)));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const ::tensorflow::GraphDef& def,
                                                         SessionOptions options) {
  auto g = std::make_unique<Graph>();
  STRATA_RETURN_IF_ERROR(ImportGraphDef(def, g.get()));
  return CreateFromOwnedGraph(std::move(g), std::move(options));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const Graph& graph,
                                                         SessionOptions options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, CopyGraph(graph));
  return CreateFromOwnedGraph(std::move(g), std::move(options));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::unique_ptr<Graph> graph,
                                                         SessionOptions options) {
  if (graph == nullptr) return absl::InvalidArgumentError("Session::Create: null graph");
  return CreateFromOwnedGraph(std::move(graph), std::move(options));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const Scope& scope,
                                                         SessionOptions options) {
  STRATA_RETURN_IF_ERROR(scope.status());
  return Create(*scope.graph(), std::move(options));
}

absl::StatusOr<std::shared_ptr<const Session::Plan>> Session::BuildPlan(
    const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) const {
  auto plan = std::make_shared<Plan>();
  for (const auto& f : feeds) plan->feed_names.push_back(f.first);
  plan->description = absl::StrCat("the step fetching {", absl::StrJoin(fetches, ", "),
                                   "} with targets {", absl::StrJoin(targets, ", "), "}");
  STRATA_ASSIGN_OR_RETURN(StepGraph sg, BuildStepGraph(*graph_, plan->feed_names, fetches, targets));
  plan->feed_types = std::move(sg.feed_types);
  plan->feed_shapes = std::move(sg.feed_shapes);
  plan->num_fetches = static_cast<int>(fetches.size());
  for (const GraphPass& pass : options_.optimization_passes) {
    STRATA_RETURN_IF_ERROR(pass(sg.graph.get()));
  }
  PlacementOptions popts;
  popts.default_device = default_device_;
  popts.allow_soft_placement = options_.allow_soft_placement;
  popts.host_fallback_without_kernel = options_.host_fallback_without_kernel;
  const DeviceMgr& placement = cluster_devices_ != nullptr ? *cluster_devices_ : *devices_;
  STRATA_RETURN_IF_ERROR(PlaceGraph(sg.graph.get(), placement, popts));
  if (options_.remote_tasks != nullptr) {
    KeepCallFrameHome(sg.graph.get(), placement, default_device_);
  } else if (cluster_devices_ != nullptr) {
    STRATA_RETURN_IF_ERROR(AddRetvalsForEveryTask(sg.graph.get(), placement));
    plan->signature_hash =
        StableHash64(absl::StrCat(absl::StrJoin(plan->feed_names, ", "), "; ", plan->description));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Partition> all_parts, PartitionGraph(*sg.graph, placement));
  std::vector<Partition> parts;  // this task's
  for (Partition& p : all_parts) {
    if (p.device->local()) {
      parts.push_back(std::move(p));
    } else if (options_.remote_tasks != nullptr) {
      STRATA_RETURN_IF_ERROR(RegisterRemotePartition(p, plan.get()));
    }
  }
  std::vector<const Graph*> graphs;
  for (const Partition& p : parts) graphs.push_back(p.graph.get());
  for (Partition& p : parts) {
    if (options_.remote_tasks != nullptr) {
      bool crosses = false;
      STRATA_RETURN_IF_ERROR(ScanRecvsFromOtherTasks(*p.graph, p.device, IsLocalIn(placement),
                                                     &crosses, &plan->remote_recvs));
    } else if (cluster_devices_ != nullptr) {
      STRATA_RETURN_IF_ERROR(ScanCrossTaskEdges(*p.graph, p.device, placement,
                                                &plan->crosses_tasks, &plan->remote_recvs));
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(*p.graph, p.device));
    plan->partition_devices.push_back(p.device->name());
    plan->partition_graphs.emplace_back();
    p.graph->ToGraphDef(&plan->partition_graphs.back());
    if (p.device->gpu_context() != nullptr) plan->async_devices.push_back(p.device);
    std::unique_ptr<RecordedPartition> recorded;
    if (options_.record_gpu_steps && p.device->CanRecordSteps()) {
      std::string why_not;
      STRATA_ASSIGN_OR_RETURN(recorded, RecordedPartition::Create(*p.graph, p.device, graphs, &why_not));
      if (recorded == nullptr) plan->not_recorded = absl::StrCat(plan->description, ": ", why_not);
    }
    plan->parts.push_back(Plan::Part{p.device, std::move(ex), std::move(recorded)});
  }
  return std::shared_ptr<const Plan>(std::move(plan));
}

absl::Status Session::RegisterRemotePartition(const Partition& p, Plan* plan) const {
  STRATA_ASSIGN_OR_RETURN(std::string task, TaskOfDevice(p.device->name()));
  ::tensorflow::GraphDef def;
  p.graph->ToGraphDef(&def);
  STRATA_ASSIGN_OR_RETURN(uint64_t handle,
                          options_.remote_tasks->RegisterPartition(task, p.device->name(), def));
  for (auto& [t, handles] : plan->requested) {
    if (t == task) {
      handles.push_back(handle);
      return absl::OkStatus();
    }
  }
  plan->requested.push_back({task, {handle}});
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Session::Plan>> Session::GetPlan(
    const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  // The key keeps the order: outputs follow the fetch order and feeds map to
  // _Arg indices in order. '\n' cannot appear in a node name.
  std::string key;
  for (const auto& f : feeds) absl::StrAppend(&key, f.first, "\n");
  key += "->\n";
  for (const auto& f : fetches) absl::StrAppend(&key, f, "\n");
  key += "=>\n";
  for (const auto& t : targets) absl::StrAppend(&key, t, "\n");
  {
    ReaderMutexLock l(&mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  // Planned outside the lock so that other signatures keep running; if two
  // threads plan one signature at once, the first to finish wins.
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, BuildPlan(feeds, fetches, targets));
  MutexLock l(&mu_);
  auto [it, inserted] = plans_.emplace(std::move(key), std::move(plan));
  if (inserted) plans_built_.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

RecordingStats Session::recording_stats() const {
  RecordingStats total;
  std::vector<std::string> reasons;
  MutexLock l(&mu_);
  for (const auto& [key, plan] : plans_) {
    if (!plan->not_recorded.empty()) reasons.push_back(plan->not_recorded);
    for (const Plan::Part& part : plan->parts) {
      if (part.recorded == nullptr) continue;
      const RecordingStats s = part.recorded->stats();
      total.recorded += s.recorded;
      total.replayed += s.replayed;
      total.eager += s.eager;
      if (!s.not_recorded.empty()) reasons.push_back(absl::StrCat(plan->description, ": ", s.not_recorded));
    }
  }
  std::sort(reasons.begin(), reasons.end());
  total.not_recorded = absl::StrJoin(reasons, "; ");
  return total;
}

absl::Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches,
                          const std::vector<std::string>& targets, std::vector<Tensor>* outputs) {
  return Run(RunOptions(), feeds, fetches, targets, outputs, nullptr);
}

absl::Status Session::Run(const RunOptions& run_options,
                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches,
                          const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                          RunMetadata* metadata) {
  if (outputs == nullptr && !fetches.empty()) {
    return absl::InvalidArgumentError("Session::Run: fetches given but outputs is null");
  }
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(feeds, fetches, targets));
  if (metadata != nullptr && run_options.output_partition_graphs) {
    metadata->partition_devices = plan->partition_devices;
    metadata->partition_graphs = plan->partition_graphs;
  }
  return RunPlan(*plan, feeds, run_options.cancellation, run_options.tracer, outputs);
}

namespace {

// The fed values, checked against what the plan's graph expects.
absl::Status CheckFeeds(const std::vector<DataType>& types,
                        const std::vector<PartialTensorShape>& shapes,
                        const std::vector<std::pair<std::string, Tensor>>& feeds,
                        std::vector<Tensor>* args) {
  args->reserve(feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Tensor& t = feeds[i].second;
    if (t.dtype() != types[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed '", feeds[i].first, "': expected a ", DataTypeString(types[i]),
          " tensor, got ", t.IsInitialized() ? DataTypeString(t.dtype()) : "an empty Tensor"));
    }
    if (!shapes[i].IsCompatibleWith(t.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed '", feeds[i].first, "': shape ", t.shape().DebugString(),
          " is not compatible with the tensor's shape ", shapes[i].DebugString()));
    }
    args->push_back(t);
  }
  return absl::OkStatus();
}

}  // namespace

void Session::StartPartitions(const Plan& plan, const Executor::Args& args,
                              const std::function<void(absl::Status)>& done) {
  auto run = [&args, done](const Plan::Part* part) {
    if (part->recorded != nullptr) {
      part->recorded->RunAsync(args, done);
    } else {
      part->executor->RunAsync(args, done);
    }
  };
  for (size_t i = 1; i < plan.parts.size(); ++i) {
    const Plan::Part* part = &plan.parts[i];
    inter_op_pool_->Schedule([run, part] { run(part); });
  }
  if (!plan.parts.empty()) run(&plan.parts[0]);
}

absl::Status Session::RunPlan(const Plan& plan,
                              const std::vector<std::pair<std::string, Tensor>>& feeds,
                              CancellationManager* external_cancellation, StepTracer* tracer,
                              std::vector<Tensor>* outputs) {
  // 1. The fed values must be what the graph expects. A step across tasks
  // that this task cannot start fails on the others too (they would wait
  // for its tensors).
  std::vector<Tensor> args;
  if (absl::Status s = CheckFeeds(plan.feed_types, plan.feed_shapes, feeds, &args); !s.ok()) {
    if (plan.crosses_tasks) {
      options_.task_links->transport()->Abort(
          AnnotateStatus(s, absl::StrCat("task ", options_.task_links->local_task(), ": ")));
    }
    return s;
  }
  VectorCallFrame frame(std::move(args), plan.num_fetches);
  Executor::Args ex_args;
  ex_args.step_id = next_step_id_.fetch_add(1, std::memory_order_relaxed);
  ex_args.call_frame = &frame;
  ex_args.inter_op_pool = inter_op_pool_;
  ex_args.collective_executor = collectives_;
  ex_args.tracer = tracer;

  absl::Status status;
  if (plan.parts.empty() && plan.requested.empty()) {
    // A step spanning tasks with no work on this one.
  } else if (plan.parts.size() == 1 && external_cancellation == nullptr &&
             plan.parts[0].recorded == nullptr && !plan.crosses_tasks && plan.requested.empty()) {
    // 2a. One partition: no rendezvous, the caller's thread runs it, the
    // executor makes its own cancellation manager.
    status = plan.parts[0].executor->Run(ex_args);
  } else {
    // 2b. Partitions meet in this step's rendezvous; the first error cancels
    // the step, which aborts the rendezvous so that waiting Recvs fail too.
    CancellationManager cm;
    Eigen::ThreadPoolInterface* const pool = inter_op_pool_;
    LocalRendezvous rendezvous(
        plan.async_devices.empty() ? nullptr : devices_,
        plan.async_devices.empty()
            ? LocalRendezvous::Scheduler()
            : [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); });
    // Across tasks: the local rendezvous behind a remote one, which pairs
    // this step with the other tasks' by the signature and its run count.
    std::optional<RemoteRendezvous> remote;
    std::optional<RequestedStep> requested;
    Rendezvous* step_rendezvous = &rendezvous;
    if (!plan.requested.empty()) {
      requested.emplace(&rendezvous, options_.remote_tasks, &plan.remote_recvs,
                        default_device_->allocator());
      step_rendezvous = &*requested;
    } else if (plan.crosses_tasks) {
      const uint64_t run = plan.runs.fetch_add(1, std::memory_order_relaxed);
      remote.emplace(&rendezvous, options_.task_links, &plan.remote_recvs,
                     StableHash64(absl::StrCat(run), plan.signature_hash),
                     [continue_on = remote_continuations_](std::function<void()> fn) {
                       continue_on->Schedule(std::move(fn));
                     });
      step_rendezvous = &*remote;
    }
    cm.RegisterCallback(
        [step_rendezvous](const absl::Status& s) { step_rendezvous->StartAbort(s); });
    // An outside cancellation cancels the step (not the other way round).
    CancellationToken outside = kInvalidCancellationToken;
    if (external_cancellation != nullptr) {
      outside = external_cancellation->RegisterCallback(
          [&cm](const absl::Status& s) { cm.StartCancel(s); });
      if (outside == kInvalidCancellationToken) return external_cancellation->status();
    }
    ex_args.cancellation = &cm;
    ex_args.rendezvous = step_rendezvous;
    std::atomic<int> remaining{static_cast<int>(plan.parts.size() + plan.requested.size())};
    Notification all_done;
    auto done = [&remaining, &all_done](absl::Status) {
      if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) all_done.Notify();
    };
    if (requested.has_value()) {
      // The other tasks' partitions first: this task's may send to them at once.
      requested->Start(plan.requested, options_.cross_task_step_timeout,
                       [&cm, done](absl::Status s) {
                         if (!s.ok()) cm.StartCancel(s);
                         done(s);
                       });
    }
    StartPartitions(plan, ex_args, done);
    if (plan.crosses_tasks &&
        !all_done.WaitForNotificationWithTimeout(options_.cross_task_step_timeout)) {
      std::vector<std::string> waiting = remote->WaitingReceives();
      if (waiting.size() > 3) waiting.resize(3);
      cm.StartCancel(absl::DeadlineExceededError(absl::StrCat(
          plan.description, " crosses tasks and did not finish within ",
          absl::FormatDuration(options_.cross_task_step_timeout),
          " (SessionOptions::cross_task_step_timeout): does every task run the same steps in "
          "the same order? Still waiting: ",
          waiting.empty() ? "no tensor from another task" : absl::StrJoin(waiting, "; "))));
    }
    all_done.WaitForNotification();
    // Waits for the callback if it is running now: `cm` must outlive it.
    if (external_cancellation != nullptr) external_cancellation->DeregisterCallback(outside);
    // Every failing partition cancelled the step with its error; the first
    // one is the cause, the others are its consequences.
    if (cm.IsCancelled()) status = cm.status();
  }
  // GPU kernels only enqueue work: wait for it once, here, so that errors of
  // the step's asynchronous work are the step's and results are final before
  // they reach the caller. (Fetched values already came through the
  // rendezvous, copied to host memory.)
  for (Device* d : plan.async_devices) {
    absl::Status s = d->Sync();
    if (status.ok() && !s.ok()) status = s;
  }
  if (!status.ok()) return status;
  for (size_t i = 0; i < frame.retvals().size(); ++i) {
    if (!frame.retvals()[i].IsInitialized()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fetch ", i, " of ", plan.description, " was not computed: it is dead, a value of the "
          "branch a Switch did not take (fetch it through a Merge)"));
    }
  }
  if (outputs != nullptr) *outputs = std::move(frame.retvals());
  return absl::OkStatus();
}

}  // namespace strata
