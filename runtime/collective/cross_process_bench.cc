// Cross-process all-reduce: forks --ranks processes on this host, connects
// them with a cross-process Transport (--transport=shm: the shared-memory transport;
// --transport=tcp: TcpTransport, listening on --host, 127.0.0.1 by default;
// the ranks meet through a FileKeyValueStore in a temporary directory), and
// times float32 SUM all-reduce from --min_bytes to --max_bytes (x4 each
// step) with the algorithm SelectAlgorithm picks for that
// transport under hint auto (or --algorithm; --piece_kib sizes the pieces of
// TCP's pipelined ring). Where the algorithm supports it (TCP's pipelined
// ring) the all-reduce runs in place, on one buffer, as Gloo's,
// torch.distributed's and Open MPI's benchmarks do and as the collective
// kernel does with a gradient nobody else holds; --in_place=false gives it a
// separate output. The schedule is tools/bench/peers_common.py's,
// the one Open MPI's and Gloo's peers follow: per size, iterations =
// budget_bytes / bytes clamped to [min_iters, max_iters], warm-up a tenth of
// that (at least 2), a check of the sum, a barrier, the timed loop; the time
// reported is the slowest rank's mean. busbw = algbw * 2(n-1)/n, algbw =
// bytes / time. In the same run, before the ranks start, the parent measures
// memcpy bandwidth for each size (one thread, two pre-touched buffers,
// median of 5 samples) and reports busbw / memcpy.
//
//   bazel run -c opt //runtime/collective:cross_process_bench -- --ranks=2,4
//
// With --rank=R the process runs that one rank itself instead of forking
// them all, meeting the others (started the same way, e.g. each in its own
// network namespace) through the store in --kv_dir, a directory they share;
// --host is then the address of this rank's host:
//
//   ip netns exec h0 cross_process_bench --transport=tcp --ranks=2 --rank=0
//       --kv_dir=/tmp/kv --host=10.9.0.1 &
//   ip netns exec h1 cross_process_bench --transport=tcp --ranks=2 --rank=1
//       --kv_dir=/tmp/kv --host=10.9.0.2
// (one command each, shown on two lines)
//
// --collective=reduce_scatter or all_gather times that collective instead
// (as tools/bench/allreduce_mpi.c's --collective): a size is the whole
// tensor, reduce-scatter's input and all-gather's output, each rank's block
// a 1/n of it; busbw = algbw * (n-1)/n; the RESULT lines say collective=.
//
// Prints a table per rank count and a line per measurement for scripts:
//   RESULT impl=strata-shm ranks=2 bytes=4096 time_us=1.85 busbw_gbps=2.214
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/status.h"
#include "graph/tensor.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/algorithms/all_reduce_pipelined_ring.h"
#include "runtime/collective/file_key_value_store.h"
#include "runtime/collective/transport/shm_transport.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/security/tls.h"

ABSL_FLAG(std::string, ranks, "2,4", "process counts to run, comma-separated");
ABSL_FLAG(std::string, transport, "shm", "what connects the processes: shm or tcp");
ABSL_FLAG(std::string, host, "127.0.0.1", "tcp: the address this rank listens on");
ABSL_FLAG(int, rank, -1,
          "run only this rank, in this process, meeting the others through --kv_dir (-1: fork "
          "every rank of each --ranks count)");
ABSL_FLAG(std::string, kv_dir, "",
          "with --rank: the key-value store's directory, shared by every rank (empty at the start)");
ABSL_FLAG(std::string, collective, "all_reduce",
          "what to time: all_reduce, reduce_scatter or all_gather");
ABSL_FLAG(std::string, algorithm, "auto",
          "all-reduce algorithm: auto (SelectAlgorithm's pick for the transport), shm, ring, ...");
ABSL_FLAG(int64_t, spin_us, -1,
          "shm: microseconds a waiting rank polls before yielding (-1: the transport's adaptive "
          "choice)");
ABSL_FLAG(int64_t, yield_us, 500, "shm: with --spin_us, microseconds a waiting rank yields");
ABSL_FLAG(int64_t, chunk_kib, 256, "shm: all-reduce pipeline chunk, KiB");
ABSL_FLAG(bool, shm_single_copy, true,
          "shm: collectives may copy straight from a peer's memory where every rank may "
          "(ShmTransportOptions::single_copy)");
ABSL_FLAG(int64_t, piece_kib, 512, "tcp: the pipelined ring's piece, KiB");
ABSL_FLAG(int64_t, tcp_send_window_kib, strata::kPipelinedRingSendWindowBytes >> 10,
          "tcp: the pipelined ring's window of first-step sends, KiB (0: no window)");
ABSL_FLAG(int64_t, tcp_drive_max_kib, -1,
          "tcp: the pipelined ring's caller drives the transport up to this size, KiB (-1: its "
          "default)");
ABSL_FLAG(int64_t, tcp_spin_us, -1,
          "tcp: microseconds the I/O thread polls before sleeping (-1: the transport's default)");
ABSL_FLAG(int64_t, tcp_drive_spin_us, -1,
          "tcp: microseconds a waiting caller polls its sockets before sleeping in poll() (-1: the "
          "transport's default)");
ABSL_FLAG(bool, tcp_caller_drives, true,
          "tcp: the thread waiting on an all-reduce serves the sockets (false: the I/O thread does)");
ABSL_FLAG(int64_t, tcp_eager_kib, -1,
          "tcp: messages up to this size go without the receiver's grant, KiB (-1: the "
          "transport's default)");
ABSL_FLAG(int64_t, sockbuf_kib, -1, "tcp: SO_SNDBUF/SO_RCVBUF, KiB (-1: the transport's default)");
ABSL_FLAG(std::string, tcp_congestion, "auto",
          "tcp: the sockets' congestion control: auto (a pacing one replaced by cubic or reno), "
          "system (the host's default), or a name");
ABSL_FLAG(bool, in_place, true,
          "all-reduce one buffer in place where the algorithm supports it (else into a separate "
          "output)");
ABSL_FLAG(int, tcp_in_place_slots, strata::kPipelinedRingInPlaceSlots,
          "tcp: the pipelined ring's receive slots when in place");
ABSL_FLAG(std::string, tls_cert_file, "",
          "tcp: mutual TLS with this certificate (and --tls_key_file, --tls_ca_file; "
          "runtime/security/tls.h); reported as strata-tcp-tls");
ABSL_FLAG(std::string, tls_key_file, "", "tcp: the key of --tls_cert_file");
ABSL_FLAG(std::string, tls_ca_file, "", "tcp: the CA peers' certificates chain to");
ABSL_FLAG(int64_t, min_bytes, 4096, "smallest all-reduce, bytes");
ABSL_FLAG(int64_t, max_bytes, int64_t{64} << 20, "largest all-reduce, bytes (x4 steps)");
ABSL_FLAG(int64_t, budget_bytes, int64_t{1} << 30, "bytes all-reduced per size (sets iterations)");
ABSL_FLAG(int64_t, min_iters, 10, "fewest timed iterations per size");
ABSL_FLAG(int64_t, max_iters, 2000, "most timed iterations per size");

namespace strata {
namespace {

bool UsesTls() {
  return !absl::GetFlag(FLAGS_tls_cert_file).empty() || !absl::GetFlag(FLAGS_tls_key_file).empty() ||
         !absl::GetFlag(FLAGS_tls_ca_file).empty();
}

using Clock = std::chrono::steady_clock;

struct Schedule {
  std::vector<int64_t> sizes;
  int64_t budget, min_iters, max_iters;
  int64_t Iters(int64_t bytes) const {
    return std::min(std::max(budget / bytes, min_iters), max_iters);
  }
  int64_t Warmup(int64_t bytes) const { return std::max<int64_t>(2, Iters(bytes) / 10); }
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// memcpy GB/s for `bytes`: median of 5 samples, each >= 64 MiB copied.
double MemcpyGBps(int64_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int64_t copies = std::max<int64_t>(1, (int64_t{64} << 20) / bytes);
  std::vector<double> samples;
  for (int s = 0; s < 5; ++s) {
    const Clock::time_point start = Clock::now();
    for (int64_t c = 0; c < copies; ++c) {
      src[c % bytes] = static_cast<char>(c);
      std::memcpy(dst.data(), src.data(), bytes);
      asm volatile("" : : "r"(dst.data()) : "memory");
    }
    samples.push_back(static_cast<double>(bytes) * copies / Seconds(Clock::now() - start) / 1e9);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

absl::StatusOr<std::unique_ptr<Transport>> Connect(int rank, int n, const std::string& dir) {
  FileKeyValueStore kv(dir);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "shm") {
    ShmTransportOptions options;
    options.key_prefix = absl::StrCat("bench", n);
    options.adaptive_wait = absl::GetFlag(FLAGS_spin_us) < 0;
    options.spin_duration = absl::Microseconds(absl::GetFlag(FLAGS_spin_us));
    options.yield_duration = absl::Microseconds(absl::GetFlag(FLAGS_yield_us));
    options.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kib)) << 10;
    options.single_copy = absl::GetFlag(FLAGS_shm_single_copy);
    return ConnectShmTransport(rank, n, kv, options);
  }
  TcpTransportOptions options;
  options.key_prefix = absl::StrCat("bench", n, "/tcp");
  options.host = absl::GetFlag(FLAGS_host);
  if (absl::GetFlag(FLAGS_tcp_spin_us) >= 0) {
    options.poll_spin = absl::Microseconds(absl::GetFlag(FLAGS_tcp_spin_us));
  }
  if (absl::GetFlag(FLAGS_tcp_drive_spin_us) >= 0) {
    options.driver_spin = absl::Microseconds(absl::GetFlag(FLAGS_tcp_drive_spin_us));
  }
  options.caller_drives = absl::GetFlag(FLAGS_tcp_caller_drives);
  if (absl::GetFlag(FLAGS_tcp_eager_kib) >= 0) {
    options.eager_limit = static_cast<size_t>(absl::GetFlag(FLAGS_tcp_eager_kib)) << 10;
  }
  options.congestion_control = absl::GetFlag(FLAGS_tcp_congestion);
  if (absl::GetFlag(FLAGS_sockbuf_kib) >= 0) {
    options.socket_buffer_bytes = static_cast<int>(absl::GetFlag(FLAGS_sockbuf_kib) << 10);
  }
  if (UsesTls()) {
    STRATA_ASSIGN_OR_RETURN(options.tls, LoadTlsConfig(TlsFiles{absl::GetFlag(FLAGS_tls_cert_file),
                                                                absl::GetFlag(FLAGS_tls_key_file),
                                                                absl::GetFlag(FLAGS_tls_ca_file)}));
  }
  return ConnectTcpTransport(rank, n, kv, options);
}

// One collective of `count` elements (all-gather: of each rank's input)
// with a fresh algorithm object.
absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> MakeCollective(Transport& t, CollectiveType type,
                                                                    DataType dtype, int64_t count,
                                                                    MergeOp op,
                                                                    const std::string& hint) {
  AlgorithmParams p;
  p.type = type;
  p.rank = t.rank();
  p.size = t.size();
  p.dtype = dtype;
  p.num_elements = count;
  p.merge_op = op;
  std::string name = hint;
  if (hint == "auto") {
    // Per rank as the executors count it: all-gather's block, the whole
    // tensor of the others.
    const int64_t bytes =
        count * DataTypeSize(dtype) / (type == CollectiveType::kAllGather ? p.size : 1);
    STRATA_ASSIGN_OR_RETURN(name, SelectAlgorithm(p.type, "auto", p.size, bytes,
                                                  /*same_address_space=*/false, t.kind()));
  }
  if (name == "pipelined_ring") {
    const int64_t drive_kib = absl::GetFlag(FLAGS_tcp_drive_max_kib);
    PipelinedRingOptions o;
    o.piece_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_piece_kib)) << 10;
    if (drive_kib >= 0) o.drive_max_bytes = drive_kib << 10;
    o.send_window_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_tcp_send_window_kib)) << 10;
    o.in_place_slots = absl::GetFlag(FLAGS_tcp_in_place_slots);
    return CreatePipelinedRingAllReduce(p, o);
  }
  return CreateCollectiveAlgorithm(p.type, name, p);
}

absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> MakeAllReduce(Transport& t, DataType dtype,
                                                                   int64_t count, MergeOp op,
                                                                   const std::string& hint) {
  return MakeCollective(t, CollectiveType::kAllReduce, dtype, count, op, hint);
}

// --collective.
absl::StatusOr<CollectiveType> TimedCollective() {
  const std::string c = absl::GetFlag(FLAGS_collective);
  if (c == "all_reduce") return CollectiveType::kAllReduce;
  if (c == "reduce_scatter") return CollectiveType::kReduceScatter;
  if (c == "all_gather") return CollectiveType::kAllGather;
  return absl::InvalidArgumentError(
      absl::StrCat("--collective=", c, " is not all_reduce, reduce_scatter or all_gather"));
}

// Reduce-scatter or all-gather, timed as RunRank times all-reduce (out of
// place: their outputs and inputs differ in size).
absl::Status RunOtherCollective(Transport& t, CollectiveType type, const Schedule& schedule,
                                const std::map<int64_t, double>& memcpy_gbps) {
  const int n = t.size(), rank = t.rank();
  const bool scatter = type == CollectiveType::kReduceScatter;
  const std::string hint = absl::GetFlag(FLAGS_algorithm);
  const int64_t max_count = schedule.sizes.back() / 4;
  Tensor input_tensor(DT_FLOAT, TensorShape{max_count}), output_tensor(DT_FLOAT, TensorShape{max_count});
  float* const input = input_tensor.data<float>();
  float* const output = output_tensor.data<float>();
  std::fill(input, input + max_count, static_cast<float>(rank + 1));
  std::fill(output, output + max_count, 0.0f);
  auto status = [&]() -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(auto sync, MakeAllReduce(t, DT_FLOAT, 1, MergeOp::kAdd, "auto"));
    STRATA_ASSIGN_OR_RETURN(auto slowest, MakeAllReduce(t, DT_DOUBLE, 1, MergeOp::kMax, "auto"));
    float one = 1, sum = 0;
    for (int64_t bytes : schedule.sizes) {
      const int64_t block = bytes / 4 / n, count = block * n;
      if (block == 0) continue;
      STRATA_ASSIGN_OR_RETURN(auto alg, MakeCollective(t, type, DT_FLOAT, scatter ? count : block,
                                                       MergeOp::kAdd, hint));
      for (int64_t i = 0; i < schedule.Warmup(bytes) + 1; ++i) {
        STRATA_RETURN_IF_ERROR(alg->Run(t, input, output));
      }
      // Reduce-scatter: the sum everywhere; all-gather: rank q's q + 1.
      const int64_t last = scatter ? block - 1 : count - 1;
      const float want_first = scatter ? static_cast<float>(n) * (n + 1) / 2 : 1.0f;
      const float want_last = scatter ? want_first : static_cast<float>(n);
      if (output[0] != want_first || output[last] != want_last) {
        return absl::InternalError(absl::StrCat("rank ", rank, " got ", output[0], " and ",
                                                output[last], ", want ", want_first, " and ",
                                                want_last, " at ", bytes, " bytes"));
      }
      STRATA_RETURN_IF_ERROR(sync->Run(t, &one, &sum));
      const int64_t iters = schedule.Iters(bytes);
      const Clock::time_point start = Clock::now();
      for (int64_t i = 0; i < iters; ++i) STRATA_RETURN_IF_ERROR(alg->Run(t, input, output));
      const double mean = Seconds(Clock::now() - start) / iters;
      double worst = 0;
      STRATA_RETURN_IF_ERROR(slowest->Run(t, &mean, &worst));
      if (rank != 0) continue;
      const int64_t whole = count * 4;
      const double algbw = whole / worst / 1e9, busbw = algbw * (n - 1) / n;
      const double mc = memcpy_gbps.at(bytes);
      std::printf("%6d %10lld %12.2f %10.3f %10.3f %10.3f %10.3f\n", n, static_cast<long long>(whole),
                  worst * 1e6, algbw, busbw, mc, busbw / mc);
      std::printf("RESULT impl=strata-%s%s collective=%s ranks=%d bytes=%lld time_us=%.2f "
                  "busbw_gbps=%.3f\n",
                  t.kind(), UsesTls() ? "-tls" : "", scatter ? "reduce_scatter" : "allgather", n,
                  static_cast<long long>(whole), worst * 1e6, busbw);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) t.Abort(status);
  return status;
}

absl::Status RunRank(int rank, int n, const std::string& dir, const Schedule& schedule,
                     const std::map<int64_t, double>& memcpy_gbps) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, Connect(rank, n, dir));
  const std::string hint = absl::GetFlag(FLAGS_algorithm);
  const int64_t max_count = schedule.sizes.back() / 4;
  // Tensors, so the buffers come from Strata's CPU allocator as a training
  // step's gradients do (large ones on transparent huge pages).
  Tensor input_tensor(DT_FLOAT, TensorShape{max_count}), output_tensor(DT_FLOAT, TensorShape{max_count});
  float* const input = input_tensor.data<float>();
  float* const separate_output = output_tensor.data<float>();
  std::fill(input, input + max_count, static_cast<float>(rank + 1));
  std::fill(separate_output, separate_output + max_count, 0.0f);
  const float expected = static_cast<float>(n) * (n + 1) / 2;
  STRATA_ASSIGN_OR_RETURN(const CollectiveType type, TimedCollective());
  if (type != CollectiveType::kAllReduce) return RunOtherCollective(*t, type, schedule, memcpy_gbps);
  auto status = [&]() -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(auto sync, MakeAllReduce(*t, DT_FLOAT, 1, MergeOp::kAdd, "auto"));
    STRATA_ASSIGN_OR_RETURN(auto slowest, MakeAllReduce(*t, DT_DOUBLE, 1, MergeOp::kMax, "auto"));
    float one = 1, sum = 0;
    for (int64_t bytes : schedule.sizes) {
      const int64_t count = bytes / 4;
      STRATA_ASSIGN_OR_RETURN(auto alg, MakeAllReduce(*t, DT_FLOAT, count, MergeOp::kAdd, hint));
      float* const output =
          absl::GetFlag(FLAGS_in_place) && alg->SupportsInPlace() ? input : separate_output;
      for (int64_t i = 0; i < schedule.Warmup(bytes); ++i) {
        STRATA_RETURN_IF_ERROR(alg->Run(*t, input, output));
      }
      // In place, the warm-up summed sums: check one all-reduce of fresh
      // input. (In place, the timed loop's values keep doubling, up to
      // infinity; neither costs more to add.)
      std::fill(input, input + count, static_cast<float>(rank + 1));
      STRATA_RETURN_IF_ERROR(alg->Run(*t, input, output));
      if (output[0] != expected || output[count - 1] != expected) {
        return absl::InternalError(absl::StrCat("rank ", rank, " got ", output[0], " and ",
                                                output[count - 1], ", want ", expected, " at ",
                                                bytes, " bytes"));
      }
      STRATA_RETURN_IF_ERROR(sync->Run(*t, &one, &sum));
      const int64_t iters = schedule.Iters(bytes);
      const Clock::time_point start = Clock::now();
      for (int64_t i = 0; i < iters; ++i) {
        STRATA_RETURN_IF_ERROR(alg->Run(*t, input, output));
      }
      const double mean = Seconds(Clock::now() - start) / iters;
      double worst = 0;
      STRATA_RETURN_IF_ERROR(slowest->Run(*t, &mean, &worst));
      if (rank != 0) continue;
      const double algbw = bytes / worst / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
      const double mc = memcpy_gbps.at(bytes);
      std::printf("%6d %10lld %12.2f %10.3f %10.3f %10.3f %10.3f\n", n,
                  static_cast<long long>(bytes), worst * 1e6, algbw, busbw, mc, busbw / mc);
      std::printf("RESULT impl=strata-%s%s ranks=%d bytes=%lld time_us=%.2f busbw_gbps=%.3f\n",
                  t->kind(), UsesTls() ? "-tls" : "", n, static_cast<long long>(bytes), worst * 1e6, busbw);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) t->Abort(status);
  return status;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<int> rank_counts;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1 || n > 64) {
      std::fprintf(stderr, "cross_process_bench: --ranks: '%s' is not a count in 1..64\n",
                   std::string(s).c_str());
      return 2;
    }
    rank_counts.push_back(n);
  }
  Schedule schedule;
  schedule.budget = absl::GetFlag(FLAGS_budget_bytes);
  schedule.min_iters = absl::GetFlag(FLAGS_min_iters);
  schedule.max_iters = absl::GetFlag(FLAGS_max_iters);
  const int64_t min_bytes = absl::GetFlag(FLAGS_min_bytes), max_bytes = absl::GetFlag(FLAGS_max_bytes);
  if (min_bytes < 4 || max_bytes < min_bytes || schedule.min_iters < 1 ||
      schedule.max_iters < schedule.min_iters || schedule.budget < 1) {
    std::fprintf(stderr, "cross_process_bench: need 4 <= min_bytes <= max_bytes, "
                         "1 <= min_iters <= max_iters, budget_bytes >= 1\n");
    return 2;
  }
  for (int64_t b = min_bytes; b <= max_bytes; b *= 4) schedule.sizes.push_back(b / 4 * 4);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport != "shm" && transport != "tcp") {
    std::fprintf(stderr, "cross_process_bench: --transport=%s is not shm or tcp\n",
                 transport.c_str());
    return 2;
  }
  const int only_rank = absl::GetFlag(FLAGS_rank);
  const std::string kv_dir = absl::GetFlag(FLAGS_kv_dir);
  if (only_rank >= 0 && (rank_counts.size() != 1 || only_rank >= rank_counts[0] || kv_dir.empty())) {
    std::fprintf(stderr, "cross_process_bench: --rank=%d needs one count in --ranks (got '%s') "
                         "above it and --kv_dir\n",
                 only_rank, absl::GetFlag(FLAGS_ranks).c_str());
    return 2;
  }
  // Only rank 0 reports, so only it measures memcpy when the ranks run apart.
  std::map<int64_t, double> memcpy_gbps;
  if (only_rank <= 0) {
    for (int64_t b : schedule.sizes) memcpy_gbps[b] = MemcpyGBps(b);
  }
  if (only_rank >= 0) {
    const absl::Status s = RunRank(only_rank, rank_counts[0], kv_dir, schedule, memcpy_gbps);
    if (!s.ok()) {
      std::fprintf(stderr, "cross_process_bench: rank %d: %s\n", only_rank, s.ToString().c_str());
    }
    std::fflush(stdout);
    return s.ok() ? 0 : 1;
  }
  if (const absl::Status s = TimedCollective().status(); !s.ok()) {
    std::fprintf(stderr, "cross_process_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::printf("%s float32 SUM across processes, transport %s, algorithm %s, %s\n",
              absl::GetFlag(FLAGS_collective).c_str(), transport.c_str(),
              absl::GetFlag(FLAGS_algorithm).c_str(),
              absl::GetFlag(FLAGS_in_place) ? "in place where supported" : "out of place");
  std::printf("%6s %10s %12s %10s %10s %10s %10s\n", "ranks", "bytes", "time_us", "algbw_GBps",
              "busbw_GBps", "memcpy_GBps", "vs_memcpy");
  std::fflush(stdout);
  int exit_code = 0;
  for (int n : rank_counts) {
    absl::StatusOr<std::string> kv_dir = io::MakeTempDir("cross_process_bench");
    if (!kv_dir.ok()) {
      std::fprintf(stderr, "cross_process_bench: %s\n", kv_dir.status().ToString().c_str());
      return 1;
    }
    const std::string dir = *kv_dir;
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        const absl::Status s = RunRank(r, n, dir, schedule, memcpy_gbps);
        if (!s.ok()) std::fprintf(stderr, "cross_process_bench: rank %d: %s\n", r, s.ToString().c_str());
        std::fflush(stdout);
        _exit(s.ok() ? 0 : 1);
      }
      pids.push_back(pid);
    }
    for (int r = 0; r < n; ++r) {
      int wstatus = 0;
      waitpid(pids[r], &wstatus, 0);
      if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) exit_code = 1;
    }
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') unlink(absl::StrCat(dir, "/", e->d_name).c_str());
      }
      closedir(d);
    }
    rmdir(dir.c_str());
  }
  return exit_code;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) { return strata::Main(argc, argv); }
