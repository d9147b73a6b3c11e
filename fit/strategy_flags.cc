#include "fit/strategy_flags.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/status.h"
#include "runtime/device.h"
#include "runtime/security/job_token.h"
#include "runtime/security/tls.h"
#include "strategy/cluster_resolver.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/multi_worker_mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/scheduler_resolvers.h"
#include "strategy/strategy_devices.h"

ABSL_FLAG(std::string, strategy, "one_device",
          "one_device (OneDeviceStrategy), mirrored (MirroredStrategy: one replica per device, "
          "gradients all-reduced), multi_worker_mirrored (one process per task of a cluster; "
          "see --cluster_spec and tools/launch) or parameter_server (the trainer's chief, worker "
          "and ps roles: variables on ps tasks, workers stepping asynchronously)");
ABSL_FLAG(int32_t, max_staleness, -1,
          "parameter_server: how many more steps a worker may have finished than the slowest "
          "one (-1: unbounded, fully asynchronous; 0: rounds, each applying every worker's mean "
          "gradient once, as synchronous training)");
ABSL_FLAG(std::string, cluster_spec, "",
          "multi_worker_mirrored: the cluster as JSON, e.g. {\"worker\":[\"127.0.0.1:2222\","
          "\"127.0.0.1:2223\"]} (default: the TF_CONFIG environment variable)");
ABSL_FLAG(std::string, task_type, "", "multi_worker_mirrored with --cluster_spec: chief or worker");
ABSL_FLAG(std::string, task_index, "",
          "multi_worker_mirrored with --cluster_spec: this task's index");
ABSL_FLAG(std::string, cluster_resolver, "auto",
          "multi_worker_mirrored: where the cluster comes from: auto (the first present of "
          "--cluster_spec, TF_CONFIG, torchrun's MASTER_ADDR/RANK/WORLD_SIZE, mpirun's "
          "OMPI_COMM_WORLD_RANK, srun's SLURM_PROCID), or flags, tf_config, torchrun, mpi, slurm "
          "(docs/cluster.md, \"Schedulers and launchers\")");
ABSL_FLAG(int32_t, slurm_port_base, 8888,
          "multi_worker_mirrored under Slurm: task k of a node listens at this port + k");
ABSL_FLAG(double, heartbeat_timeout, 10,
          "multi_worker_mirrored: seconds without a heartbeat before a task is declared lost");
ABSL_FLAG(double, startup_timeout, 120,
          "multi_worker_mirrored: seconds start-up waits for every task to register");
ABSL_FLAG(std::string, job_token_file, "",
          "multi_worker_mirrored: a file holding the job's token, the secret every task of the job "
          "shares (default: the file named by STRATA_JOB_TOKEN_FILE, else STRATA_JOB_TOKEN, which "
          "tools/launch sets; docs/cluster.md, \"Job token\")");
ABSL_FLAG(bool, insecure_no_job_token, false,
          "multi_worker_mirrored: run without a job token, serving anyone who can reach the "
          "task's ports (prints a warning)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "multi_worker_mirrored: mutual TLS on the control and TCP data planes: this task's "
          "certificate, PEM (with --tls_key_file and --tls_ca_file; default: STRATA_TLS_CERT_FILE; "
          "docs/cluster.md, \"Mutual TLS\")");
ABSL_FLAG(std::string, tls_key_file, "",
          "multi_worker_mirrored: this task's private key for --tls_cert_file, PEM, unencrypted "
          "(default: STRATA_TLS_KEY_FILE)");
ABSL_FLAG(std::string, tls_ca_file, "",
          "multi_worker_mirrored: the CA certificate(s), PEM, every task's certificate must chain "
          "to (default: STRATA_TLS_CA_FILE)");
ABSL_FLAG(std::string, collective_transport, "auto",
          "multi_worker_mirrored: auto (shared memory when every task is on one host, else TCP), "
          "shm or tcp");
ABSL_FLAG(
    std::string, devices, "",
    "comma-separated devices in replica order, e.g. /cpu:0,/cpu:1 or /gpu:0,/gpu:1 (GPUs need a "
    "build with --config=cuda; docs/gpu.md). Default: one_device /cpu:0; mirrored and "
    "multi_worker_mirrored every CPU device of --num_cpu_devices if given, else every GPU, "
    "else /cpu:0");
ABSL_FLAG(int32_t, num_cpu_devices, 0,
          "virtual CPU devices simulating a multi-device machine (0: as many as --devices names, "
          "at least 1)");
ABSL_FLAG(int64_t, gradient_bucket_bytes, -1,
          "gradients are all-reduced in buckets of at most this many bytes, the last layers' "
          "first, overlapping the backward pass (0: one per gradient; -1: 1 MiB for mirrored, 0 "
          "for multi_worker_mirrored)");
ABSL_FLAG(std::string, gradient_compression, "none",
          "gradients cross the wire as none (float32), bfloat16 or float16 (cast before the "
          "all-reduce, reduced in float, cast back), or powersgd (low-rank factors of each "
          "gradient matrix with error feedback)");
ABSL_FLAG(int32_t, powersgd_rank, 1, "--gradient_compression=powersgd: the approximation's rank");
ABSL_FLAG(int64_t, powersgd_start_step, 1000,
          "--gradient_compression=powersgd: steps all-reduced uncompressed before compression "
          "starts");
ABSL_FLAG(int32_t, zero_stage, 0,
          "ZeRO: 0 keeps the optimizer's state (slots) on every replica, 1 shards it, each "
          "replica keeping the slots of its 1/N of the parameters; 2 also keeps only that 1/N "
          "of the reduced gradients (here the same as 1, which reduce-scatters them already)");
ABSL_FLAG(
    int32_t, intra_op_threads, 0,
    "threads inside each op, per device (0: all cores divided by the CPU devices, at least 1)");
ABSL_FLAG(int32_t, inter_op_threads, 0,
          "threads running independent ops side by side (0: none on one device, one per replica "
          "with several)");

namespace strata {
namespace fit {

absl::StatusOr<std::vector<std::string>> ParseDeviceList(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (absl::string_view d : absl::StrSplit(text, ',')) {
    if (d.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices=", text, ": an empty device name (e.g. --devices=/cpu:0,/cpu:1)"));
    }
    out.emplace_back(d);
  }
  return out;
}

absl::StatusOr<StrategyConfig> StrategyConfigFromFlags() {
  StrategyConfig c;
  c.strategy = absl::GetFlag(FLAGS_strategy);
  STRATA_ASSIGN_OR_RETURN(c.devices, ParseDeviceList(absl::GetFlag(FLAGS_devices)));
  c.num_cpu_devices = absl::GetFlag(FLAGS_num_cpu_devices);
  c.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);
  c.task_type = absl::GetFlag(FLAGS_task_type);
  c.task_index = absl::GetFlag(FLAGS_task_index);
  c.cluster_resolver = absl::GetFlag(FLAGS_cluster_resolver);
  c.slurm_port_base = absl::GetFlag(FLAGS_slurm_port_base);
  c.heartbeat_timeout_seconds = absl::GetFlag(FLAGS_heartbeat_timeout);
  c.startup_timeout_seconds = absl::GetFlag(FLAGS_startup_timeout);
  c.collective_transport = absl::GetFlag(FLAGS_collective_transport);
  c.job_token_file = absl::GetFlag(FLAGS_job_token_file);
  c.insecure_no_job_token = absl::GetFlag(FLAGS_insecure_no_job_token);
  c.tls_files.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  c.tls_files.key_file = absl::GetFlag(FLAGS_tls_key_file);
  c.tls_files.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  c.gradient_bucket_bytes = absl::GetFlag(FLAGS_gradient_bucket_bytes);
  c.zero_stage = absl::GetFlag(FLAGS_zero_stage);
  c.gradient_compression = absl::GetFlag(FLAGS_gradient_compression);
  c.powersgd_rank = absl::GetFlag(FLAGS_powersgd_rank);
  c.powersgd_start_step = absl::GetFlag(FLAGS_powersgd_start_step);
  c.intra_op_threads = absl::GetFlag(FLAGS_intra_op_threads);
  c.inter_op_threads = absl::GetFlag(FLAGS_inter_op_threads);
  c.max_staleness = absl::GetFlag(FLAGS_max_staleness);
  return c;
}

absl::Status ValidateStrategyConfig(const StrategyConfig& c) {
  auto bad = [](const std::string& flag, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
  };
  if (c.strategy != "one_device" && c.strategy != "mirrored" &&
      c.strategy != "multi_worker_mirrored" && c.strategy != "parameter_server") {
    return bad("strategy", absl::StrCat("unknown strategy '", c.strategy,
                                        "'; expected one_device, mirrored, multi_worker_mirrored "
                                        "or parameter_server"));
  }
  if (c.max_staleness < -1) return bad("max_staleness", "must be >= 0, or -1 for unbounded");
  const std::vector<std::string>& resolvers = ClusterResolverNames();
  if (std::find(resolvers.begin(), resolvers.end(), c.cluster_resolver) == resolvers.end()) {
    return bad("cluster_resolver", absl::StrCat("unknown resolver '", c.cluster_resolver,
                                                "'; expected ", absl::StrJoin(resolvers, ", ")));
  }
  if (c.slurm_port_base < 1 || c.slurm_port_base > 65535) {
    return bad("slurm_port_base", "must be a port in [1, 65535]");
  }
  if (!(c.heartbeat_timeout_seconds > 0 && c.heartbeat_timeout_seconds <= 3600)) {
    return bad("heartbeat_timeout", "must be in (0, 3600] seconds");
  }
  if (!(c.startup_timeout_seconds > 0 && c.startup_timeout_seconds <= 86400)) {
    return bad("startup_timeout", "must be in (0, 86400] seconds");
  }
  if (c.collective_transport != "auto" && c.collective_transport != "shm" &&
      c.collective_transport != "tcp") {
    return bad("collective_transport", absl::StrCat("unknown transport '", c.collective_transport,
                                                    "'; expected auto, shm or tcp"));
  }
  if (c.num_cpu_devices < 0 || c.num_cpu_devices > kMaxCpuDevices) {
    return bad("num_cpu_devices",
               absl::StrCat(c.num_cpu_devices, " is not in [0, ", kMaxCpuDevices, "]"));
  }
  for (const std::string& d : c.devices) {
    if (d.empty()) return bad("devices", "an empty device name");
  }
  if (c.strategy == "one_device" && c.devices.size() > 1) {
    return bad("devices", absl::StrCat("--strategy=one_device runs on one device, --devices names ",
                                       c.devices.size(), " (", absl::StrJoin(c.devices, ","),
                                       "); use --strategy=mirrored"));
  }
  if (c.gradient_bucket_bytes < -1) {
    return bad("gradient_bucket_bytes", "must be >= 0, or -1 for the strategy's default");
  }
  if (c.gradient_compression != "none" && c.gradient_compression != "bfloat16" &&
      c.gradient_compression != "float16" && c.gradient_compression != "powersgd") {
    return bad("gradient_compression", absl::StrCat("'", c.gradient_compression,
                                                    "' is not none, bfloat16, float16 or powersgd"));
  }
  if (c.powersgd_rank < 1) return bad("powersgd_rank", "must be >= 1");
  if (c.powersgd_start_step < 0) return bad("powersgd_start_step", "must be >= 0");
  if (c.gradient_compression == "powersgd" && c.zero_stage >= 1) {
    return bad("gradient_compression",
               "powersgd does not combine with --zero_stage=1 or 2 (ZeRO reduce-scatters whole "
               "gradients)");
  }
  if (c.zero_stage < 0 || c.zero_stage > 2) {
    return bad("zero_stage",
               "must be 0 (mirrored optimizer state), 1 (sharded) or 2 (sharded state and "
               "gradients)");
  }
  if (c.intra_op_threads < 0) return bad("intra_op_threads", "must be >= 0");
  if (c.inter_op_threads < 0) return bad("inter_op_threads", "must be >= 0");
  return absl::OkStatus();
}

int NumCpuDevices(const StrategyConfig& c) {
  if (c.num_cpu_devices > 0) return c.num_cpu_devices;
  const int gpus =
      static_cast<int>(std::count_if(c.devices.begin(), c.devices.end(),
                                     [](const std::string& d) { return distribute::AnyGpu({d}); }));
  return std::max<int>(1, static_cast<int>(c.devices.size()) - gpus);
}

namespace {

// The replicas' devices of a mirrored strategy: --devices, else every CPU
// device of --num_cpu_devices, else none (the strategy's default: every GPU,
// or /cpu:0 where there is none).
std::vector<std::string> MirroredSpecs(const StrategyConfig& c, const DeviceOptions& machine) {
  std::vector<std::string> specs = c.devices;
  if (specs.empty() && c.num_cpu_devices > 0) {
    for (int i = 0; i < machine.num_cpu_devices; ++i) specs.push_back(absl::StrCat("/cpu:", i));
  }
  return specs;
}

}  // namespace

ResolverOptions ResolverOptionsFrom(const StrategyConfig& c) {
  ResolverOptions ro;
  ro.resolver = c.cluster_resolver;
  ro.cluster_spec = c.cluster_spec;
  ro.task_type = c.task_type;
  ro.task_index = c.task_index;
  ro.slurm_port_base = c.slurm_port_base;
  ro.exchange_timeout = absl::Seconds(c.startup_timeout_seconds);
  return ro;
}

absl::StatusOr<std::unique_ptr<distribute::Strategy>> MakeStrategy(const StrategyConfig& c) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyConfig(c));
  if (c.strategy == "parameter_server") {
    return absl::UnimplementedError(
        "--strategy=parameter_server runs as the trainer's roles (chief, worker, ps; "
        "tools/trainer_ps.h); a program of its own makes a ParameterServerStrategy and a "
        "ClusterCoordinator (strategy/parameter_server_strategy.h, cluster_coordinator.h)");
  }
  DeviceOptions machine;
  machine.num_cpu_devices = NumCpuDevices(c);
  machine.intra_op_threads_per_device = c.intra_op_threads;
  distribute::StrategyOptions options;
  options.gradient_bucket_bytes = c.gradient_bucket_bytes >= 0            ? c.gradient_bucket_bytes
                                  : c.strategy == "multi_worker_mirrored" ? 0
                                                                          : int64_t{1} << 20;
  options.zero_stage = c.zero_stage;
  options.gradient_compression = c.gradient_compression;
  options.powersgd_rank = c.powersgd_rank;
  options.powersgd_start_step = c.powersgd_start_step;
  absl::StatusOr<std::unique_ptr<distribute::Strategy>> s;
  if (c.strategy == "one_device") {
    s = distribute::OneDeviceStrategy::Create(c.devices.empty() ? "/cpu:0" : c.devices[0], machine,
                                              options);
  } else if (c.strategy == "multi_worker_mirrored") {
    // The cluster first: a bad TF_CONFIG, --cluster_spec or scheduler
    // environment fails before any network traffic, naming the field.
    STRATA_ASSIGN_OR_RETURN(ResolvedCluster resolved,
                            ResolveCluster(ResolverOptionsFrom(c), ProcessEnvironment()));
    std::fprintf(stderr, "strata: %s\n", resolved.Describe().c_str());
    if (resolved.cuda_visible_devices.has_value()) {
      // Before any GPU is touched: CUDA reads it once, at initialisation.
      setenv("CUDA_VISIBLE_DEVICES", resolved.cuda_visible_devices->c_str(), 1);
    }
    const ClusterSpec& cluster = resolved.spec;
    distribute::MultiWorkerOptions mw;
    mw.listen_on_all_interfaces = resolved.listen_on_all_interfaces;
    mw.heartbeat_timeout = absl::Seconds(c.heartbeat_timeout_seconds);
    mw.startup_timeout = absl::Seconds(c.startup_timeout_seconds);
    mw.transport = c.collective_transport;
    STRATA_ASSIGN_OR_RETURN(mw.job_token,
                            ResolveJobToken(c.job_token_file, c.insecure_no_job_token));
    mw.insecure_no_job_token = c.insecure_no_job_token;
    mw.steps_span_workers = c.steps_span_workers;
    STRATA_ASSIGN_OR_RETURN(mw.tls, ResolveTls(c.tls_files));
    absl::StatusOr<std::unique_ptr<distribute::MultiWorkerMirroredStrategy>> m =
        distribute::MultiWorkerMirroredStrategy::Create(cluster, MirroredSpecs(c, machine), machine,
                                                        options, mw);
    if (!m.ok()) return AnnotateStatus(m.status(), absl::StrCat(cluster.TaskPrefix(), ": "));
    return std::unique_ptr<distribute::Strategy>(*std::move(m));
  } else {
    s = distribute::MirroredStrategy::Create(MirroredSpecs(c, machine), machine, options);
  }
  if (!s.ok() && distribute::AnyGpu(c.devices)) {
    // Likely a GPU that is not there (no GPU, too few, a build without CUDA).
    return absl::Status(
        s.status().code(),
        absl::StrCat("--devices=", absl::StrJoin(c.devices, ","), ": ", s.status().message(),
                     " (GPUs need a binary built with --config=cuda on a machine with GPUs; "
                     "docs/gpu.md)"));
  }
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices=", absl::StrJoin(c.devices, ","), ": ", s.status().message(),
                     " (--num_cpu_devices=N simulates a machine of N CPU devices)"));
  }
  return s;
}

}  // namespace fit
}  // namespace strata
