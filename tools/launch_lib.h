// The launcher behind `tools/launch` (docs/cluster.md): starts one process
// per task of a cluster on this machine, each with TF_CONFIG naming free
// loopback ports, as torchrun or TensorFlow's multi-process runner do; or,
// with nnodes > 1, this node's share of a cluster across nodes, one
// launcher per node meeting at a rendezvous endpoint (torchrun's
// --nnodes/--node_rank/--rdzv_endpoint); restarting every task when one
// fails (--max_restarts).
//
//   LaunchOptions o;
//   o.num_workers = 2;
//   o.command = {"bazel-bin/tools/trainer", "--strategy=multi_worker_mirrored"};
//   if (absl::Status s = ValidateLaunchOptions(o); !s.ok()) { ... }
//   return RunCluster(o);   // the launcher's exit status
//
// RunCluster gives every child TF_CONFIG (exactly TensorFlow's format) and
// STRATA_TASK=worker:i, copies each child's stdout and stderr line by line to
// the launcher's with a "[worker:i] " prefix (whole lines only, so tasks never
// interleave mid-line), forwards SIGINT and SIGTERM to the children, and when
// a child fails stops the others (SIGTERM, then SIGKILL after the grace
// period) and names the failed task. Each child runs in its own process group
// (signals reach the whole group, e.g. a shell script's children) and gets
// SIGKILL if the launcher dies (PR_SET_PDEATHSIG).
//
// Thread-safety: RunCluster installs process-wide signal handlers and reaps
// its children; call it from one thread, once at a time, in a process that
// does not otherwise handle SIGINT, SIGTERM, SIGCHLD or SIGPIPE. Children
// receive PR_SET_PDEATHSIG when the thread that called RunCluster exits.
// The helpers above it are pure functions, safe anywhere.
#ifndef STRATA_TOOLS_LAUNCH_LIB_H_
#define STRATA_TOOLS_LAUNCH_LIB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/ip_address.h"
#include "strategy/cluster_resolver.h"

namespace strata {

struct LaunchOptions {
  int num_workers = 0;
  int num_chiefs = 0;  // 0 or 1: a "chief" job of one task besides the workers
  // A "ps" job of this many tasks, after the workers: a parameter-server
  // cluster (needs the chief, its coordinator). There a worker that fails
  // does not stop the others (its steps run elsewhere); it is started
  // again, alone, up to max_worker_restarts times; the launcher's exit
  // status is the chief's.
  int num_ps = 0;
  int max_worker_restarts = 0;
  // A numeric IPv4 or IPv6 address every task listens on.
  std::string host = "127.0.0.1";
  // How long stopped children get between SIGTERM and SIGKILL.
  absl::Duration grace_period = absl::Seconds(5);
  // Seconds after launch at which each task starts, in task order (chief
  // first, then workers by index); empty: all at once.
  std::vector<double> start_delays;
  // If set, the tasks start in an order and with delays (up to
  // kMaxRandomStartGap apart) drawn from this seed.
  std::optional<uint64_t> random_start_seed;
  // The program (a path, or a name looked up in PATH) and its arguments.
  std::vector<std::string> command;
  // Across nodes, as torchrun's static rendezvous: `nnodes` launchers, one
  // per node, each starting num_workers tasks (no chief job); this one is
  // node `node_rank`. Its task i is rank node_rank * num_workers + i of
  // nnodes * num_workers, given MASTER_ADDR and MASTER_PORT (the rendezvous
  // endpoint: rank 0, on node 0, hosts the coordination service there),
  // RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK, which
  // the trainer reads (strategy/scheduler_resolvers.h, "torchrun").
  int nnodes = 1;
  int node_rank = 0;
  std::string rdzv_host;  // with nnodes > 1 (or set for one node too)
  int rdzv_port = 0;
  // When a task fails, every task of this node is stopped and all of them
  // start again, up to this many times; the program resumes from its
  // newest checkpoint. Each launcher of a multi-node job restarts its own
  // tasks: a failed task fails the whole cluster, so every node restarts.
  // Restart r's rendezvous port is rdzv_port + r, so that tasks of a new
  // round never reach a chief of the old one still shutting down.
  int max_restarts = 0;
  // Elastic (--nnodes=MIN:MAX): when min_nodes > 0, nnodes is the most
  // nodes and node ranks come from a rendezvous in rounds (tools/
  // rendezvous.h) at the endpoint, whose launcher hosts it: a round starts
  // with every node there, or with at least min_nodes once rdzv_last_call
  // passed (a node lost for good is dropped, the survivors go on from the
  // newest checkpoint); a node that comes back joins the next round.
  // Restart r's tasks meet at rdzv_port + 1 + round.
  int min_nodes = 0;
  absl::Duration rdzv_last_call = absl::Seconds(10);
  absl::Duration rdzv_timeout = absl::Minutes(5);
};

// The longest gap between two starts under random_start_seed.
inline constexpr double kMaxRandomStartGap = 0.2;

// InvalidArgument naming the flag: num_workers < 1, num_chiefs not 0 or 1,
// a host that is not a numeric IP address, nnodes < 1, node_rank out of
// range, several nodes without a rendezvous endpoint or with a chief job,
// a bad rendezvous port or too many restarts for the ports above it,
// max_restarts < 0, a negative grace period, a
// start_delays list of the wrong length or with a negative entry, both
// start_delays and random_start_seed, or an empty command.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// "0,0.5,1" -> {0, 0.5, 1} seconds; InvalidArgument naming --start_delays.
absl::StatusOr<std::vector<double>> ParseStartDelays(absl::string_view text);

// The tasks' ports come from PickFreePorts (base/ip_address.h); a process
// may take one before its task binds it: that task then fails to start and
// the launcher reports it.

// "127.0.0.1:2222", or "[::1]:2222" for an IPv6 host.
std::string FormatAddress(absl::string_view host, int port);

// One process the launcher starts.
struct LaunchTask {
  TaskId id;
  std::string name;       // "worker:1" (STRATA_TASK and the output prefix)
  std::string tf_config;  // the whole TF_CONFIG JSON; empty across nodes
  double start_delay = 0;  // seconds after launch
  // Across nodes: the torchrun-style variables ("RANK=3", ...).
  std::vector<std::string> env;
  std::string address;  // where it listens, for the log ("" across nodes)
};

// The tasks, in task order (chief first): the cluster over `ports` (one per
// task, same order) and each task's start delay.
std::vector<LaunchTask> PlanTasks(const LaunchOptions& options, const std::vector<int>& ports);

// Across nodes (options.nnodes > 1): this node's tasks for restart
// `round`, each with its torchrun-style variables.
std::vector<LaunchTask> PlanNodeTasks(const LaunchOptions& options, int round);

// Elastic: this node's tasks in a round the rendezvous formed.
std::vector<LaunchTask> PlanElasticTasks(const LaunchOptions& options, int round, int node_rank,
                                         int world_size, int first_rank);

// "4" -> {0, 4}; "2:4" -> {2, 4} (min nodes, max nodes); InvalidArgument
// naming --nnodes.
absl::Status ParseNnodes(absl::string_view text, int* min_nodes, int* max_nodes);

// "host:port" -> host and port; InvalidArgument naming --rdzv_endpoint.
absl::Status ParseRendezvousEndpoint(absl::string_view text, std::string* host, int* port);

// TF_CONFIG text: {"cluster":{"chief":[...],"worker":[...]},"task":{"type":"worker","index":1}}
// with jobs in `cluster`'s (sorted) order.
std::string TfConfigJson(const ClusterSpec::JobMap& cluster, const TaskId& task);

// The executable `program` names: itself if it contains '/', else the first
// match in PATH. NotFound or PermissionDenied naming the program.
absl::StatusOr<std::string> FindProgram(const std::string& program);

// "exited with status 3", "was killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

// Starts the tasks, relays their output and waits for them (see the top of
// this file), restarting them all up to max_restarts times when one fails
// (every task gets STRATA_RESTART_COUNT, 0 first). Returns the launcher's
// exit status: 0 when every task exited 0; 1 when a task failed or could
// not start past the restarts (the message on stderr names it); 128 + the
// signal when SIGINT or SIGTERM stopped the run. Expects
// ValidateLaunchOptions(options) to be OK.
int RunCluster(const LaunchOptions& options);

}  // namespace strata

#endif  // STRATA_TOOLS_LAUNCH_LIB_H_
