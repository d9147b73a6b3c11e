// In-process all-reduce through LocalCollectiveExecutor: one benchmark thread
// per rank (2 and 4), float32 tensors of 4 KiB .. 64 MiB, algorithms direct
// (what hint auto picks in process), ring and reduce_to_one. Reports NCCL's
// figures: algbw = bytes / time and busbw = algbw * 2(n-1)/n (what each
// rank's links carry, comparable across rank counts); the 4 KiB rows' time is
// the latency. In the same run it measures this machine's memcpy bandwidth
// for the same working-set size (bytes / time of a memcpy of `bytes` between
// two preallocated, pre-touched buffers, median of 9 samples, once per run) and reports
// busbw / memcpy as `vs_memcpy`.
//
// Each rank uses its own recycling device allocator (as a virtual CPU device
// does) and keeps its input across iterations; outputs are dropped at the end
// of each iteration, so their buffers are recycled, not page-faulted afresh.
// Ranks wait for their result in Execute (blocking, as a kernel's caller
// would), not by polling: polling waiters (sched_yield up to 30-2000 us
// before sleeping) measured slower on the shared 2-core machine, where they
// take cores from the ranks doing the reduction.
//
// BM_FlightRecorder: the flight recorder's cost per collective.
//
//   bazel run -c opt //runtime/collective:collective_bench --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "benchmark/benchmark.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "kernels/collective.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/collective/local_collective_executor.h"

namespace strata {
namespace {

constexpr const char* kAlgorithms[] = {"direct", "ring", "reduce_to_one"};

LocalCollectiveExecutor* Executor() {
  static LocalCollectiveExecutor* ce = new LocalCollectiveExecutor();
  return ce;
}

// Rank r's device allocator (recycles buffers >= 64 KiB).
Allocator* DeviceAllocator(int rank) {
  static Allocator* const* allocators = [] {
    auto* a = new Allocator*[8];
    for (int r = 0; r < 8; ++r) a[r] = NewPersistentCpuAllocator("bench_CPU:" + std::to_string(r));
    return a;
  }();
  return allocators[rank];
}

// memcpy bandwidth (GB/s) for `bytes`, measured once per benchmark run
// (`run`: the same on every rank of it), right before the ranks start and
// with no collective running (they wait on the lock meanwhile), so both
// figures see the same load on the machine.
double MemcpyGBps(int64_t bytes, int64_t run) {
  static Mutex mu;
  static std::map<std::pair<int64_t, int64_t>, double>* cache =
      new std::map<std::pair<int64_t, int64_t>, double>;
  MutexLock l(&mu);
  auto it = cache->find({bytes, run});
  if (it != cache->end()) return it->second;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  // Each sample copies >= 32 MiB in all, so small sizes are timed in bulk.
  const int64_t copies = std::max<int64_t>(1, (int64_t{32} << 20) / bytes);
  std::vector<double> samples;
  for (int s = 0; s < 9; ++s) {
    const absl::Time start = absl::Now();
    for (int64_t c = 0; c < copies; ++c) {
      src[c % bytes] = static_cast<char>(c);  // not hoistable
      std::memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
    }
    samples.push_back(static_cast<double>(bytes) * copies /
                      absl::ToDoubleSeconds(absl::Now() - start) / 1e9);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return (*cache)[{bytes, run}] = samples[samples.size() / 2];
}

void BM_AllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const char* hint = kAlgorithms[state.range(1)];
  const int n = state.threads();
  const int rank = state.thread_index();
  Allocator* allocator = DeviceAllocator(rank);
  auto input_or = Tensor::Allocate(allocator, DT_FLOAT, TensorShape{bytes / 4});
  if (!input_or.ok()) {
    state.SkipWithError(std::string(input_or.status().message()).c_str());
    return;
  }
  Tensor input = *std::move(input_or);
  for (int64_t i = 0; i < input.NumElements(); ++i) input.data<float>()[i] = 1.0f;
  CollectiveParams p;
  p.type = CollectiveType::kAllReduce;
  p.group_size = n;
  // A group per (size, algorithm, thread count) run, so runs never share instances.
  p.group_key = static_cast<int>(state.range(0) / 4096 * 16 + state.range(1) * 4 + n);
  p.instance_key = 1;
  p.device = "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(rank);
  p.dtype = DT_FLOAT;
  p.shape = input.shape();
  p.communication_hint = hint;
  // Steps keep increasing across the library's repeated calls of this
  // function, so an instance key is never reused.
  static std::atomic<int64_t> step_base{0};
  const int64_t run = step_base.load();
  int64_t step = run * 1000000;
  const double memcpy_gbps = MemcpyGBps(bytes, run);
  // Wall time per rank, measured here: the library's rate counters divide by
  // CPU time, which blocked ranks do not spend.
  const absl::Time start = absl::Now();
  for (auto _ : state) {
    p.step_id = ++step;
    auto out = Executor()->Execute(p, input, allocator, nullptr);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out->raw_data());
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (rank == 0) step_base.fetch_add(1);
  const double algbw = static_cast<double>(bytes) * state.iterations() / seconds / 1e9;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  state.counters["algbw_GBps"] = benchmark::Counter(algbw, benchmark::Counter::kAvgThreads);
  state.counters["busbw_GBps"] = benchmark::Counter(busbw, benchmark::Counter::kAvgThreads);
  state.counters["memcpy_GBps"] = benchmark::Counter(memcpy_gbps, benchmark::Counter::kAvgThreads);
  state.counters["vs_memcpy"] =
      benchmark::Counter(busbw / memcpy_gbps, benchmark::Counter::kAvgThreads);
  state.counters["us_per_op"] =
      benchmark::Counter(seconds * 1e6 / state.iterations(), benchmark::Counter::kAvgThreads);
}

BENCHMARK(BM_AllReduce)
    ->ArgNames({"bytes", "alg"})  // alg: 0 direct (auto), 1 ring, 2 reduce_to_one
    ->ArgsProduct({{4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}, {0, 1, 2}})
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime()
    ->MinTime(0.3);

// The flight recorder's cost per cross-worker collective (Begin + End, the
// strings a real all-reduce records), from 1 and 2 threads at once: what
// keeping it always on adds to every collective.
void BM_FlightRecorder(benchmark::State& state) {
  static FlightRecorder* recorder = new FlightRecorder();
  const absl::Status ok;
  for (auto _ : state) {
    uint64_t seq =
        recorder->Begin({"all-reduce", 1, 3, 17, "replica_0/allreduce/bucket_1/CollectiveReduceV2",
                         "float", "[512,512]", 1 << 20});
    recorder->End(seq, ok);
  }
}
BENCHMARK(BM_FlightRecorder)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace strata
