// Distribution strategies: the same model code trains on one device or on N
// devices of one machine by changing the line that makes the strategy, as
// with tf.distribute.
//
//   DeviceOptions machine;
//   machine.num_cpu_devices = 4;                       // 4 virtual CPU devices
//   std::unique_ptr<Strategy> strategy =
//       *MirroredStrategy::Create({"/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"}, machine);
//   // or: *OneDeviceStrategy::Create("/cpu:0", machine);
//   Scope root = Scope::NewRootScope();
//   StrategyScope in_scope = strategy->Scope();        // variables become mirrored
//   auto model = *train::MakeMlp({64}, 10, /*seed=*/1);
//   DistributedOptimizer<train::SGD> sgd(0.1);         // all-reduces gradients
//   auto data = *strategy->DistributeDataset(batches, {{"x", DT_FLOAT, PartialTensorShape({-1, 64})},
//                                                     {"y", DT_INT32, PartialTensorShape({-1})}});
//   std::vector<PerReplica> inputs = *data->Inputs(root);
//   RunResult step = *strategy->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>& in)
//                                             -> absl::StatusOr<ReplicaResult> {
//     STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(ctx.scope(), in[0]));
//     Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope(), in[1], logits);
//     STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(ctx.scope(), loss, model->reads(), &sgd));
//     return ReplicaResult{{loss}, {train_op}};
//   }, inputs);
//   Output mean_loss = *strategy->Reduce(root, ReduceOp::kMean, step.values[0]);
//   Node* init = train::GlobalVariablesInitializer(root);
//   auto session = *Session::Create(root, strategy->session_options());
//
// Run traces `step_fn` once per replica, in replica order, into the one
// graph: replica r's ops are named "replica_r/..." and placed on devices()[r]
// (ctx.scope() carries both), so the Session partitions the step per device
// and runs the replicas concurrently. Variables made while the strategy's
// Scope() is alive, or while Run traces, are made through the creator hook
// (train/variable.h): mirrored (one identical copy per device) for
// MirroredStrategy, plain on the device for OneDeviceStrategy. A variable
// made while tracing gets its name without the replica prefix ("dense/kernel",
// as on one device) and is made once, by the first replica that asks; later
// replicas reuse it through the object the first one got (layers do).
//
// Collectives: ctx.AllReduce adds one CollectiveReduce node per replica; the
// k-th collective traced by every replica gets the same instance key (keys
// are handed out in trace order), so replicas must issue the same
// collectives in the same order. Run checks this once every replica is
// traced: another count, dtype or (known) shape is InvalidArgument naming
// the replicas and nodes; a mismatch only known at run time is the
// collective executor's error, and a participant that never arrives makes
// the others fail with DeadlineExceeded after the collective timeout.
//
// Errors: Run returns the step function's error prefixed with the replica;
// with more than one replica it rejects a step whose replica uses a variable
// that was not made under this strategy (each replica would read one shared
// copy and update it N times) or another replica's copy (e.g. a plain
// optimizer updating the primary from every replica): InvalidArgument naming
// the node and the variable.
//
// GPUs (a --config=cuda build): devices may be "/gpu:N"; the strategy then
// makes the process's devices and shares them with its sessions
// (session_options(), device_mgr()), and GPU replicas all-reduce with NCCL
// (strategy_devices.h, docs/strategy.md).
//
// Thread-safety: build graphs with one thread, as for Scope; the scope and
// the replica context are per thread. The strategy may be shared by the
// sessions that run its graphs. Ownership: the strategy must outlive the
// graph building that uses it (its variables and its scope); variables
// belong to the graph's collection.
#ifndef STRATA_STRATEGY_STRATEGY_H_
#define STRATA_STRATEGY_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "kernels/collective.h"
#include "runtime/device.h"
#include "runtime/session.h"
#include "train/data/dataset.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace distribute {

class DistributedDataset;
class ReplicaContext;
struct DistributeOptions;
struct InputContext;
struct InputSpec;
using DatasetFn = std::function<absl::StatusOr<data::DatasetPtr>(const InputContext&)>;

// How per-replica values combine (Reduce, AllReduce).
enum class ReduceOp { kSum, kMean };
const char* ReduceOpName(ReduceOp op);  // "sum", "mean"

// One Output per replica, in replica order: what Run returns for each value
// of the step function, and what the per-replica inputs of Run are.
class PerReplica {
 public:
  PerReplica() = default;
  explicit PerReplica(std::vector<Output> values) : values_(std::move(values)) {}
  int num_replicas() const { return static_cast<int>(values_.size()); }
  const Output& operator[](int replica) const { return values_[replica]; }
  const std::vector<Output>& values() const { return values_; }
  // The values' tensor names, for Session::Run fetches.
  std::vector<std::string> names() const;

 private:
  std::vector<Output> values_;
};

// What the step function returns for its replica: values (become PerReplica
// in RunResult::values, k-th value of every replica together) and ops to run
// for their effect (e.g. the train op).
struct ReplicaResult {
  std::vector<Output> values;
  std::vector<Node*> ops;
};

struct RunResult {
  std::vector<PerReplica> values;
  // A NoOp that runs after every replica's ops (run it as a Session target);
  // nullptr if the step returned no ops.
  Node* op = nullptr;
};

// Called once per replica with its context (ctx.scope(): device and name
// prefix) and its inputs (the replica's entry of each PerReplica input).
using StepFn = std::function<absl::StatusOr<ReplicaResult>(ReplicaContext& ctx,
                                                           const std::vector<Output>& inputs)>;

// Options shared by the strategies (OneDeviceStrategy ignores the
// collective ones: a single replica reduces nothing).
struct StrategyOptions {
  // Gradients are fused into buckets of at most this many bytes (reverse
  // creation order) for their all-reduce; a gradient larger than this gets a
  // bucket of its own. <= 0: one all-reduce per gradient.
  int64_t gradient_bucket_bytes = int64_t{25} << 20;
  // Passed to every collective: "auto", "ring" or "reduce_to_one".
  std::string communication_hint = "auto";
  // Seconds a collective waits for the other replicas; 0: the session's
  // default. Past it the step fails with DeadlineExceeded.
  float collective_timeout_seconds = 0;
  // ZeRO: 0 mirrors the optimizer's state on every replica; 1 shards it,
  // each replica keeping the slots of its 1/N of the parameters
  // (strategy/sharded_update.h); 2 also keeps only the replica's 1/N of the
  // reduced gradients, which stage 1 already does here (the gradients are
  // reduce-scattered bucket by bucket as backward makes them, never
  // all-reduced), so 2 runs as 1. Other values are InvalidArgument when a
  // DistributedOptimizer applies gradients.
  int zero_stage = 0;
  // Gradient compression on the wire: "none", or "bfloat16" / "float16":
  // float32 gradients are cast to that dtype before their all-reduce (or
  // ZeRO's reduce-scatter), reduced in float and rounded once, and cast back
  // (Horovod's fp16 compression, PyTorch's bf16/fp16 communication hooks);
  // or "powersgd": gradient matrices travel as low-rank factors with error
  // feedback (strategy/powersgd.h; not with zero_stage 1 or 2). Others are
  // InvalidArgument when a DistributedOptimizer applies gradients.
  std::string gradient_compression = "none";
  // PowerSGD: the rank of the approximation; the steps all-reduced plain
  // before compression starts; the least compression worth it (a matrix
  // n x m is compressed when n m >= rate (n + m) rank); the variables to
  // compress by name (empty: every matrix worth it). PyTorch's defaults.
  int powersgd_rank = 1;
  int64_t powersgd_start_step = 1000;
  double powersgd_min_compression_rate = 2;
  std::vector<std::string> powersgd_variables;
};

// The dtype float32 gradients travel in under `options`
// (gradient_compression), DT_INVALID for "none" and "powersgd";
// InvalidArgument naming the option for an unknown value.
absl::StatusOr<DataType> GradientWireDtype(const StrategyOptions& options);

class Strategy;
class PowerSgd;

// While alive, variables made on this thread (train::CreateVariable) are made
// by the strategy. Made by Strategy::Scope(); destroy in reverse order of
// creation (a stack object). Entering the scope of a strategy whose scope is
// already active does nothing; variables made while the scopes of two
// different strategies are active fail with FailedPrecondition.
class StrategyScope {
 public:
  ~StrategyScope();
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;

 private:
  friend class Strategy;
  explicit StrategyScope(Strategy* strategy);
  std::optional<train::VariableCreatorScope> creator_;
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // This process's replicas' devices (full names), in replica order.
  const std::vector<std::string>& devices() const { return devices_; }
  // Replicas that train in lockstep: this process's, times the workers of
  // a multi-worker strategy (TensorFlow's num_replicas_in_sync).
  int num_replicas_in_sync() const { return num_local_replicas() * num_workers_; }
  // This process's replicas (one per entry of devices()).
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  // Processes that train together (1 but for MultiWorkerMirroredStrategy)
  // and this one's index among them; worker w's local replica r is replica
  // w * num_local_replicas() + r of the sync group.
  int num_workers() const { return num_workers_; }
  int worker_index() const { return worker_index_; }
  // The rank of local replica `local_replica` in the strategy's
  // collectives (ReplicaContext::collective_rank()): workers in order, and
  // within a worker its devices in name order.
  int collective_rank(int local_replica) const;
  const StrategyOptions& options() const { return options_; }
  // The devices the strategy was created against: give the session these.
  const DeviceOptions& machine() const { return machine_; }
  // What a session running the strategy's graphs needs: the machine, the
  // collective executor and, with GPUs, the strategy's own devices.
  SessionOptions session_options() const;
  // With GPU replicas: the process's devices, made once by the strategy and
  // shared by its sessions (session_options().device_mgr), so that its
  // collective executor (NCCL) and the kernels use the same device objects
  // and streams; variables then persist across those sessions. nullptr for
  // CPU-only strategies (each session makes its own devices, as before).
  DeviceMgr* device_mgr() const { return device_mgr_.get(); }
  // The collective group of the replicas (unique per strategy object).
  int collective_group_key() const { return group_key_; }
  // With several workers: the group of each worker's first device (one
  // member per worker), for what crosses workers once per worker: Reduce's
  // cross-worker sum, the broadcast of initial values.
  int worker_group_key() const { return worker_group_key_; }

  // RAII: variables made while the returned object lives are distributed.
  StrategyScope Scope();

  // Traces `step_fn` per replica (see the file comment). `inputs`: each
  // needs one value per replica. Errors: the scope's; InvalidArgument for
  // inputs of another replica count or a null input, mismatched
  // collectives or outputs, or a variable misuse; FailedPrecondition when
  // called while tracing a step.
  absl::StatusOr<RunResult> Run(const strata::Scope& scope, const StepFn& step_fn,
                                const std::vector<PerReplica>& inputs = {});

  // Sum or mean of the replicas' values, as one Output on the first device
  // (AddN in replica order, then a division by the replica count for kMean;
  // with several workers the local sums are all-reduced across workers in
  // the worker group, so every worker gets the cluster-wide value).
  // InvalidArgument if `value` does not have one value per replica, or the
  // values differ in dtype, or kMean of a non-floating dtype.
  absl::StatusOr<Output> Reduce(const strata::Scope& scope, ReduceOp op, const PerReplica& value);
  // Every worker's `value` (the same dtype and shape on each) concatenated
  // along dimension 0 in worker order, on the first device, outside Run
  // (for state sharded over the workers; every worker must run it
  // together). One worker: `value` itself.
  absl::StatusOr<Output> GatherWorkers(const strata::Scope& scope, Output value);

  // Splits each global batch of `batches` (a batched dataset whose elements
  // match `specs`) into one batch per replica (distributed_dataset.h); with
  // several workers the input is auto-sharded first (AUTO: by file where
  // the pipeline reads at least as many files as there are workers, else by
  // example), or as `options` asks.
  absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributeDataset(
      data::DatasetPtr batches, std::vector<InputSpec> specs) const;
  absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributeDataset(
      data::DatasetPtr batches, std::vector<InputSpec> specs,
      const DistributeOptions& options) const;
  // `fn` makes each worker's pipeline of per-worker batches, sharding it
  // itself (tf.distribute's distribute_datasets_from_function);
  // `options.partial_batches` applies.
  absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributeDatasetsFromFunction(
      const DatasetFn& fn, std::vector<InputSpec> specs) const;
  absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributeDatasetsFromFunction(
      const DatasetFn& fn, std::vector<InputSpec> specs, const DistributeOptions& options) const;

  // For DistributedOptimizer: inside Run, that the Run is this strategy's
  // and (with several replicas) every variable was made under its Scope().
  absl::Status CheckGradientVariables(const std::vector<train::GradAndVar>& grads_and_vars) const;
  // For DistributedOptimizer: inside Run, all-reduces (mean) the replica's
  // gradients in buckets and pairs each with the replica's own copy of its
  // variable; outside Run, returns them as given (an error for mirrored
  // variables of more than one copy: update them inside Run).
  absl::StatusOr<std::vector<train::GradAndVar>> AggregateGradients(
      const strata::Scope& scope, const std::vector<train::GradAndVar>& grads_and_vars);

 protected:
  Strategy(std::vector<std::string> devices, DeviceOptions machine, StrategyOptions options);
  // A multi-worker strategy: this process is worker `worker_index` of
  // `num_workers`, each with the same number of local replicas.
  Strategy(std::vector<std::string> devices, DeviceOptions machine, StrategyOptions options,
           int num_workers, int worker_index);
  // Where the sessions of this strategy's graphs run their collectives
  // (SessionOptions::collective_executor); nullptr: each session's own.
  void set_collective_executor(CollectiveExecutor* executor) { collective_executor_ = executor; }
  // Tasks that run the sessions' partitions on request (parameter servers;
  // SessionOptions::remote_tasks); not owned.
  void set_remote_tasks(RemoteTasks* tasks) { remote_tasks_ = tasks; }
  // Takes the devices (strategy_devices.h) and an executor over them (the
  // executor is destroyed first); either may be null.
  void AdoptDevices(std::unique_ptr<DeviceMgr> devices,
                    std::unique_ptr<CollectiveExecutor> executor = nullptr);
  // The next instance key of the worker group (graph building is the same
  // code on every worker, so every worker hands out the same keys).
  int NextWorkerInstanceKey() { return next_worker_instance_key_++; }

  // Makes the distributed variable `args` describes under `scope` (a scope
  // outside any replica; args.name is relative to it). `next` makes one
  // plain variable (the creators below the strategy's).
  virtual absl::StatusOr<std::unique_ptr<train::Variable>> CreateDistributedVariable(
      const strata::Scope& scope, const train::VariableArgs& args,
      const train::VariableCreatorFn& next) = 0;

  // Resolves device specs against the machine's CPU devices: each must
  // name exactly one local device, none twice. InvalidArgument naming the
  // spec. (GPUs: PrepareDevices in strategy_devices.h.)
  static absl::StatusOr<std::vector<std::string>> ResolveDevices(
      const std::vector<std::string>& specs, const DeviceOptions& machine);
  // The full names of the CPU devices `machine` describes.
  static std::vector<std::string> LocalDevices(const DeviceOptions& machine);

 private:
  friend class StrategyScope;
  friend class ReplicaContext;

  absl::StatusOr<std::unique_ptr<train::Variable>> CreateVariable(
      const strata::Scope& scope, const train::VariableArgs& args,
      const train::VariableCreatorFn& next);
  // After replica `replica`'s trace (nodes with ids >= first_node_id): the
  // variable misuses described in the file comment.
  absl::Status CheckReplicaVariables(const strata::Scope& scope, int replica,
                                     int first_node_id) const;

  const std::vector<std::string> devices_;
  const DeviceOptions machine_;
  const StrategyOptions options_;
  // Declared before the executor, which borrows its devices.
  std::unique_ptr<DeviceMgr> device_mgr_;
  std::unique_ptr<CollectiveExecutor> owned_executor_;
  CollectiveExecutor* collective_executor_ = nullptr;
  RemoteTasks* remote_tasks_ = nullptr;
  const int num_workers_ = 1;
  const int worker_index_ = 0;
  const int group_key_;
  const int worker_group_key_;
  int next_instance_key_ = 1;  // the next Run's first collective
  int next_worker_instance_key_ = 1;
  // gradient_compression "powersgd": its state, made with the first step.
  std::unique_ptr<PowerSgd> powersgd_;
};

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_STRATEGY_H_
