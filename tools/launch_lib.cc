#include "tools/launch_lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/ip_address.h"
#include "runtime/security/job_token.h"
#include "tools/launch_round.h"
#include "tools/rendezvous.h"

extern char** environ;

namespace strata {
namespace {

using launch_internal::RoundEnd;
using launch_internal::RunRound;
using launch_internal::Say;
using launch_internal::SignalScope;

constexpr int kMaxTasks = 1000;
void JsonQuote(absl::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseStartDelays(absl::string_view text) {
  std::vector<double> delays;
  if (absl::StripAsciiWhitespace(text).empty()) return delays;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    double d = 0;
    if (!absl::SimpleAtod(item, &d) || !std::isfinite(d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--start_delays: \"", item, "\" is not a number of seconds >= 0 (e.g. 0,0.5,1)"));
    }
    delays.push_back(d);
  }
  return delays;
}

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.num_workers < 1 || o.num_workers > kMaxTasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_workers must be 1..", kMaxTasks, ", got ", o.num_workers));
  }
  if (o.num_chiefs != 0 && o.num_chiefs != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_chiefs must be 0 or 1, got ", o.num_chiefs));
  }
  if (o.num_ps < 0 || o.num_ps > kMaxTasks) {
    return absl::InvalidArgumentError(absl::StrCat("--num_ps must be 0..", kMaxTasks, ", got ",
                                                   o.num_ps));
  }
  if (o.num_ps > 0 && o.num_chiefs != 1) {
    return absl::InvalidArgumentError(
        "--num_ps: a parameter-server cluster's coordinator is its chief; add --num_chiefs=1");
  }
  if (o.max_worker_restarts < 0 || o.max_worker_restarts > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_worker_restarts must be 0..1000, got ",
                                                   o.max_worker_restarts));
  }
  if (o.max_worker_restarts > 0 && o.num_ps == 0) {
    return absl::InvalidArgumentError(
        "--max_worker_restarts restarts a worker of a parameter-server cluster (--num_ps); "
        "other clusters restart every task (--max_restarts)");
  }
  if (IsUnspecifiedAddress(o.host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host: \"", o.host,
        "\" is the unspecified address (every interface), which tasks cannot dial; give an "
        "address of this machine (e.g. 127.0.0.1)"));
  }
  if (!IsIpAddress(o.host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host: \"", o.host, "\" is not a numeric IPv4 or IPv6 address (e.g. 127.0.0.1 or ::1)"));
  }
  if (o.grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grace_period must not be negative, got ", absl::FormatDuration(o.grace_period)));
  }
  const int tasks = o.num_chiefs + o.num_workers + o.num_ps;
  if (!o.start_delays.empty()) {
    if (o.random_start_seed.has_value()) {
      return absl::InvalidArgumentError(
          "--start_delays and --random_start_order cannot be used together");
    }
    if (static_cast<int>(o.start_delays.size()) != tasks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--start_delays has ", o.start_delays.size(), " entries for ", tasks,
          " tasks (chief first, then workers, then ps tasks)"));
    }
    for (double d : o.start_delays) {
      if (!(d >= 0) || !std::isfinite(d)) {
        return absl::InvalidArgumentError(absl::StrCat("--start_delays: bad delay ", d));
      }
    }
  }
  if (o.command.empty() || o.command[0].empty()) {
    return absl::InvalidArgumentError(
        "missing the program to run after `--` (usage: launch --num_workers=N -- <program> "
        "<args...>)");
  }
  if (o.nnodes < 1 || o.nnodes > kMaxTasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes must be 1..", kMaxTasks, ", got ", o.nnodes));
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node_rank=", o.node_rank,
                                                   " is not in [0, --nnodes=", o.nnodes, ")"));
  }
  if (o.max_restarts < 0 || o.max_restarts > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_restarts must be 0..1000, got ", o.max_restarts));
  }
  if (o.nnodes > 1) {
    if (o.rdzv_host.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", o.nnodes,
          " needs --rdzv_endpoint=HOST:PORT (node 0's address; its rank 0 listens there)"));
    }
    if (o.num_chiefs != 0) {
      return absl::InvalidArgumentError(
          "--num_chiefs: a cluster across nodes has workers only (rank 0 is the chief)");
    }
    if (!o.start_delays.empty() || o.random_start_seed.has_value()) {
      return absl::InvalidArgumentError(
          "--start_delays and --random_start_order are for a one-node cluster");
    }
    if (static_cast<int64_t>(o.nnodes) * o.num_workers > kMaxTasks) {
      return absl::InvalidArgumentError(absl::StrCat("--nnodes x --num_workers is more than ",
                                                     kMaxTasks, " tasks"));
    }
  }
  if (o.min_nodes > 0) {
    if (o.rdzv_host.empty()) {
      return absl::InvalidArgumentError(
          "--nnodes=MIN:MAX needs --rdzv_endpoint=HOST:PORT (the launcher on that host runs the "
          "rendezvous)");
    }
    if (o.min_nodes > o.nnodes) {
      return absl::InvalidArgumentError("--nnodes=MIN:MAX needs MIN <= MAX");
    }
    if (o.node_rank != 0) {
      return absl::InvalidArgumentError(
          "--node_rank: with --nnodes=MIN:MAX the rendezvous gives the node ranks");
    }
    if (o.rdzv_last_call < absl::ZeroDuration() || o.rdzv_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--rdzv_last_call must not be negative and --rdzv_timeout must be positive");
    }
  }
  if (!o.rdzv_host.empty() &&
      (o.rdzv_port < 1 || o.rdzv_port + (o.min_nodes > 0 ? 1 : 0) + o.max_restarts > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint: port ", o.rdzv_port, " (restart r uses port + r, up to --max_restarts=",
        o.max_restarts, ") must stay within 1..65535"));
  }
  return absl::OkStatus();
}

absl::Status ParseRendezvousEndpoint(absl::string_view text, std::string* host, int* port) {
  std::string h;
  absl::string_view p;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_endpoint=", text, ": expected HOST:PORT (IPv6 as [ADDR]:PORT)"));
    }
    h = std::string(text.substr(1, close - 1));
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos ||
        text.substr(0, colon).find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_endpoint=", text, ": expected HOST:PORT (IPv6 as [ADDR]:PORT)"));
    }
    h = std::string(text.substr(0, colon));
    p = text.substr(colon + 1);
  }
  int value = 0;
  if (h.empty() || !absl::SimpleAtoi(p, &value) || value < 1 || value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint=", text, ": expected HOST:PORT with a port in 1..65535"));
  }
  if (IsUnspecifiedAddress(h)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint=", text,
        ": the unspecified address cannot be dialled; give node 0's address"));
  }
  *host = h;
  *port = value;
  return absl::OkStatus();
}

std::string FormatAddress(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string TfConfigJson(const ClusterSpec::JobMap& cluster, const TaskId& task) {
  std::string out = "{\"cluster\":{";
  bool first_job = true;
  for (const auto& [job, tasks] : cluster) {
    if (!first_job) out += ",";
    first_job = false;
    JsonQuote(job, &out);
    out += ":[";
    bool first = true;
    for (const auto& [index, address] : tasks) {
      if (!first) out += ",";
      first = false;
      JsonQuote(address, &out);
    }
    out += "]";
  }
  out += "},\"task\":{\"type\":";
  JsonQuote(task.type, &out);
  absl::StrAppend(&out, ",\"index\":", task.index, "}}");
  return out;
}

std::vector<LaunchTask> PlanTasks(const LaunchOptions& options, const std::vector<int>& ports) {
  std::vector<LaunchTask> tasks;
  for (int i = 0; i < options.num_chiefs; ++i) {
    tasks.push_back({{kChiefJob, i}, "", "", 0, {}, ""});
  }
  for (int i = 0; i < options.num_workers; ++i) {
    tasks.push_back({{kWorkerJob, i}, "", "", 0, {}, ""});
  }
  for (int i = 0; i < options.num_ps; ++i) {
    tasks.push_back({{kPsJob, i}, "", "", 0, {}, ""});
  }
  ClusterSpec::JobMap cluster;
  for (size_t i = 0; i < tasks.size() && i < ports.size(); ++i) {
    cluster[tasks[i].id.type][tasks[i].id.index] = FormatAddress(options.host, ports[i]);
  }
  for (LaunchTask& t : tasks) {
    t.name = absl::StrCat(t.id.type, ":", t.id.index);
    t.tf_config = TfConfigJson(cluster, t.id);
    t.address = cluster[t.id.type][t.id.index];
  }
  if (!options.start_delays.empty()) {
    for (size_t i = 0; i < tasks.size() && i < options.start_delays.size(); ++i) {
      tasks[i].start_delay = options.start_delays[i];
    }
  } else if (options.random_start_seed.has_value()) {
    std::mt19937_64 rng(*options.random_start_seed);
    std::vector<size_t> order(tasks.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::uniform_real_distribution<double> gap(0, kMaxRandomStartGap);
    double t = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      if (k > 0) t += gap(rng);
      tasks[order[k]].start_delay = t;
    }
  }
  return tasks;
}

absl::Status ParseNnodes(absl::string_view text, int* min_nodes, int* max_nodes) {
  const size_t colon = text.find(':');
  int lo = 0, hi = 0;
  const bool ok = colon == absl::string_view::npos
                      ? absl::SimpleAtoi(text, &hi)
                      : absl::SimpleAtoi(text.substr(0, colon), &lo) &&
                            absl::SimpleAtoi(text.substr(colon + 1), &hi) && lo >= 1 && lo <= hi;
  if (!ok || hi < 1 || hi > kMaxTasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes=", text, ": expected N, or MIN:MAX with 1 <= MIN <= MAX <= ", kMaxTasks));
  }
  *min_nodes = colon == absl::string_view::npos ? 0 : lo;
  *max_nodes = hi;
  return absl::OkStatus();
}

std::vector<LaunchTask> PlanElasticTasks(const LaunchOptions& options, int round, int node_rank,
                                         int world_size, int first_rank) {
  std::vector<LaunchTask> tasks;
  const int port = options.rdzv_port + 1 + round;
  for (int i = 0; i < options.num_workers; ++i) {
    const int rank = first_rank + i;
    LaunchTask t;
    t.id = {kWorkerJob, rank};
    t.name = absl::StrCat(kWorkerJob, ":", rank);
    t.env = {absl::StrCat("MASTER_ADDR=", options.rdzv_host),
             absl::StrCat("MASTER_PORT=", port),
             absl::StrCat("RANK=", rank),
             absl::StrCat("WORLD_SIZE=", world_size),
             absl::StrCat("LOCAL_RANK=", i),
             absl::StrCat("LOCAL_WORLD_SIZE=", options.num_workers),
             absl::StrCat("GROUP_RANK=", node_rank)};
    if (rank == 0) t.address = FormatAddress(options.rdzv_host, port);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

std::vector<LaunchTask> PlanNodeTasks(const LaunchOptions& options, int round) {
  std::vector<LaunchTask> tasks;
  const int world = options.nnodes * options.num_workers;
  const std::string master =
      options.rdzv_host.find(':') != std::string::npos ? absl::StrCat("[", options.rdzv_host, "]")
                                                      : options.rdzv_host;
  for (int i = 0; i < options.num_workers; ++i) {
    const int rank = options.node_rank * options.num_workers + i;
    LaunchTask t;
    t.id = {kWorkerJob, rank};
    t.name = absl::StrCat(kWorkerJob, ":", rank);
    t.env = {absl::StrCat("MASTER_ADDR=", options.rdzv_host),
             absl::StrCat("MASTER_PORT=", options.rdzv_port + round),
             absl::StrCat("RANK=", rank),
             absl::StrCat("WORLD_SIZE=", world),
             absl::StrCat("LOCAL_RANK=", i),
             absl::StrCat("LOCAL_WORLD_SIZE=", options.num_workers),
             absl::StrCat("GROUP_RANK=", options.node_rank)};
    if (rank == 0) t.address = absl::StrCat(master, ":", options.rdzv_port + round);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

absl::StatusOr<std::string> FindProgram(const std::string& program) {
  auto check = [](const std::string& path) -> absl::Status {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("program \"", path, "\" not found"));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::PermissionDeniedError(absl::StrCat("program \"", path, "\" is a directory"));
    }
    if (access(path.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat("program \"", path, "\" is not executable"));
    }
    return absl::OkStatus();
  };
  if (program.empty()) return absl::InvalidArgumentError("the program name is empty");
  if (program.find('/') != std::string::npos) {
    absl::Status s = check(program);
    if (!s.ok()) return s;
    return program;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  absl::Status first_denied;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    absl::Status s = check(candidate);
    if (s.ok()) return candidate;
    if (absl::IsPermissionDenied(s) && first_denied.ok()) first_denied = s;
  }
  if (!first_denied.ok()) return first_denied;
  return absl::NotFoundError(absl::StrCat("program \"", program, "\" not found in PATH"));
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")",
                        WCOREDUMP(wait_status) ? " and dumped core" : "");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

namespace {

// Elastic: rounds from the rendezvous (hosted here when this launcher can
// bind the endpoint), each run as RunRound.
int RunElastic(const LaunchOptions& options, const std::string& path) {
  absl::StatusOr<std::optional<JobToken>> token = ResolveJobToken("", /*insecure=*/false);
  if (!token.ok() || !token->has_value()) {
    Say(token.ok() ? "no job token" : std::string(token.status().message()));
    return 1;
  }
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  const std::string node_id = absl::StrCat(hostname, "/", getpid());
  std::unique_ptr<RendezvousServer> server;
  {
    RendezvousServerOptions ro{options.rdzv_host, options.rdzv_port, **token, options.min_nodes,
                               options.nnodes, options.rdzv_last_call, node_id};
    absl::StatusOr<std::unique_ptr<RendezvousServer>> s = RendezvousServer::Start(std::move(ro));
    if (s.ok()) {
      server = *std::move(s);
      Say(absl::StrCat("hosting the rendezvous at ",
                       FormatAddress(options.rdzv_host, options.rdzv_port), " for ",
                       options.min_nodes, " to ", options.nnodes, " nodes"));
    }
  }
  for (int restarts = 0;; ++restarts) {
    absl::StatusOr<RendezvousRound> r =
        JoinRendezvous(options.rdzv_host, options.rdzv_port, **token, node_id, options.num_workers,
                       options.rdzv_timeout);
    if (!r.ok()) {
      if (r.status().code() == absl::StatusCode::kCancelled) {
        Say(absl::StrCat(r.status().message(), "; nothing to do"));
        return 0;
      }
      Say(absl::StrCat("rendezvous: ", r.status().message()));
      return 1;
    }
    Say(absl::StrCat("round ", r->round, ": node ", r->node_rank, " of ", r->nnodes, ", ranks ",
                     r->first_rank, "..", r->first_rank + options.num_workers - 1, " of ",
                     r->world_size));
    const std::vector<LaunchTask> tasks =
        PlanElasticTasks(options, r->round, r->node_rank, r->world_size, r->first_rank);
    const RoundEnd end = RunRound(options, path, tasks, r->round);
    if (!end.task_failed) return end.exit_code;
    if (restarts >= options.max_restarts) {
      Say(absl::StrCat("giving up after ", options.max_restarts, " restart",
                       options.max_restarts == 1 ? "" : "s", " (--max_restarts)"));
      return end.exit_code;
    }
    Say(absl::StrCat("restarting every task (restart ", restarts + 1, " of ", options.max_restarts,
                     "); the next round starts with the nodes that come back"));
  }
}

}  // namespace

int RunCluster(const LaunchOptions& options) {
  absl::StatusOr<std::string> path = FindProgram(options.command[0]);
  if (!path.ok()) {
    Say(path.status().message());
    return 1;
  }
  std::vector<LaunchTask> tasks;
  if (options.nnodes == 1 && options.rdzv_host.empty()) {
    const int num_tasks = options.num_chiefs + options.num_workers + options.num_ps;
    absl::StatusOr<std::vector<int>> ports = PickFreePorts(options.host, num_tasks);
    if (!ports.ok()) {
      Say(ports.status().message());
      return 1;
    }
    tasks = PlanTasks(options, *ports);
  }
  SignalScope signals;
  if (!signals.error().empty()) {
    Say(absl::StrCat("pipe: ", signals.error()));
    return 1;
  }
  if (options.min_nodes > 0) return RunElastic(options, *path);
  for (int round = 0;; ++round) {
    // Across nodes each round meets at its own port (PlanNodeTasks); one
    // node's cluster keeps its ports, free again once its tasks ended.
    if (options.nnodes > 1 || !options.rdzv_host.empty()) tasks = PlanNodeTasks(options, round);
    const RoundEnd end = RunRound(options, *path, tasks, round);
    if (!end.task_failed || round >= options.max_restarts) {
      if (end.task_failed && options.max_restarts > 0) {
        Say(absl::StrCat("giving up after ", options.max_restarts, " restart",
                         options.max_restarts == 1 ? "" : "s", " (--max_restarts)"));
      }
      return end.exit_code;
    }
    Say(absl::StrCat("restarting every task (restart ", round + 1, " of ", options.max_restarts,
                     "); they resume from their newest checkpoint"));
  }
}

}  // namespace strata
