// launch: runs a cluster of local processes, one per task, each with TF_CONFIG
// on free loopback ports, as torchrun or TensorFlow's multi-process runner do
// (tools/launch_lib.h has the details; docs/cluster.md the guide).
//
//   bazel-bin/tools/launch --num_workers=2 -- bazel-bin/tools/trainer --strategy=multi_worker_mirrored
//   bazel-bin/tools/launch --num_workers=3 --num_chiefs=1 --grace_period=10s -- ./my_job --flag
//   bazel-bin/tools/launch --num_workers=4 --random_start_order=7 -- ./my_job
//
// Exit status: 0 when every task exited 0; 1 for bad usage or when a task
// failed or could not start (the message names it); 128 + N when signal N
// (SIGINT, SIGTERM) stopped the run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/security/job_token.h"
#include "tools/launch_lib.h"

ABSL_FLAG(int32_t, num_workers, 0, "worker tasks to start (required, >= 1)");
ABSL_FLAG(int32_t, num_chiefs, 0, "1: also start a chief task (job \"chief\"), first");
ABSL_FLAG(int32_t, num_ps, 0,
          "a parameter-server cluster: also start this many ps tasks (job \"ps\"), last; needs "
          "--num_chiefs=1; a failed worker does not stop the others, and the exit status is the "
          "chief's");
ABSL_FLAG(int32_t, max_worker_restarts, 0,
          "with --num_ps: a failed worker is started again, alone, up to this many times");
ABSL_FLAG(std::string, host, "127.0.0.1", "numeric IP address every task listens on");
ABSL_FLAG(absl::Duration, grace_period, absl::Seconds(5),
          "after asking the tasks to stop (a task failed, or SIGINT/SIGTERM), wait this long "
          "before SIGKILL");
ABSL_FLAG(std::string, start_delays, "",
          "seconds after launch at which each task starts, comma-separated, chief first then "
          "workers by index (e.g. 0,0.5,1)");
ABSL_FLAG(std::string, random_start_order, "",
          "a seed: start the tasks in a random order, up to 0.2 s apart (testing)");
ABSL_FLAG(std::string, nnodes, "1",
          "nodes of the job, one launcher each (as torchrun): this node starts --num_workers "
          "tasks, ranks node_rank * num_workers + i of nnodes * num_workers; MIN:MAX for an "
          "elastic job (ranks from a rendezvous; a node lost for good is dropped after "
          "--rdzv_last_call, one that comes back joins at the next restart)");
ABSL_FLAG(absl::Duration, rdzv_last_call, absl::Seconds(10),
          "elastic: once MIN nodes are there, how long a round waits for more");
ABSL_FLAG(absl::Duration, rdzv_timeout, absl::Minutes(5),
          "elastic: how long a launcher tries to reach the rendezvous");
ABSL_FLAG(int32_t, node_rank, 0, "this node's index among the --nnodes");
ABSL_FLAG(std::string, rdzv_endpoint, "",
          "HOST:PORT of node 0, where rank 0 hosts the coordination service (needed with "
          "--nnodes > 1); the tasks get MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK");
ABSL_FLAG(int32_t, max_restarts, 0,
          "when a task fails, stop this node's tasks and start them all again, up to this many "
          "times; they resume from their newest checkpoint (restart r meets at the rendezvous "
          "port + r)");

namespace {

constexpr char kUsage[] = "usage: launch --num_workers=N [flags] -- <program> <args...>";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "launch: %s\n%s\n", message.c_str(), kUsage);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "Starts a cluster of local processes, one per task, each with TF_CONFIG on free ports.\n",
      kUsage));
  // Flags end at the first "--"; everything after it is the command, whose
  // own flags absl must not see.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  std::vector<char*> rest = absl::ParseCommandLine(split, argv);
  if (rest.size() > 1) {
    return UsageError(absl::StrCat("unexpected argument \"", rest[1], "\" before `--`"));
  }
  if (split == argc) return UsageError("missing `--` before the program to run");

  strata::LaunchOptions options;
  options.num_workers = absl::GetFlag(FLAGS_num_workers);
  options.num_chiefs = absl::GetFlag(FLAGS_num_chiefs);
  options.num_ps = absl::GetFlag(FLAGS_num_ps);
  options.max_worker_restarts = absl::GetFlag(FLAGS_max_worker_restarts);
  options.host = absl::GetFlag(FLAGS_host);
  options.grace_period = absl::GetFlag(FLAGS_grace_period);
  absl::StatusOr<std::vector<double>> delays =
      strata::ParseStartDelays(absl::GetFlag(FLAGS_start_delays));
  if (!delays.ok()) return UsageError(std::string(delays.status().message()));
  options.start_delays = *delays;
  const std::string seed = absl::GetFlag(FLAGS_random_start_order);
  if (!seed.empty()) {
    uint64_t value = 0;
    if (!absl::SimpleAtoi(seed, &value)) {
      return UsageError(absl::StrCat("--random_start_order: \"", seed,
                                     "\" is not a seed (a non-negative integer)"));
    }
    options.random_start_seed = value;
  }
  if (absl::Status s = strata::ParseNnodes(absl::GetFlag(FLAGS_nnodes), &options.min_nodes,
                                           &options.nnodes);
      !s.ok()) {
    return UsageError(std::string(s.message()));
  }
  options.rdzv_last_call = absl::GetFlag(FLAGS_rdzv_last_call);
  options.rdzv_timeout = absl::GetFlag(FLAGS_rdzv_timeout);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  const std::string rdzv = absl::GetFlag(FLAGS_rdzv_endpoint);
  if (!rdzv.empty()) {
    if (absl::Status s =
            strata::ParseRendezvousEndpoint(rdzv, &options.rdzv_host, &options.rdzv_port);
        !s.ok()) {
      return UsageError(std::string(s.message()));
    }
  }
  options.command.assign(argv + split + 1, argv + argc);
  if (absl::Status s = strata::ValidateLaunchOptions(options); !s.ok()) {
    return UsageError(std::string(s.message()));
  }
  // One job token for the cluster (runtime/security/job_token.h), which the
  // tasks inherit through the environment, unless the caller gives one.
  const char* token = std::getenv(strata::kJobTokenEnv);
  const char* token_file = std::getenv(strata::kJobTokenFileEnv);
  if ((token == nullptr || *token == '\0') && (token_file == nullptr || *token_file == '\0')) {
    if (options.nnodes > 1) {
      // Each node's launcher would make its own, and the nodes' tasks would
      // refuse each other.
      return UsageError(absl::StrCat(
          "--nnodes=", options.nnodes, ": every node's tasks must share the job's token; set ",
          strata::kJobTokenFileEnv, " (a file on a shared file system) or ",
          strata::kJobTokenEnv, " on every node (docs/cluster.md, \"Job token\")"));
    }
    setenv(strata::kJobTokenEnv, strata::JobToken::Generate().secret().c_str(), 1);
  }
  return strata::RunCluster(options);
}
