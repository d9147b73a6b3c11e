// Gloo C++ peer of Strata's cross-process all-reduce benchmark.
//
// gloo::allreduce (its default ring algorithm), float32 SUM, separate input
// and output buffers, over a TCP device bound to --host (127.0.0.1 unless
// given: each rank's own address when the ranks are hosts), with a FileStore
// rendezvous in a directory every rank shares. Sizes, iterations and timing
// are those of allreduce_mpi.c (warm-up, barrier, timed loop; the slowest
// rank's mean); rank 0 prints one line per size:
//
//   RESULT impl=gloo ranks=2 bytes=4096 time_us=350.0 busbw_gbps=0.012
//
// Each rank is its own process, started by tools/bench/allreduce_peers.py:
//
//   g++ -O2 -std=c++17 -o /tmp/allreduce_gloo tools/bench/allreduce_gloo.cc -lgloo -pthread
//   for r in 0 1; do /tmp/allreduce_gloo --rank=$r --size=2 --store=/tmp/gs & done; wait
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string FlagString(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return fallback;
}

long FlagValue(int argc, char** argv, const std::string& name, long fallback) {
  std::string s = FlagString(argc, argv, name, "");
  return s.empty() ? fallback : std::strtol(s.c_str(), nullptr, 10);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void AllReduce(const std::shared_ptr<gloo::Context>& context, const float* in, float* out,
               size_t count, gloo::AllreduceOptions::Func fn) {
  gloo::AllreduceOptions opts(context);
  opts.setInput(const_cast<float*>(in), count);
  opts.setOutput(out, count);
  opts.setReduceFunction(fn);
  gloo::allreduce(opts);
}

int Run(int argc, char** argv) {
  const int rank = static_cast<int>(FlagValue(argc, argv, "--rank", -1));
  const int size = static_cast<int>(FlagValue(argc, argv, "--size", -1));
  const std::string store_dir = FlagString(argc, argv, "--store", "");
  const std::string impl = FlagString(argc, argv, "--impl", "gloo");
  const std::string host = FlagString(argc, argv, "--host", "127.0.0.1");
  const long min_bytes = FlagValue(argc, argv, "--min_bytes", 4096);
  const long max_bytes = FlagValue(argc, argv, "--max_bytes", 64L << 20);
  const long budget = FlagValue(argc, argv, "--budget_bytes", 1L << 30);
  const long min_iters = FlagValue(argc, argv, "--min_iters", 10);
  const long max_iters = FlagValue(argc, argv, "--max_iters", 2000);
  if (size < 1 || rank < 0 || rank >= size || store_dir.empty()) {
    std::fprintf(stderr, "allreduce_gloo: need --rank=R --size=N (0 <= R < N) and --store=DIR\n");
    return 2;
  }
  if (min_bytes < 4 || max_bytes < min_bytes || min_iters < 1 || max_iters < min_iters) {
    std::fprintf(stderr, "allreduce_gloo: bad size or iteration flags\n");
    return 2;
  }

  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::rendezvous::PrefixStore store("allreduce_gloo", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(60));
  context->connectFullMesh(store, device);

  const gloo::AllreduceOptions::Func sum =
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>);
  const gloo::AllreduceOptions::Func max =
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<float>);
  const size_t max_count = static_cast<size_t>(max_bytes) / sizeof(float);
  std::vector<float> in(max_count, static_cast<float>(rank + 1)), out(max_count, 0.0f);
  const float expected = static_cast<float>(size) * (size + 1) / 2;

  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = static_cast<size_t>(bytes) / sizeof(float);
    const long iters = std::clamp(budget / bytes, min_iters, max_iters);
    const long warmup = std::max(2L, iters / 10);
    for (long i = 0; i < warmup; ++i) AllReduce(context, in.data(), out.data(), count, sum);
    // A wrong sum would make every figure meaningless: check the ends.
    if (out[0] != expected || out[count - 1] != expected) {
      std::fprintf(stderr, "allreduce_gloo: rank %d got %g, want %g at %ld bytes\n", rank, out[0],
                   expected, bytes);
      return 1;
    }
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    const double t0 = Now();
    for (long i = 0; i < iters; ++i) AllReduce(context, in.data(), out.data(), count, sum);
    float mean = static_cast<float>((Now() - t0) / iters), slowest = 0;
    AllReduce(context, &mean, &slowest, 1, max);
    if (rank == 0) {
      const double busbw = bytes / slowest * 2.0 * (size - 1) / size / 1e9;
      std::printf("RESULT impl=%s ranks=%d bytes=%ld time_us=%.2f busbw_gbps=%.3f\n",
                  impl.c_str(), size, bytes, slowest * 1e6, busbw);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Gloo reports failures (a lost peer, a timeout) by throwing gloo::Exception.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_gloo: %s\n", e.what());
    return 1;
  }
}
