// Ring all-reduce over TcpTransport between processes on one host (ranks
// 1..n-1 are forked children of rank 0), 4 KiB to 64 MiB of floats: time per
// all-reduce and bus bandwidth (2(n-1)/n * bytes / time, as nccl-tests and
// the OpenMPI/Gloo peers report it).
//
//   bazel run //runtime/collective:tcp_transport_bench -- --ranks=2 --host=127.0.0.1
//   flags: --ranks=N --host=H --spin_us=U (I/O thread polling) --sockbuf=BYTES
//          --min_bytes=B --max_bytes=B --seconds=S (per size)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/file_io.h"
#include "graph/types.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/file_key_value_store.h"
#include "runtime/collective/transport/tcp_transport.h"

namespace strata {
namespace {

struct Flags {
  int ranks = 2;
  std::string host = "127.0.0.1";
  int64_t spin_us = 0;
  int64_t sockbuf = 0;
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 64 << 20;
  double seconds = 1.0;
};

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

absl::Status RunRank(int rank, const Flags& f, const std::string& dir) {
  FileKeyValueStore kv(dir);
  TcpTransportOptions o;
  o.host = f.host;
  o.key_prefix = "bench/tcp";
  o.poll_spin = absl::Microseconds(f.spin_us);
  o.socket_buffer_bytes = static_cast<int>(f.sockbuf);
  auto t = ConnectTcpTransport(rank, f.ranks, kv, o);
  if (!t.ok()) return t.status();
  if (rank == 0) {
    std::printf("tcp ring all-reduce, %d processes, host %s, spin %lld us, sockbuf %lld\n", f.ranks,
                f.host.c_str(), static_cast<long long>(f.spin_us), static_cast<long long>(f.sockbuf));
    std::printf("%12s %10s %12s %12s\n", "bytes", "iters", "us/op", "busbw GB/s");
  }
  for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
    AlgorithmParams p;
    p.type = CollectiveType::kAllReduce;
    p.rank = rank;
    p.size = f.ranks;
    p.dtype = DT_FLOAT;
    p.num_elements = bytes / 4;
    auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "ring", p);
    if (!alg.ok()) return alg.status();
    std::vector<float> in(p.num_elements, 1.0f), out(p.num_elements);
    // Every rank runs the same number of iterations: rank 0 picks it from a
    // timed warm-up and the count is the result of an all-reduce.
    for (int i = 0; i < 3; ++i) {
      if (absl::Status s = (*alg)->Run(**t, in.data(), out.data()); !s.ok()) return s;
    }
    const absl::Time w0 = absl::Now();
    if (absl::Status s = (*alg)->Run(**t, in.data(), out.data()); !s.ok()) return s;
    const double one = absl::ToDoubleSeconds(absl::Now() - w0);
    AlgorithmParams cp = p;
    cp.num_elements = 1;
    auto count_alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "ring", cp);
    float mine = rank == 0 ? static_cast<float>(std::max(5.0, std::min(1e5, f.seconds / one))) : 0.0f;
    float iters_f = 0;
    if (absl::Status s = (*count_alg)->Run(**t, &mine, &iters_f); !s.ok()) return s;
    const int iters = static_cast<int>(iters_f);
    const absl::Time t0 = absl::Now();
    for (int i = 0; i < iters; ++i) {
      if (absl::Status s = (*alg)->Run(**t, in.data(), out.data()); !s.ok()) return s;
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0) / iters;
    if (out[0] != static_cast<float>(f.ranks)) return absl::InternalError("wrong all-reduce result");
    if (rank == 0) {
      const double busbw = 2.0 * (f.ranks - 1) / f.ranks * bytes / secs / 1e9;
      std::printf("%12lld %10d %12.1f %12.3f\n", static_cast<long long>(bytes), iters, secs * 1e6, busbw);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    bool ok = true;
    if (ParseFlag(argv[i], "--ranks", &v)) {
      ok = absl::SimpleAtoi(v, &f.ranks) && f.ranks >= 1;
    } else if (ParseFlag(argv[i], "--host", &v)) {
      f.host = v;
    } else if (ParseFlag(argv[i], "--spin_us", &v)) {
      ok = absl::SimpleAtoi(v, &f.spin_us);
    } else if (ParseFlag(argv[i], "--sockbuf", &v)) {
      ok = absl::SimpleAtoi(v, &f.sockbuf);
    } else if (ParseFlag(argv[i], "--min_bytes", &v)) {
      ok = absl::SimpleAtoi(v, &f.min_bytes) && f.min_bytes >= 4;
    } else if (ParseFlag(argv[i], "--max_bytes", &v)) {
      ok = absl::SimpleAtoi(v, &f.max_bytes);
    } else if (ParseFlag(argv[i], "--seconds", &v)) {
      ok = absl::SimpleAtod(v, &f.seconds);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad flag %s\n", argv[i]);
      return 2;
    }
  }
  absl::StatusOr<std::string> kv_dir = io::MakeTempDir("tcp_bench_kv");
  if (!kv_dir.ok()) {
    std::fprintf(stderr, "tcp_transport_bench: %s\n", kv_dir.status().ToString().c_str());
    return 2;
  }
  const std::string dir = *kv_dir;
  std::vector<pid_t> kids;
  for (int r = 1; r < f.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const absl::Status s = RunRank(r, f, dir);
      if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      _exit(s.ok() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  const absl::Status s = RunRank(0, f, dir);
  if (!s.ok()) std::fprintf(stderr, "rank 0: %s\n", s.ToString().c_str());
  int rc = s.ok() ? 0 : 1;
  for (pid_t pid : kids) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  if (std::system(absl::StrCat("rm -rf ", dir).c_str()) != 0) rc = 1;
  return rc;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) { return strata::Main(argc, argv); }
