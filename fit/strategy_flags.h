// The strategy from the command line and the environment, in one call: the
// flags every Strata training binary shares, defined once here, so that a
// user's binary that links //fit:strategy_flags takes the same
// --strategy, --devices, --num_cpu_devices, --cluster_spec / --task_type /
// --task_index (or TF_CONFIG, or a scheduler's environment: --cluster_resolver,
// --slurm_port_base), --heartbeat_timeout, --startup_timeout,
// --collective_transport, --gradient_bucket_bytes, --zero_stage,
// --gradient_compression, --powersgd_rank, --powersgd_start_step, --intra_op_threads and
// --inter_op_threads as tools/trainer, with the same meaning and errors.
//
//   int main(int argc, char** argv) {
//     absl::ParseCommandLine(argc, argv);
//     absl::StatusOr<fit::StrategyConfig> config = fit::StrategyConfigFromFlags();
//     absl::StatusOr<std::unique_ptr<distribute::Strategy>> strategy = fit::MakeStrategy(*config);
//     ...  // build the step under (*strategy)->Scope(), as with any strategy
//
// A program that fills StrategyConfig itself (a test, a config file) calls
// MakeStrategy alone; no flag is read then.
//
// The strategies (strategy/*.h):
//   one_device             OneDeviceStrategy on --devices (one; default /cpu:0)
//   mirrored               MirroredStrategy: one replica per device of
//                          --devices, else every CPU device of
//                          --num_cpu_devices, else every GPU, else /cpu:0
//   multi_worker_mirrored  MultiWorkerMirroredStrategy: this process is one
//                          task of the cluster of --cluster_spec with
//                          --task_type and --task_index, or of TF_CONFIG when
//                          none of the three is given, or of the launcher
//                          that started it (torchrun, mpirun, srun;
//                          --cluster_resolver); its replicas as for
//                          mirrored
//
// Errors: InvalidArgument naming the flag (as --name) for a setting out of
// range or a device that does not exist; the cluster resolver's error naming
// the field for a bad cluster; a multi-worker start-up that fails names this
// task. Never a crash.
//
// Thread-safety: StrategyConfigFromFlags reads the flags (after
// absl::ParseCommandLine); MakeStrategy may run on any thread. Ownership:
// the caller owns the strategy.
#ifndef STRATA_FIT_STRATEGY_FLAGS_H_
#define STRATA_FIT_STRATEGY_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/security/tls.h"
#include "strategy/scheduler_resolvers.h"
#include "strategy/strategy.h"

// The flags (defined in strategy_flags.cc), for absl::GetFlag / SetFlag.
ABSL_DECLARE_FLAG(std::string, strategy);
ABSL_DECLARE_FLAG(std::string, devices);
ABSL_DECLARE_FLAG(int32_t, num_cpu_devices);
ABSL_DECLARE_FLAG(std::string, cluster_spec);
ABSL_DECLARE_FLAG(std::string, task_type);
ABSL_DECLARE_FLAG(std::string, task_index);
ABSL_DECLARE_FLAG(std::string, cluster_resolver);
ABSL_DECLARE_FLAG(int32_t, slurm_port_base);
ABSL_DECLARE_FLAG(double, heartbeat_timeout);
ABSL_DECLARE_FLAG(double, startup_timeout);
ABSL_DECLARE_FLAG(std::string, collective_transport);
ABSL_DECLARE_FLAG(int64_t, gradient_bucket_bytes);
ABSL_DECLARE_FLAG(int32_t, zero_stage);
ABSL_DECLARE_FLAG(std::string, gradient_compression);
ABSL_DECLARE_FLAG(int32_t, powersgd_rank);
ABSL_DECLARE_FLAG(int64_t, powersgd_start_step);
ABSL_DECLARE_FLAG(int32_t, intra_op_threads);
ABSL_DECLARE_FLAG(int32_t, inter_op_threads);
ABSL_DECLARE_FLAG(int32_t, max_staleness);

namespace strata {
namespace fit {

// The flags' values, one field per flag (field defaults = flag defaults).
struct StrategyConfig {
  // "one_device", "mirrored", "multi_worker_mirrored" or "parameter_server"
  // (the trainer's roles, tools/trainer_ps.h; MakeStrategy does not make it).
  std::string strategy = "one_device";
  // Device specs ("/cpu:0", "/device:CPU:1", "/gpu:0" in a --config=cuda
  // build) in replica order; empty: the strategy's default (above).
  std::vector<std::string> devices;
  // Virtual CPU devices of the simulated machine; 0 = as many as `devices`
  // names (at least 1).
  int num_cpu_devices = 0;
  // multi_worker_mirrored: the cluster as JSON (TF_CONFIG's "cluster"), this
  // task's type and index; all empty: the TF_CONFIG environment variable.
  std::string cluster_spec;
  std::string task_type;
  std::string task_index;
  // multi_worker_mirrored: where the cluster comes from
  // (strategy/scheduler_resolvers.h): "auto" (flags, TF_CONFIG, torchrun's
  // variables, mpirun's, srun's, the first present), or one of them forced:
  // "flags", "tf_config", "torchrun", "mpi", "slurm". Slurm task k of a node
  // listens at slurm_port_base + k.
  std::string cluster_resolver = "auto";
  int slurm_port_base = 8888;
  // multi_worker_mirrored: a task silent this long is declared lost; how
  // long start-up waits for every task; "auto", "shm" or "tcp".
  double heartbeat_timeout_seconds = 10;
  double startup_timeout_seconds = 120;
  std::string collective_transport = "auto";
  // multi_worker_mirrored: a file holding the job's token ("": the
  // environment's, runtime/security/job_token.h); run without one.
  std::string job_token_file;
  bool insecure_no_job_token = false;
  // Not a flag: MultiWorkerOptions::steps_span_workers, for a program whose
  // steps span the workers (the trainer's pipeline across workers).
  bool steps_span_workers = false;
  // multi_worker_mirrored: mutual TLS (runtime/security/tls.h); empty
  // fields: the environment's; none anywhere: no TLS.
  TlsFiles tls_files;
  // Gradients are all-reduced in buckets of at most this many bytes
  // (StrategyOptions::gradient_bucket_bytes); 0 = one per gradient.
  // -1: 1 MiB for mirrored, smaller than the strategy's 25 MiB default: in
  // process a bucket's all-reduce costs little to start, and the last
  // layers' buckets then overlap the rest of the backward pass
  // (docs/training.md has figures). For multi_worker_mirrored 0, one
  // all-reduce per gradient: across processes the bucket's copies cost more
  // than the extra collectives (2 workers x 1 thread, MLP 784-512-512-10,
  // 59-68k examples/s unfused vs 56-63k with 0.25-30 MiB buckets).
  int64_t gradient_bucket_bytes = -1;
  // ZeRO (StrategyOptions::zero_stage): 0 mirrors the optimizer's state on
  // every replica, 1 shards it over the replicas (strategy/sharded_update.h).
  int zero_stage = 0;
  // StrategyOptions::gradient_compression: "none", "bfloat16", "float16"
  // (float32 gradients cross the wire in that dtype) or "powersgd" (low-rank
  // factors, with powersgd_rank and powersgd_start_step).
  std::string gradient_compression = "none";
  int powersgd_rank = 1;
  int64_t powersgd_start_step = 1000;
  // Threads inside each op, per device; 0 = hardware concurrency divided by
  // the CPU devices (at least 1).
  int intra_op_threads = 0;
  // Threads running independent ops side by side; 0 = none on one device
  // (ops run one at a time on the calling thread, each using the intra-op
  // threads), one per replica with several (the replicas' steps run side by
  // side). Read by whoever makes the session.
  int inter_op_threads = 0;
  // parameter_server: how many more steps a worker may have finished than
  // the slowest available one (ClusterCoordinatorOptions::max_staleness);
  // -1: unbounded; 0: rounds, the workers' mean gradient applied once per
  // round, as synchronous training (tools/trainer_ps.h).
  int max_staleness = -1;
};

// The most virtual CPU devices --num_cpu_devices may ask for.
inline constexpr int kMaxCpuDevices = 256;

// The flags' values; InvalidArgument naming --devices for a malformed list.
absl::StatusOr<StrategyConfig> StrategyConfigFromFlags();

// "/cpu:0,/cpu:1" -> {"/cpu:0", "/cpu:1"}; "" -> {}. InvalidArgument naming
// --devices for an empty entry.
absl::StatusOr<std::vector<std::string>> ParseDeviceList(const std::string& text);

// InvalidArgument naming the flag for a value out of range.
absl::Status ValidateStrategyConfig(const StrategyConfig& config);

// The CPU devices of the machine `config` describes (GPUs named in
// `devices` are not CPUs).
int NumCpuDevices(const StrategyConfig& config);

// Where `config` says the cluster comes from (--cluster_resolver, the
// flags' cluster, --slurm_port_base, --startup_timeout), for ResolveCluster
// (strategy/scheduler_resolvers.h).
ResolverOptions ResolverOptionsFrom(const StrategyConfig& config);

// Validates `config` and makes the strategy it describes (for
// multi_worker_mirrored this joins the cluster: it returns once every task
// has registered, or fails after startup_timeout_seconds).
absl::StatusOr<std::unique_ptr<distribute::Strategy>> MakeStrategy(const StrategyConfig& config);

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_STRATEGY_FLAGS_H_
