// Throughput of the CPU convolution kernels (Conv2D and its two gradients)
// and MaxPool on layer shapes of a small CNN, on a StandaloneCpuDevice with 1 or 2
// intra-op threads. Convolutions report GFLOP/s (2 * multiply-adds of the
// direct convolution); each iteration goes through RunKernel, whose fixed
// cost (a few microseconds) is negligible at these sizes.
//
//   bazel run //kernels/cpu:conv_bench -- --benchmark_filter=Conv2D/
//
// Args: {batch, size (rows = cols), in_depth, out_depth, stride, threads};
// 3x3 filters, SAME padding.

#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

Tensor Random(const TensorShape& s, unsigned seed) {
  Tensor t(DT_FLOAT, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

Tensor Sizes(const TensorShape& s) {
  std::vector<int32_t> v(s.dim_sizes().begin(), s.dim_sizes().end());
  return Tensor::FromVector<int32_t>(v);
}

void BM_Conv(benchmark::State& state, const std::string& op) {
  const int64_t n = state.range(0), size = state.range(1), ic = state.range(2),
                oc = state.range(3), stride = state.range(4);
  StandaloneCpuDevice dev(static_cast<int>(state.range(5)));
  const int64_t out = (size + stride - 1) / stride;
  const TensorShape in_shape{n, size, size, ic}, f_shape{3, 3, ic, oc}, out_shape{n, out, out, oc};
  std::vector<Tensor> inputs;
  if (op == "Conv2D") inputs = {Random(in_shape, 1), Random(f_shape, 2)};
  if (op == "Conv2DBackpropInput") inputs = {Sizes(in_shape), Random(f_shape, 2), Random(out_shape, 3)};
  if (op == "Conv2DBackpropFilter") inputs = {Random(in_shape, 1), Sizes(f_shape), Random(out_shape, 3)};
  const std::map<std::string, AttrValue> attrs = {
      {"strides", MakeAttr(std::vector<int64_t>{1, stride, stride, 1})},
      {"padding", MakeAttr("SAME")}};
  for (auto _ : state) {
    auto r = RunKernel(&dev, op, inputs, attrs);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r->front().raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * out * out * oc * 9 * ic * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Conv2D(benchmark::State& s) { BM_Conv(s, "Conv2D"); }
void BM_Conv2DBackpropInput(benchmark::State& s) { BM_Conv(s, "Conv2DBackpropInput"); }
void BM_Conv2DBackpropFilter(benchmark::State& s) { BM_Conv(s, "Conv2DBackpropFilter"); }

void ConvArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({32, 28, 1, 32, 1, threads});   // first layer of an MNIST CNN
    b->Args({32, 28, 32, 64, 1, threads});  // second layer
    b->Args({32, 14, 64, 64, 2, threads});  // strided
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Conv2D)->Apply(ConvArgs);
BENCHMARK(BM_Conv2DBackpropInput)->Apply(ConvArgs);
BENCHMARK(BM_Conv2DBackpropFilter)->Apply(ConvArgs);

void BM_MaxPool(benchmark::State& state) {
  StandaloneCpuDevice dev(static_cast<int>(state.range(0)));
  const Tensor x = Random(TensorShape{32, 28, 28, 64}, 1);
  const std::map<std::string, AttrValue> attrs = {
      {"ksize", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})},
      {"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})},
      {"padding", MakeAttr("VALID")}};
  for (auto _ : state) {
    auto r = RunKernel(&dev, "MaxPool", {x}, attrs);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r->front().raw_data());
  }
  state.SetBytesProcessed(state.iterations() * x.TotalBytes());
}
BENCHMARK(BM_MaxPool)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata
