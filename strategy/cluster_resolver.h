// Cluster configuration for multi-worker training: which jobs and tasks make
// up the cluster, where each listens, and which task this process is. The
// first piece of MultiWorkerMirroredStrategy; the gRPC services and the
// strategy that use it are not built yet (docs/cluster.md).
//
// Two sources give the same ClusterSpec:
//  - TF_CONFIG, read exactly as TensorFlow's TFConfigClusterResolver does:
//      {"cluster": {"chief": ["c0:2222"], "worker": ["w0:2222", "w1:2222"]},
//       "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}
//    A job may also be a dict index -> address for sparse jobs
//    ({"ps": {"1": "p1:2222", "3": "p3:2222"}}); unknown top-level keys are
//    ignored; rpc_layer defaults to "grpc".
//  - flags: --cluster_spec=<the "cluster" JSON> --task_type=worker --task_index=1.
//
//   absl::StatusOr<ClusterSpec> spec = ClusterSpecFromEnvironment();  // TF_CONFIG
//   if (!spec.ok()) { /* InvalidArgument naming the field */ }
//   spec->num_workers();                    // 3 (chief + workers)
//   spec->is_chief();                       // false: task worker:1
//   spec->DeviceName("CPU", 0);             // "/job:worker/replica:0/task:1/device:CPU:0"
//   tensorflow::ServerDef def = spec->ToServerDef();
//
// Bad input fails at start-up with InvalidArgument naming the field: bad JSON
// (with its position), a job other than chief/worker/ps/evaluator, more than
// one chief or evaluator, an index out of range, duplicate addresses, a bad
// port or missing host, a task not in the cluster, an empty cluster, no chief
// (no chief job and no worker task 0).
//
// Where TensorFlow's resolver is more lenient (it accepts anything and leaves
// the checks to the strategy), we check at start-up what
// MultiWorkerMirroredStrategy's multi_worker_util checks later, and also the
// addresses. As in TensorFlow, an evaluator task need not be in the cluster.
//
// ClusterSpec is an immutable value type; safe to share between threads.
#ifndef STRATA_STRATEGY_CLUSTER_RESOLVER_H_
#define STRATA_STRATEGY_CLUSTER_RESOLVER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/json.h"
#include "proto/cluster.pb.h"

namespace strata {

// Job names TensorFlow's multi-worker strategies allow.
inline constexpr char kChiefJob[] = "chief";
inline constexpr char kWorkerJob[] = "worker";
inline constexpr char kPsJob[] = "ps";
inline constexpr char kEvaluatorJob[] = "evaluator";
// The largest cluster a rendezvous or scheduler resolver accepts.
inline constexpr int kMaxRendezvousWorkers = 65536;

struct TaskId {
  std::string type;
  int index = 0;
  bool operator==(const TaskId& o) const { return type == o.type && index == o.index; }
};

class ClusterSpec {
 public:
  // Job name -> (task index -> "host:port").
  using JobMap = std::map<std::string, std::map<int, std::string>>;

  // Validates the cluster and this process's task (the checks listed above).
  // `field_prefix` names where the cluster came from in errors
  // ("TF_CONFIG.cluster", "--cluster_spec").
  static absl::StatusOr<ClusterSpec> Create(JobMap jobs, TaskId task, std::string rpc_layer,
                                            absl::string_view field_prefix = "cluster");
  // A cluster found by rendezvous (the torchrun-style resolver,
  // scheduler_resolvers.h): `num_workers` tasks worker:0..n-1, of which
  // only the chief's (worker:0's) address is known here; the others' are
  // learnt at start-up through the chief's coordination service. This task
  // is worker:`rank`. InvalidArgument naming `source` for a size below 1, a
  // rank out of range or a bad chief address.
  static absl::StatusOr<ClusterSpec> CreateRendezvous(int num_workers, int rank,
                                                      const std::string& chief_address,
                                                      absl::string_view source);

  const JobMap& jobs() const { return jobs_; }
  std::vector<std::string> job_names() const;
  bool has_job(absl::string_view job) const { return jobs_.count(std::string(job)) > 0; }
  // Tasks in `job` (0 for an absent job).
  int num_tasks(absl::string_view job) const;
  // "host:port" of a task; NotFound naming /job:j/task:i if absent. Empty
  // for a task other than the chief of a rendezvous cluster.
  absl::StatusOr<std::string> address(absl::string_view job, int index) const;
  // True for a cluster from CreateRendezvous: the tasks other than the
  // chief have no address in the spec (each listens where it finds itself).
  bool addresses_from_rendezvous() const { return rendezvous_; }

  // This process's task.
  const TaskId& task() const { return task_; }
  const std::string& task_type() const { return task_.type; }
  int task_index() const { return task_.index; }
  // This task's "host:port"; empty for an evaluator outside the cluster and
  // for a task other than the chief of a rendezvous cluster.
  const std::string& task_address() const { return task_address_; }
  const std::string& rpc_layer() const { return rpc_layer_; }

  // chief:0 if there is a chief job, else worker:0 (TensorFlow's rule).
  const TaskId& chief() const { return chief_; }
  bool is_chief() const { return task_ == chief_; }
  // Tasks that train: chief + workers (TensorFlow's worker_count); an
  // evaluator trains alone, so 1 there.
  int num_workers() const;
  // This task's rank among chief and workers: the chief 0, worker i is i + 1
  // with a chief, i without (TensorFlow's id_in_cluster). -1 for ps/evaluator.
  int worker_id() const;

  // "/job:<type>/replica:0/task:<index>" for this task or a given one.
  std::string TaskPrefix() const;
  static std::string TaskPrefix(const TaskId& task);
  // "/job:worker/replica:0/task:1/device:CPU:0".
  std::string DeviceName(absl::string_view device_type, int device_id) const;
  static std::string DeviceName(const TaskId& task, absl::string_view device_type, int device_id);

  // Jobs sorted by name, tasks by index (as tf.train.ClusterSpec writes them).
  tensorflow::ClusterDef ToClusterDef() const;
  // The cluster, this task, protocol = rpc_layer, port from this task's address.
  tensorflow::ServerDef ToServerDef() const;

 private:
  ClusterSpec() = default;

  JobMap jobs_;
  TaskId task_;
  std::string task_address_;
  std::string rpc_layer_;
  TaskId chief_;
  bool rendezvous_ = false;
};

// Parses a "cluster" JSON object: job -> list of addresses, or job -> object
// of index (decimal string) -> address. Checks the JSON shape only; Create
// checks the rest. `field` names the source in errors.
absl::StatusOr<ClusterSpec::JobMap> ParseClusterJson(const JsonValue& cluster,
                                                     absl::string_view field);

// Reads a TF_CONFIG JSON document.
absl::StatusOr<ClusterSpec> ClusterSpecFromTfConfig(absl::string_view tf_config);

// Reads the TF_CONFIG environment variable; InvalidArgument if unset or empty.
absl::StatusOr<ClusterSpec> ClusterSpecFromEnvironment();

// From the values of --cluster_spec (the "cluster" JSON), --task_type and
// --task_index (a decimal string). A binary defines the flags with absl and
// passes their values here.
absl::StatusOr<ClusterSpec> ClusterSpecFromFlags(absl::string_view cluster_spec,
                                                 absl::string_view task_type,
                                                 absl::string_view task_index);

}  // namespace strata

#endif  // STRATA_STRATEGY_CLUSTER_RESOLVER_H_
