// Session: runs steps of a graph on the devices of one process.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
//   Output y = ops::Identity(root.WithOpName("y").WithDevice("/cpu:1"), x);
//   SessionOptions opts;
//   opts.devices.num_cpu_devices = 2;                 // virtual CPU:0 and CPU:1
//   absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(root, opts);
//   std::vector<Tensor> out;
//   absl::Status st = (*s)->Run({{"x", Tensor::Scalar<float>(1)}}, {"y:0"}, {}, &out);
//
// A Run with a new (feeds, fetches, targets) signature is planned once:
// prune to what the fetches and targets need (feeds cut the graph; an unfed
// placeholder nothing needs is fine), rewrite feeds into _Arg and fetches into
// _Retval nodes, run the optimization passes, place each node on a device
// (runtime/placement.h), split into one partition per device with _Send/_Recv
// pairs between them (runtime/partition.h) and build one Executor per
// partition. The plan is cached, so a repeated Run only checks the feeds,
// runs the partitions at once (one on the calling thread, the others on the
// inter-op pool; they meet in a per-step rendezvous) and collects the fetches.
// Collective ops of the partitions meet in the session's collective executor
// (SessionOptions::collective_executor), keyed by the step's id.
//
// Errors (InvalidArgument unless said) name what is wrong: an unknown or
// malformed feed, fetch or target name; a fed value of the wrong dtype or a
// shape the tensor's known shape rules out; a node requesting a device that
// does not exist; a failing kernel ("node 'x' (op MatMul): ...", with the
// kernel's code). The first failure in any partition cancels the others.
//
// Thread-safety: Run may be called concurrently from many threads (plans are
// immutable once cached; each step has its own state). Ownership: the session
// owns a copy of the graph, its plans and, unless SessionOptions::device_mgr
// is given, its devices; Run's outputs are independent of the session.
#ifndef STRATA_RUNTIME_SESSION_H_
#define STRATA_RUNTIME_SESSION_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "graph/graph.h"
#include "graph/scope.h"
#include "graph/tensor.h"
#include "proto/graph.pb.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/recorded_partition.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace strata {

class CancellationManager;
class CollectiveExecutor;
struct Partition;
class RemoteTasks;
class StepTracer;
class TaskLinks;

// A graph rewrite run on each step graph after pruning and before placement
// (constant folding, CSE, ...). It must keep the _Arg and _Retval nodes.
using GraphPass = std::function<absl::Status(Graph*)>;

struct SessionOptions {
  // The devices to create, unless `device_mgr` is set.
  DeviceOptions devices;
  // Devices shared with other sessions (not owned; must outlive the session).
  DeviceMgr* device_mgr = nullptr;
  // Threads of the inter-op pool (expensive kernels, partitions other than
  // the caller's); 0: hardware concurrency.
  int inter_op_threads = 0;
  // A pool shared with other sessions instead (not owned; must outlive the
  // session); inter_op_threads is then ignored.
  Eigen::ThreadPoolInterface* inter_op_pool = nullptr;
  // Where unplaced nodes go (a full or partial name); "": the first device.
  std::string default_device;
  // A device request that cannot be met falls back to default placement.
  bool allow_soft_placement = false;
  // A node requesting a device without a kernel for its op runs on a CPU of
  // the same task (PlacementOptions::host_fallback_without_kernel).
  bool host_fallback_without_kernel = false;
  // Run in order on every new step graph; none by default.
  std::vector<GraphPass> optimization_passes;
  // Where the collective ops (graph/ops/collective_ops.h) of every step
  // meet: this executor (not owned; it must outlive the session), e.g. one
  // shared with other sessions, or nullptr: the session makes its own
  // LocalCollectiveExecutor for its devices.
  CollectiveExecutor* collective_executor = nullptr;
  // For the session's own collective executor: how long a collective whose
  // timeout_seconds attr is 0 may wait for its peers before it fails with
  // DeadlineExceeded. Must be positive.
  absl::Duration collective_timeout = absl::Seconds(60);
  // Record each GPU partition of a step once and replay it as one CUDA graph
  // on later steps, where the partition allows it (runtime/recorded_partition.h
  // says when, and recording_stats() why not).
  bool record_gpu_steps = true;
  // A step spanning tasks (processes), SPMD as TensorFlow's multi-worker
  // runtime and JAX's multi-controller programs: every task creates a
  // session of the same graph with the other tasks' devices here and runs
  // the same signatures in the same order. Placement and partitioning then
  // see every task's devices (a node may request "/job:worker/task:1/..."),
  // each task runs only its own partitions, and tensors between tasks cross
  // in a RemoteRendezvous (runtime/remote_rendezvous.h) over `task_links`
  // (not owned; it and its transport must outlive the session). Each task
  // gets every fetch (a fetch computed on another task is sent to all) and
  // uses only the feeds its own partitions consume. Nodes without a device
  // run on the first task's first device (list each task's devices in
  // its own order: every task must see one order), unless default_device
  // names another (the same on every task). Steps of one signature
  // that cross tasks must not run concurrently (their order pairs them up).
  // A failed step aborts the links' transport, failing every task's steps.
  std::vector<std::string> remote_devices;
  const TaskLinks* task_links = nullptr;
  // How long a step that crosses tasks may take before it fails (and with
  // it every task's) with DeadlineExceeded: a task that runs a step the
  // others never run would otherwise wait for them forever. Must be positive.
  absl::Duration cross_task_step_timeout = absl::Minutes(10);
  // Tasks that run partitions on request (runtime/remote_tasks.h; not
  // owned, must outlive the session), as parameter servers do: nodes may be
  // placed on their devices; this session registers those partitions with
  // them when it plans a step and asks them to run them at each step, the
  // tensors between their partitions and this task's crossing in the
  // step's exchange with each. Feeds and fetches stay on this task; unplaced
  // nodes go to this task's first device. Steps may run concurrently, as
  // may other sessions' (other clients') steps on the same tasks.
  // cross_task_step_timeout bounds each step there. Not with task_links.
  RemoteTasks* remote_tasks = nullptr;
};

struct RunOptions {
  // Fill RunMetadata::partition_graphs.
  bool output_partition_graphs = false;
  // Cancelling it ends the step with its status (not owned; it must outlive
  // the Run call). The step's own failures do not cancel it.
  CancellationManager* cancellation = nullptr;
  // Records every kernel of the step on every device (runtime/trace.h; not
  // owned; it must outlive the Run call). nullptr: no tracing, no cost.
  StepTracer* tracer = nullptr;
};

struct RunMetadata {
  // One per partition of the step's plan, with the device it runs on.
  std::vector<std::string> partition_devices;
  std::vector<::tensorflow::GraphDef> partition_graphs;
};

class Session {
 public:
  // Imports `def` (graph/graph_def_import.h); its errors name the node.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const ::tensorflow::GraphDef& def,
                                                         SessionOptions options = {});
  // Copies `graph`: later changes to it do not reach the session.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const Graph& graph,
                                                         SessionOptions options = {});
  // Takes `graph` over (no copy).
  static absl::StatusOr<std::unique_ptr<Session>> Create(std::unique_ptr<Graph> graph,
                                                         SessionOptions options = {});
  // The scope's graph, or the scope's error if building it failed.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const Scope& scope,
                                                         SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds ("x", "x:0", "y:1" with their values), fetches (tensor names) and
  // targets (node names run for their effect). `outputs` gets one tensor per
  // fetch, in order.
  absl::Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs);
  absl::Status Run(const RunOptions& run_options,
                   const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                   RunMetadata* metadata);

  // Recorded GPU partitions over all plans: recordings made, steps replayed
  // and run kernel by kernel, and why something was not recorded, each plan's
  // reason ("the step fetching {...} with targets {...}: ...") joined by "; ".
  RecordingStats recording_stats() const;

  // How many step plans were built (cache misses) so far.
  int64_t num_plans_built() const { return plans_built_.load(std::memory_order_relaxed); }
  const DeviceMgr& device_mgr() const { return *devices_; }
  const Graph& graph() const { return *graph_; }

 private:
  struct Plan;
  Session(std::unique_ptr<Graph> graph, SessionOptions options, std::unique_ptr<DeviceMgr> owned,
          DeviceMgr* devices, Device* default_device, std::unique_ptr<DeviceMgr> cluster_devices);
  static absl::StatusOr<std::unique_ptr<Session>> CreateFromOwnedGraph(std::unique_ptr<Graph> g,
                                                                       SessionOptions options);
  absl::StatusOr<std::shared_ptr<const Plan>> GetPlan(
      const std::vector<std::pair<std::string, Tensor>>& feeds,
      const std::vector<std::string>& fetches, const std::vector<std::string>& targets);
  absl::StatusOr<std::shared_ptr<const Plan>> BuildPlan(
      const std::vector<std::pair<std::string, Tensor>>& feeds,
      const std::vector<std::string>& fetches, const std::vector<std::string>& targets) const;
  // Registers a partition of another task with it (SessionOptions::
  // remote_tasks) and adds its handle to `plan`.
  absl::Status RegisterRemotePartition(const Partition& p, Plan* plan) const;
  // Runs the plan's partitions on `args`: the first on the caller's thread
  // (after the others are scheduled on the inter-op pool); `done` once each.
  void StartPartitions(const Plan& plan, const Executor::Args& args,
                       const std::function<void(absl::Status)>& done);
  absl::Status RunPlan(const Plan& plan, const std::vector<std::pair<std::string, Tensor>>& feeds,
                       CancellationManager* external_cancellation, StepTracer* tracer,
                       std::vector<Tensor>* outputs);

  // Const after construction.
  const std::unique_ptr<Graph> graph_;
  const SessionOptions options_;
  const std::unique_ptr<DeviceMgr> owned_devices_;
  DeviceMgr* const devices_;
  Device* const default_device_;
  // Every task's devices (local first) for placement and partitioning when
  // the session spans tasks; else null.
  std::unique_ptr<DeviceMgr> cluster_devices_;
  std::unique_ptr<Eigen::ThreadPoolInterface> owned_pool_;
  Eigen::ThreadPoolInterface* inter_op_pool_ = nullptr;
  // Where a step across tasks continues after a tensor from another task
  // arrives: the inter-op pool, or with the inline pool a thread of its own
  // (inline, the step's kernels would run on the transport's progress
  // thread and hold every later message of the step until they finished).
  std::unique_ptr<Eigen::ThreadPoolInterface> remote_pool_;
  Eigen::ThreadPoolInterface* remote_continuations_ = nullptr;
  std::unique_ptr<CollectiveExecutor> owned_collectives_;
  CollectiveExecutor* collectives_ = nullptr;

  std::atomic<int64_t> next_step_id_{1};
  std::atomic<int64_t> plans_built_{0};
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Plan>> plans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_SESSION_H_
