#include "strategy/scheduler_resolvers.h"

#include <netdb.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ip_address.h"
#include "base/json.h"
#include "base/status.h"
#include "strategy/slurm_hostlist.h"

namespace strata {
namespace {

bool Has(const Environment& env, absl::string_view name) {
  std::optional<std::string> v = env(name);
  return v.has_value() && !v->empty();
}

std::string Value(const Environment& env, absl::string_view name) { return env(name).value_or(""); }

// "NAME=value" for messages.
std::string Show(const Environment& env, absl::string_view name) {
  std::optional<std::string> v = env(name);
  return v.has_value() ? absl::StrCat(name, "=", *v) : absl::StrCat(name, " (unset)");
}

// A decimal variable in [lo, hi]; InvalidArgument naming it otherwise.
absl::StatusOr<int> IntVar(const Environment& env, absl::string_view name, int lo, int hi) {
  std::optional<std::string> v = env(name);
  if (!v.has_value() || v->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set"));
  }
  bool digits = v->size() <= 9;
  for (char c : *v) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
  int out = 0;
  if (!digits || !absl::SimpleAtoi(*v, &out) || out < lo || out > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=\"", *v, "\" is not an integer in [", lo, ", ", hi, "]"));
  }
  return out;
}

// "host:port", bracketing an IPv6 literal.
std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

// A rank and a cluster size some scheduler's variables give this process.
struct Claim {
  std::string source;  // "torchrun", "mpi", "slurm"
  std::string vars;    // "RANK=1, WORLD_SIZE=2"
  int rank = 0;
  int size = 0;
};

absl::StatusOr<Claim> TorchrunClaim(const Environment& env) {
  Claim c;
  c.source = "torchrun";
  if (Has(env, "RANK") || Has(env, "WORLD_SIZE") || !Has(env, "PET_NNODES")) {
    STRATA_ASSIGN_OR_RETURN(c.size, IntVar(env, "WORLD_SIZE", 1, kMaxRendezvousWorkers));
    STRATA_ASSIGN_OR_RETURN(c.rank, IntVar(env, "RANK", 0, kMaxRendezvousWorkers));
    c.vars = absl::StrCat(Show(env, "RANK"), ", ", Show(env, "WORLD_SIZE"));
  } else {
    // The Kubeflow Trainer's torchrun arguments, for a binary started without
    // torchrun: one process per node unless LOCAL_RANK says which.
    STRATA_ASSIGN_OR_RETURN(int nodes, IntVar(env, "PET_NNODES", 1, kMaxRendezvousWorkers));
    STRATA_ASSIGN_OR_RETURN(int node, IntVar(env, "PET_NODE_RANK", 0, kMaxRendezvousWorkers));
    int per_node = 1;
    if (Has(env, "PET_NPROC_PER_NODE")) {
      STRATA_ASSIGN_OR_RETURN(per_node, IntVar(env, "PET_NPROC_PER_NODE", 1, 4096));
    }
    int local = 0;
    if (Has(env, "LOCAL_RANK")) {
      STRATA_ASSIGN_OR_RETURN(local, IntVar(env, "LOCAL_RANK", 0, 4095));
    } else if (per_node > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          Show(env, "PET_NPROC_PER_NODE"),
          " asks for several processes per node, but LOCAL_RANK is not set to say which this "
          "is (start them with torchrun, or one process per node)"));
    }
    if (local >= per_node) {
      return absl::InvalidArgumentError(
          absl::StrCat(Show(env, "LOCAL_RANK"), " is not below ", Show(env, "PET_NPROC_PER_NODE")));
    }
    if (static_cast<int64_t>(nodes) * per_node > kMaxRendezvousWorkers) {
      return absl::InvalidArgumentError(
          absl::StrCat(Show(env, "PET_NNODES"), " x ", Show(env, "PET_NPROC_PER_NODE"),
                       " is more than ", kMaxRendezvousWorkers, " tasks"));
    }
    c.size = nodes * per_node;
    c.rank = node * per_node + local;
    c.vars = absl::StrCat(Show(env, "PET_NODE_RANK"), ", ", Show(env, "PET_NNODES"), ", ",
                          Show(env, "PET_NPROC_PER_NODE"), ", ", Show(env, "LOCAL_RANK"));
  }
  if (c.rank >= c.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.vars, ": rank ", c.rank, " is not below the cluster size ", c.size));
  }
  return c;
}

// A rank and size given by two variables, the rank below the size.
absl::StatusOr<Claim> RankAndSize(const Environment& env, const char* source, const char* rank_var,
                                  const char* size_var) {
  Claim c;
  c.source = source;
  STRATA_ASSIGN_OR_RETURN(c.size, IntVar(env, size_var, 1, kMaxRendezvousWorkers));
  STRATA_ASSIGN_OR_RETURN(c.rank, IntVar(env, rank_var, 0, kMaxRendezvousWorkers));
  c.vars = absl::StrCat(Show(env, rank_var), ", ", Show(env, size_var));
  if (c.rank >= c.size) {
    return absl::InvalidArgumentError(absl::StrCat(c.vars, ": the rank is not below the size"));
  }
  return c;
}

absl::StatusOr<Claim> MpiClaim(const Environment& env) {
  return RankAndSize(env, "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
}

absl::StatusOr<Claim> SlurmClaim(const Environment& env) {
  return RankAndSize(env, "slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
}

bool TorchrunPresent(const Environment& env) {
  return (Has(env, "MASTER_ADDR") && Has(env, "MASTER_PORT") && Has(env, "RANK") &&
          Has(env, "WORLD_SIZE")) ||
         (Has(env, "PET_MASTER_ADDR") && Has(env, "PET_MASTER_PORT") && Has(env, "PET_NNODES") &&
          Has(env, "PET_NODE_RANK"));
}
bool MpiPresent(const Environment& env) {
  return Has(env, "OMPI_COMM_WORLD_RANK") && Has(env, "OMPI_COMM_WORLD_SIZE");
}
bool SlurmPresent(const Environment& env) {
  return Has(env, "SLURM_PROCID") && Has(env, "SLURM_STEP_NUM_TASKS");
}

// "MASTER_ADDR:MASTER_PORT" (or the PET_ forms); `rank_source_prefix` says
// which pair. With torchrun's agent on MASTER_PORT, the port above it.
absl::StatusOr<std::string> MasterAddress(const Environment& env, bool pet, std::string* note) {
  const std::string addr_var = pet ? "PET_MASTER_ADDR" : "MASTER_ADDR";
  const std::string port_var = pet ? "PET_MASTER_PORT" : "MASTER_PORT";
  const std::string host = Value(env, addr_var);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat(addr_var, " is not set"));
  STRATA_ASSIGN_OR_RETURN(int port, IntVar(env, port_var, 1, 65535));
  if (Value(env, "TORCHELASTIC_USE_AGENT_STORE") == "True") {
    if (port == 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          Show(env, port_var),
          ": torchrun's agent holds that port (TORCHELASTIC_USE_AGENT_STORE=True) and there is "
          "no port above it for the chief"));
    }
    ++port;
    *note = absl::StrCat("; torchrun's agent holds ", port_var, ", so the chief listens at ",
                         port_var, " + 1");
  }
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  return JoinHostPort(h, port);
}

absl::StatusOr<ResolvedCluster> FromFlags(const ResolverOptions& o) {
  STRATA_ASSIGN_OR_RETURN(ClusterSpec spec,
                          ClusterSpecFromFlags(o.cluster_spec, o.task_type, o.task_index));
  ResolvedCluster r{spec};
  r.resolver = "flags";
  r.reason = "--cluster_spec/--task_type/--task_index are given";
  return r;
}

absl::StatusOr<ResolvedCluster> FromTfConfig(const Environment& env) {
  const std::string tf_config = Value(env, "TF_CONFIG");
  if (tf_config.empty()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG is not set: multi-worker training needs the cluster (see docs/cluster.md)");
  }
  STRATA_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpecFromTfConfig(tf_config));
  ResolvedCluster r{spec};
  r.resolver = "tf_config";
  r.reason = "TF_CONFIG is set";
  // ClusterSpecFromTfConfig parsed it already; the document is well formed.
  absl::StatusOr<JsonValue> root = ParseJson(tf_config);
  const JsonValue* environment = root.ok() ? root->Find("environment") : nullptr;
  if (environment != nullptr && environment->is_string() && environment->string() == "cloud") {
    r.resolver = "kubeflow_tfjob";
    r.reason = "TF_CONFIG is set with \"environment\": \"cloud\" (Kubeflow's TFJob)";
    r.listen_on_all_interfaces = true;
  }
  return r;
}

absl::StatusOr<ResolvedCluster> FromTorchrun(const Environment& env) {
  const bool pet = !(Has(env, "MASTER_ADDR") || Has(env, "RANK") || Has(env, "WORLD_SIZE")) &&
                   Has(env, "PET_MASTER_ADDR");
  STRATA_ASSIGN_OR_RETURN(Claim claim, TorchrunClaim(env));
  std::string note;
  STRATA_ASSIGN_OR_RETURN(std::string master, MasterAddress(env, pet, &note));
  const std::string source =
      absl::StrCat(claim.vars, ", ", Show(env, pet ? "PET_MASTER_ADDR" : "MASTER_ADDR"), ", ",
                   Show(env, pet ? "PET_MASTER_PORT" : "MASTER_PORT"));
  STRATA_ASSIGN_OR_RETURN(ClusterSpec spec,
                          ClusterSpec::CreateRendezvous(claim.size, claim.rank, master, source));
  ResolvedCluster r{spec};
  r.resolver = "torchrun";
  r.reason = absl::StrCat(source, " are set", note);
  return r;
}

absl::StatusOr<int> BindFreePort(const std::string& host) {
  // The host's addresses (it may be a name), each tried in turn.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "0", &hints, &res); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("host \"", host, "\" does not resolve: ", gai_strerror(rc)));
  }
  absl::StatusOr<int> out = absl::UnavailableError(absl::StrCat("no free port on \"", host, "\""));
  for (addrinfo* a = res; a != nullptr && !out.ok(); a = a->ai_next) {
    char numeric[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, numeric, sizeof(numeric), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
      continue;
    }
    absl::StatusOr<std::vector<int>> port = PickFreePorts(numeric, 1);
    if (port.ok()) out = (*port)[0];
  }
  freeaddrinfo(res);
  return out;
}

absl::StatusOr<ResolvedCluster> FromMpi(const Environment& env, const ResolverOptions& o) {
  STRATA_ASSIGN_OR_RETURN(Claim claim, MpiClaim(env));
  if (Has(env, "MASTER_ADDR") && Has(env, "MASTER_PORT")) {
    std::string note;
    STRATA_ASSIGN_OR_RETURN(std::string master, MasterAddress(env, /*pet=*/false, &note));
    const std::string source =
        absl::StrCat(claim.vars, ", ", Show(env, "MASTER_ADDR"), ", ", Show(env, "MASTER_PORT"));
    STRATA_ASSIGN_OR_RETURN(ClusterSpec spec,
                            ClusterSpec::CreateRendezvous(claim.size, claim.rank, master, source));
    ResolvedCluster r{spec};
    r.resolver = "mpi";
    r.reason = absl::StrCat(source, " are set (rank 0 found at MASTER_ADDR:MASTER_PORT)", note);
    return r;
  }
  // Every rank on one node (mpirun -np N on this machine): loopback.
  // Otherwise the node's name as the process manager knows it.
  std::string host;
  if (Has(env, "OMPI_COMM_WORLD_LOCAL_SIZE") &&
      Value(env, "OMPI_COMM_WORLD_LOCAL_SIZE") == Value(env, "OMPI_COMM_WORLD_SIZE")) {
    host = "127.0.0.1";
  } else if (Has(env, "PMIX_HOSTNAME")) {
    host = Value(env, "PMIX_HOSTNAME");
  } else {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
      return absl::InternalError("mpi: gethostname failed and PMIX_HOSTNAME is not set");
    }
    host = name;
  }
  auto free_port = o.free_port ? o.free_port : BindFreePort;
  absl::StatusOr<int> port = free_port(host);
  if (!port.ok()) return AnnotateStatus(port.status(), "mpi: this rank's port: ");
  const std::string mine = JoinHostPort(host, *port);
  absl::StatusOr<std::vector<std::string>> all =
      o.all_gather ? o.all_gather(mine) : PmixAllGather(mine, o.exchange_timeout);
  if (!all.ok()) {
    return AnnotateStatus(all.status(),
                          absl::StrCat("mpi (", claim.vars, "): exchanging addresses: "));
  }
  if (static_cast<int>(all->size()) != claim.size || (*all)[claim.rank] != mine) {
    return absl::InvalidArgumentError(
        absl::StrCat("mpi: the address exchange returned ", all->size(), " addresses (",
                     absl::StrJoin(*all, ", "), ") where ", claim.vars, " expect ", claim.size,
                     " with this rank's ", mine, " at ", claim.rank));
  }
  ClusterSpec::JobMap jobs;
  for (int i = 0; i < claim.size; ++i) jobs[kWorkerJob][i] = (*all)[i];
  STRATA_ASSIGN_OR_RETURN(
      ClusterSpec spec,
      ClusterSpec::Create(std::move(jobs), TaskId{kWorkerJob, claim.rank}, "grpc", "mpi"));
  ResolvedCluster r{spec};
  r.resolver = "mpi";
  r.reason = absl::StrCat(claim.vars, " are set (addresses exchanged through PMIx)");
  return r;
}

// This task's share of the node's GPUs, where CUDA_VISIBLE_DEVICES lists
// them for every task of the node.
std::optional<std::string> SlurmGpuShare(const Environment& env, int local, int local_tasks) {
  if (local_tasks <= 1 || !Has(env, "CUDA_VISIBLE_DEVICES") || Has(env, "SLURM_GPUS_PER_TASK")) {
    return std::nullopt;
  }
  std::vector<std::string> gpus = absl::StrSplit(Value(env, "CUDA_VISIBLE_DEVICES"), ',');
  const int n = static_cast<int>(gpus.size());
  if (n < local_tasks || n % local_tasks != 0) return std::nullopt;
  const int each = n / local_tasks;
  std::vector<std::string> mine(gpus.begin() + local * each, gpus.begin() + (local + 1) * each);
  return absl::StrJoin(mine, ",");
}

absl::StatusOr<ResolvedCluster> FromSlurm(const Environment& env, const ResolverOptions& o) {
  STRATA_ASSIGN_OR_RETURN(Claim claim, SlurmClaim(env));
  const std::string nodelist_var = "SLURM_STEP_NODELIST";
  const std::string per_node_var = "SLURM_STEP_TASKS_PER_NODE";
  if (!Has(env, nodelist_var) || !Has(env, per_node_var)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slurm: ", Show(env, nodelist_var), " and ", Show(env, per_node_var),
                     " must both be set (srun sets them for every task of a step)"));
  }
  absl::StatusOr<std::vector<std::string>> nodes = ExpandHostlist(Value(env, nodelist_var));
  if (!nodes.ok()) return AnnotateStatus(nodes.status(), absl::StrCat(nodelist_var, ": "));
  absl::StatusOr<std::vector<int>> per_node = ExpandTasksPerNode(Value(env, per_node_var));
  if (!per_node.ok()) return AnnotateStatus(per_node.status(), absl::StrCat(per_node_var, ": "));
  if (nodes->size() != per_node->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slurm: ", Show(env, nodelist_var), " names ", nodes->size(), " nodes but ",
                     Show(env, per_node_var), " gives task counts for ", per_node->size()));
  }
  int64_t total = 0;
  for (int t : *per_node) total += t;
  if (total != claim.size) {
    return absl::InvalidArgumentError(absl::StrCat("slurm: ", Show(env, per_node_var),
                                                   " adds up to ", total, " tasks, ", claim.vars));
  }
  if (o.slurm_port_base < 1 || o.slurm_port_base > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm_port_base=", o.slurm_port_base, " is not a port"));
  }
  ClusterSpec::JobMap jobs;
  int rank = 0, my_local = -1, my_local_tasks = 0;
  for (size_t n = 0; n < nodes->size(); ++n) {
    for (int k = 0; k < (*per_node)[n]; ++k, ++rank) {
      if (o.slurm_port_base + k > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("slurm: node ", (*nodes)[n], " runs ", (*per_node)[n],
                         " tasks, more than ports above --slurm_port_base=", o.slurm_port_base));
      }
      jobs[kWorkerJob][rank] = JoinHostPort((*nodes)[n], o.slurm_port_base + k);
      if (rank == claim.rank) {
        my_local = k;
        my_local_tasks = (*per_node)[n];
      }
    }
  }
  if (Has(env, "SLURM_LOCALID")) {
    STRATA_ASSIGN_OR_RETURN(int localid, IntVar(env, "SLURM_LOCALID", 0, kMaxRendezvousWorkers));
    if (localid != my_local) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slurm: ", Show(env, "SLURM_LOCALID"), " but ", claim.vars, " with ",
          Show(env, per_node_var), " make this task number ", my_local,
          " of its node (tasks must be placed on the nodes in order, srun's default block "
          "distribution)"));
    }
  }
  STRATA_ASSIGN_OR_RETURN(
      ClusterSpec spec,
      ClusterSpec::Create(std::move(jobs), TaskId{kWorkerJob, claim.rank}, "grpc", nodelist_var));
  ResolvedCluster r{spec};
  r.resolver = "slurm";
  r.reason = absl::StrCat(claim.vars, " are set (srun)");
  r.cuda_visible_devices = SlurmGpuShare(env, my_local, my_local_tasks);
  return r;
}

// A forced resolver must agree with every other scheduler's view of this
// process.
absl::Status CheckAgreement(const ResolvedCluster& r, const Environment& env) {
  std::vector<absl::StatusOr<Claim>> claims;
  if (r.resolver != "torchrun" && TorchrunPresent(env)) claims.push_back(TorchrunClaim(env));
  if (r.resolver != "mpi" && MpiPresent(env)) claims.push_back(MpiClaim(env));
  if (r.resolver != "slurm" && SlurmPresent(env)) claims.push_back(SlurmClaim(env));
  const int rank = r.spec.worker_id();
  const int size = r.spec.num_workers();
  for (const absl::StatusOr<Claim>& c : claims) {
    if (!c.ok()) continue;  // unreadable: not a competing view
    if (c->rank != rank || c->size != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cluster_resolver=", r.resolver, " (", r.reason, ") makes this task rank ",
                       rank, " of ", size, ", but ", c->vars, " (", c->source, ") say rank ",
                       c->rank, " of ", c->size, "; unset one or pick the other resolver"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedCluster> Resolve(const std::string& name, const ResolverOptions& o,
                                        const Environment& env) {
  if (name == "flags") return FromFlags(o);
  if (name == "tf_config") return FromTfConfig(env);
  if (name == "torchrun") {
    if (!TorchrunPresent(env)) {
      return absl::InvalidArgumentError(
          "--cluster_resolver=torchrun: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (or "
          "PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES and PET_NODE_RANK) must be set");
    }
    return FromTorchrun(env);
  }
  if (name == "mpi") return FromMpi(env, o);
  if (name == "slurm") return FromSlurm(env, o);
  return absl::InvalidArgumentError(absl::StrCat("--cluster_resolver=", name,
                                                 ": unknown; expected ",
                                                 absl::StrJoin(ClusterResolverNames(), ", ")));
}

}  // namespace

Environment ProcessEnvironment() {
  return [](absl::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Environment MapEnvironment(std::map<std::string, std::string> variables) {
  return [vars = std::move(variables)](absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const std::vector<std::string>& ClusterResolverNames() {
  static const auto* names =
      new std::vector<std::string>{"auto", "flags", "tf_config", "torchrun", "mpi", "slurm"};
  return *names;
}

std::string ResolvedCluster::Describe() const {
  const std::string where =
      spec.task_address().empty() ? "an address it finds at start-up" : spec.task_address();
  return absl::StrCat("cluster from ", resolver, " (", reason, "): ", spec.TaskPrefix(), ", rank ",
                      spec.worker_id(), " of ", spec.num_workers(), ", listening at ", where,
                      listen_on_all_interfaces ? " (every interface)" : "",
                      cuda_visible_devices.has_value()
                          ? absl::StrCat(", CUDA_VISIBLE_DEVICES=", *cuda_visible_devices)
                          : "");
}

absl::StatusOr<ResolvedCluster> ResolveCluster(const ResolverOptions& o, const Environment& env) {
  if (o.resolver != "auto") {
    STRATA_ASSIGN_OR_RETURN(ResolvedCluster r, Resolve(o.resolver, o, env));
    STRATA_RETURN_IF_ERROR(CheckAgreement(r, env));
    return r;
  }
  if (!o.cluster_spec.empty() || !o.task_type.empty() || !o.task_index.empty()) {
    return FromFlags(o);
  }
  if (Has(env, "TF_CONFIG")) return FromTfConfig(env);
  if (TorchrunPresent(env)) return FromTorchrun(env);
  if (MpiPresent(env)) return FromMpi(env, o);
  if (SlurmPresent(env)) return FromSlurm(env, o);
  return absl::InvalidArgumentError(
      "TF_CONFIG is not set, nor are --cluster_spec/--task_type/--task_index or a "
      "launcher's variables: multi-worker training needs the cluster from one of them (torchrun's "
      "MASTER_ADDR, "
      "MASTER_PORT, RANK and WORLD_SIZE; mpirun's OMPI_COMM_WORLD_RANK; srun's SLURM_PROCID); "
      "see docs/cluster.md");
}

}  // namespace strata
