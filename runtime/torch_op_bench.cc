// libtorch's per-op cost on the shapes of runtime/executor_bench: 1,000
// scalar adds in a chain (each on the previous result) and 1,000 independent
// scalar adds, eager, in inference mode (no autograd bookkeeping). The
// "per_node" counter is the reference the executor's per-node overhead is
// measured against.
//
//   bazel run -c opt //runtime:torch_op_bench
#include <vector>

#include "benchmark/benchmark.h"
#include "torch/torch.h"

namespace {

constexpr int kNodes = 1000;

void SetCounters(benchmark::State& state) {
  state.counters["per_node"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kNodes,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_TorchChainAdd(benchmark::State& state) {
  torch::set_num_threads(1);
  c10::InferenceMode guard;
  torch::Tensor x = torch::ones({}, torch::kFloat);
  torch::Tensor one = torch::ones({}, torch::kFloat);
  for (auto _ : state) {
    torch::Tensor y = x;
    for (int i = 0; i < kNodes; ++i) y = torch::add(y, one);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  SetCounters(state);
}
BENCHMARK(BM_TorchChainAdd);

void BM_TorchWideAdd(benchmark::State& state) {
  torch::set_num_threads(1);
  c10::InferenceMode guard;
  torch::Tensor x = torch::ones({}, torch::kFloat);
  torch::Tensor one = torch::ones({}, torch::kFloat);
  std::vector<torch::Tensor> outs(kNodes);
  for (auto _ : state) {
    for (int i = 0; i < kNodes; ++i) outs[i] = torch::add(x, one);
    benchmark::DoNotOptimize(outs.back().data_ptr());
  }
  SetCounters(state);
}
BENCHMARK(BM_TorchWideAdd);

// The cheapest torch op: a view (alias), closest to Identity.
void BM_TorchChainAlias(benchmark::State& state) {
  c10::InferenceMode guard;
  torch::Tensor x = torch::ones({}, torch::kFloat);
  for (auto _ : state) {
    torch::Tensor y = x;
    for (int i = 0; i < kNodes; ++i) y = y.alias();
    benchmark::DoNotOptimize(y.data_ptr());
  }
  SetCounters(state);
}
BENCHMARK(BM_TorchChainAlias);

}  // namespace
