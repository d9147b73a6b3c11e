// In-process all-reduce through LocalCollectiveExecutor: one benchmark thread
// per rank, float32 tensors of 4 KiB .. 64 MiB, ring and reduce_to_one.
// Reports NCCL's figures: algbw = bytes / time and busbw = algbw * 2(n-1)/n
// (what each rank's links carry, comparable across rank counts); the 4 KiB
// rows' time is the latency.
//
//   bazel run -c opt //runtime/collective:collective_bench -- --benchmark_filter=AllReduce
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "kernels/collective.h"
#include "runtime/collective/local_collective_executor.h"

namespace strata {
namespace {

LocalCollectiveExecutor* Executor() {
  static LocalCollectiveExecutor* ce = new LocalCollectiveExecutor();
  return ce;
}

void BM_AllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const char* hint = state.range(1) == 0 ? "ring" : "reduce_to_one";
  const int n = state.threads();
  const int rank = state.thread_index();
  Tensor input(DT_FLOAT, TensorShape{bytes / 4});
  for (int64_t i = 0; i < input.NumElements(); ++i) input.data<float>()[i] = 1.0f;
  CollectiveParams p;
  p.type = CollectiveType::kAllReduce;
  p.group_size = n;
  // A group per (size, hint, thread count) run, so runs never share instances.
  p.group_key = static_cast<int>(state.range(0) / 4096 * 8 + state.range(1) * 4 + n);
  p.instance_key = 1;
  p.device = "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(rank);
  p.dtype = DT_FLOAT;
  p.shape = input.shape();
  p.communication_hint = hint;
  int64_t step = 0;
  // Wall time per rank, measured here: the library's rate counters divide by
  // CPU time, which blocked ranks do not spend.
  const absl::Time start = absl::Now();
  for (auto _ : state) {
    p.step_id = ++step;
    auto out = Executor()->Execute(p, input, CpuAllocator(), nullptr);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out->raw_data());
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double algbw = static_cast<double>(bytes) * state.iterations() / seconds / 1e9;
  state.counters["algbw_GBps"] = benchmark::Counter(algbw, benchmark::Counter::kAvgThreads);
  state.counters["busbw_GBps"] = benchmark::Counter(algbw * 2.0 * (n - 1) / n, benchmark::Counter::kAvgThreads);
  state.counters["us_per_op"] =
      benchmark::Counter(seconds * 1e6 / state.iterations(), benchmark::Counter::kAvgThreads);
}

BENCHMARK(BM_AllReduce)
    ->ArgNames({"bytes", "reduce_to_one"})
    ->ArgsProduct({{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}, {0, 1}})
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace
}  // namespace strata
