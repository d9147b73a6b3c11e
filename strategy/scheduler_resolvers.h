// Which cluster this process belongs to, from whatever started it: flags,
// TF_CONFIG (also as Kubeflow's TFJob sets it), a torchrun-style launcher
// (PyTorchJob, the Kubeflow Trainer's PET_* variables), Open MPI's mpirun,
// or Slurm's srun. One call, the same trainer binary under each, no
// wrapper:
//
//   ResolverOptions o;                 // resolver "auto"
//   absl::StatusOr<ResolvedCluster> r = ResolveCluster(o, ProcessEnvironment());
//   r->spec;                           // the ClusterSpec, as from TF_CONFIG
//   r->Describe();                     // "Slurm (SLURM_PROCID=1 ...): worker 1 of 2 at n1:8889"
//
// "auto" takes the first of these whose variables are present (the order a
// job nests them in: an explicit setting beats a launcher, which beats the
// allocation it runs in):
//   1. flags       --cluster_spec, --task_type, --task_index (any of them)
//   2. tf_config   TF_CONFIG (resolver "kubeflow_tfjob" when its
//                  "environment" is "cloud", as Kubeflow's TFJob writes it:
//                  the task then listens on every interface at its port, as
//                  TensorFlow does, since a pod's own service name may not
//                  resolve until the pod is ready)
//   3. torchrun    MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (torchrun,
//                  PyTorchJob), or PET_MASTER_ADDR, PET_MASTER_PORT,
//                  PET_NNODES and PET_NODE_RANK (the Kubeflow Trainer; rank
//                  = node rank x PET_NPROC_PER_NODE + LOCAL_RANK). Rank 0 is
//                  the chief and hosts the coordination service at
//                  MASTER_ADDR:MASTER_PORT (MASTER_PORT + 1 when
//                  TORCHELASTIC_USE_AGENT_STORE=True says torchrun's agent
//                  holds MASTER_PORT); the others find it there and tell it
//                  where they are (ClusterSpec::CreateRendezvous).
//   4. mpi         OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI's
//                  mpirun): every rank takes a free port on its host and the
//                  ranks exchange "host:port" through PMIx, the process
//                  management interface mpirun runs (no MPI library is
//                  loaded); with MASTER_ADDR and MASTER_PORT set as well,
//                  rank 0 is found there instead, as for torchrun.
//   5. slurm       SLURM_PROCID and SLURM_STEP_NUM_TASKS (srun): TensorFlow's
//                  SlurmClusterResolver rules: the step's nodes from
//                  SLURM_STEP_NODELIST ("n[1-2],m5"), its tasks per node from
//                  SLURM_STEP_TASKS_PER_NODE ("2(x3),1"), tasks placed on
//                  the nodes in order, task k of a node listening at port
//                  base (--slurm_port_base, 8888) + k; where the node's
//                  CUDA_VISIBLE_DEVICES lists GPUs for all its tasks
//                  (SLURM_GPUS_PER_TASK unset), each task takes its equal
//                  share.
// Every task is /job:worker/task:<rank> of a cluster of workers; rank 0 is
// the chief. A forced resolver (--cluster_resolver=slurm, ...) fails where
// its variables are missing, and also where another scheduler's variables
// give this process another rank or cluster size.
//
// Bad input fails at once with InvalidArgument naming the variables: a
// missing or non-numeric one, rank >= size, a nodelist that does not
// expand, tasks per node that do not add up to the step's tasks, a
// SLURM_LOCALID that is not the task's place on its node, two schedulers
// that disagree. Never a hang: the PMIx exchange is bounded by its
// timeout.
//
// Thread-safety: ResolveCluster may run on any thread; the PMIx exchange is
// made once per process.
#ifndef STRATA_STRATEGY_SCHEDULER_RESOLVERS_H_
#define STRATA_STRATEGY_SCHEDULER_RESOLVERS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "strategy/cluster_resolver.h"

namespace strata {

// Reads one environment variable; nullopt when unset. A seam for tests.
using Environment = std::function<std::optional<std::string>(absl::string_view name)>;
// This process's environment (getenv).
Environment ProcessEnvironment();
// A fixed environment.
Environment MapEnvironment(std::map<std::string, std::string> variables);

// Every rank contributes one string and receives every rank's, in rank
// order (an all-gather through the launcher's process manager). A seam for
// tests; the MPI resolver's default is PMIx's (PmixAllGather).
using AllGatherFn =
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& mine)>;

// The all-gather of the processes mpirun (or srun --mpi=pmix) started,
// through PMIx: libpmix.so.2 is loaded at run time (a binary runs where it
// is absent and fails here naming it). `timeout` bounds the exchange.
absl::StatusOr<std::vector<std::string>> PmixAllGather(const std::string& mine,
                                                       absl::Duration timeout);

struct ResolverOptions {
  // "auto", "flags", "tf_config", "torchrun", "mpi" or "slurm".
  std::string resolver = "auto";
  // --cluster_spec, --task_type, --task_index.
  std::string cluster_spec;
  std::string task_type;
  std::string task_index;
  // Slurm: task k of a node listens at slurm_port_base + k.
  int slurm_port_base = 8888;
  // MPI: the exchange of addresses (default: PmixAllGather with
  // exchange_timeout).
  AllGatherFn all_gather;
  absl::Duration exchange_timeout = absl::Seconds(120);
  // MPI: picks a free port on a host (default: binds port 0 there and
  // releases it). A seam for tests.
  std::function<absl::StatusOr<int>(const std::string& host)> free_port;
};

struct ResolvedCluster {
  ClusterSpec spec;
  // Which resolver: "flags", "tf_config", "kubeflow_tfjob", "torchrun",
  // "mpi" or "slurm".
  std::string resolver;
  // Why it: "SLURM_PROCID=1 and SLURM_STEP_NUM_TASKS=2 are set".
  std::string reason;
  // The task's gRPC server listens on every interface at its port (TFJob).
  bool listen_on_all_interfaces = false;
  // Slurm: this task's share of the node's GPUs ("2,3"), to be set as
  // CUDA_VISIBLE_DEVICES before any GPU is touched; nullopt: leave it.
  std::optional<std::string> cuda_visible_devices;

  // One line for the log: resolver, reason, this task and where it listens.
  std::string Describe() const;
};

// The names --cluster_resolver accepts.
const std::vector<std::string>& ClusterResolverNames();

absl::StatusOr<ResolvedCluster> ResolveCluster(const ResolverOptions& options,
                                               const Environment& env);

}  // namespace strata

#endif  // STRATA_STRATEGY_SCHEDULER_RESOLVERS_H_
