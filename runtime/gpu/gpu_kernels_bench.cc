// MatMul on the GPU (the registered kernel, i.e. cublasGemmEx) on the shapes
// of one training step of the 784-512-512-10 MLP at batch 256: the forward
// products, and the backward ones (dW = xᵀ·dy, dx = dy·Wᵀ). Reports TFLOP/s
// (2mnk per product) for float, half and bfloat16, timed with CUDA events
// around 50 back-to-back launches (manual time). Exits with a message where
// there is no GPU.
//
// On the device sessions use (GpuDevice: its caching allocator, its cuBLAS
// handle and workspace), not kernels/gpu/testing's TestGpuDevice, whose
// allocator calls cudaMalloc and cudaFree per tensor: cudaFree waits for the
// device, so each launch would wait for the one before.
//
//   bazel run --config=cuda //runtime/gpu:gpu_kernels_bench
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "runtime/gpu/gpu_device.h"
#include "runtime/gpu/gpu_info.h"

namespace strata {
namespace {

GpuDevice* Device() {
  static GpuDevice* const d = [] {
    auto r = GpuDevice::Create(DeviceName::Full("localhost", 0, 0, kDeviceGpu, 0), GpuDevice::Options{});
    if (!r.ok()) {
      std::fprintf(stderr, "gpu_kernels_bench: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
    return r->release();
  }();
  return d;
}

constexpr int kLaunchesPerIteration = 50;

// args: m, k, n, transpose_a, transpose_b, dtype.
void BM_MatMul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const DataType dt = static_cast<DataType>(state.range(5));
  GpuDevice* dev = Device();
  ::tensorflow::NodeDef node;
  node.set_name("bench_matmul");
  node.set_op("MatMul");
  (*node.mutable_attr())["T"] = MakeAttr(dt);
  (*node.mutable_attr())["transpose_a"] = MakeAttr(ta);
  (*node.mutable_attr())["transpose_b"] = MakeAttr(tb);
  const OpDef* def = OpRegistry::Global()->LookUp("MatMul").value();
  if (!ValidateAndCompleteAttrs(*def, &node).ok()) {
    state.SkipWithError("bad attrs");
    return;
  }
  const std::vector<DataType> in_types = {dt, dt}, out_types = {dt};
  auto kernel = CreateOpKernel(dev, node, *def, in_types, out_types);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  // Device inputs; their values do not matter for timing (zeros).
  Tensor inputs[2] = {Tensor(dev->allocator(), dt, ta ? TensorShape{k, m} : TensorShape{m, k}),
                      Tensor(dev->allocator(), dt, tb ? TensorShape{n, k} : TensorShape{k, n})};
  cudaStream_t stream = static_cast<cudaStream_t>(dev->gpu_context()->stream);
  for (Tensor& t : inputs) cudaMemsetAsync(t.raw_data(), 0, t.TotalBytes(), stream);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  OpKernelContext::Params p;
  p.op_kernel = kernel->get();
  p.device = dev;
  p.inputs = inputs;
  // Warm up outside the timing, as the torch side does: the first call of a
  // cuBLAS kernel loads its module (CUDA loads modules lazily).
  for (int i = 0; i < 5; ++i) {
    OpKernelContext ctx(p);
    if (absl::Status s = (*kernel)->Compute(ctx); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      return;
    }
  }
  cudaStreamSynchronize(stream);
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < kLaunchesPerIteration; ++i) {
      OpKernelContext ctx(p);
      absl::Status s = (*kernel)->Compute(ctx);
      if (!s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        break;
      }
    }
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetItemsProcessed(state.iterations() * kLaunchesPerIteration);
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * m * n * k * kLaunchesPerIteration * state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(absl::StrCat(DataTypeString(dt), " [", m, "x", k, "]x[", k, "x", n, "]", ta ? " ta" : "",
                              tb ? " tb" : ""));
}

void MlpShapes(benchmark::internal::Benchmark* b) {
  for (int dt : {DT_FLOAT, DT_HALF, DT_BFLOAT16}) {
    // Forward: x·W per layer.
    b->Args({256, 784, 512, 0, 0, dt});
    b->Args({256, 512, 512, 0, 0, dt});
    b->Args({256, 512, 10, 0, 0, dt});
    // Backward: dW = xᵀ·dy and dx = dy·Wᵀ.
    b->Args({784, 256, 512, 1, 0, dt});
    b->Args({512, 256, 512, 1, 0, dt});
    b->Args({256, 512, 512, 0, 1, dt});
    b->Args({256, 10, 512, 0, 1, dt});
    // A large square product for the device's peak.
    b->Args({4096, 4096, 4096, 0, 0, dt});
  }
}

BENCHMARK(BM_MatMul)->Apply(MlpShapes)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  const strata::GpuCount gpus = strata::CountGpus();
  if (gpus.count == 0) {
    std::printf("gpu_kernels_bench: no GPU (%s); nothing to measure\n", gpus.why_none.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
