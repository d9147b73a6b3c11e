// Throughput of the optimizer kernels (not a test; run by hand):
//   bazel run //kernels/cpu:training_kernels_bench
// Reports bytes moved per second: GD touches var + grad (3 streams), Momentum
// var + accum + grad (5), Adam var + m + v + grad (7).
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/tensor.h"
#include "kernels/kernel_runner.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

class ResourceCpuDevice : public StandaloneCpuDevice {
 public:
  explicit ResourceCpuDevice(int threads) : StandaloneCpuDevice(threads), rm_("cpu") {}
  ResourceMgr* resource_manager() const override { return &rm_; }

 private:
  mutable ResourceMgr rm_;
};

Tensor MakeVar(DeviceBase* dev, const std::string& name, int64_t n) {
  auto h = RunKernel(dev, "VarHandleOp", {},
                     {{"shared_name", MakeAttr(name)},
                      {"dtype", MakeAttr(DT_FLOAT)},
                      {"shape", MakeAttr(PartialTensorShape({n}))}});
  Tensor v(DT_FLOAT, TensorShape{n});
  for (int64_t i = 0; i < n; ++i) v.data<float>()[i] = 0.001f * (i % 1000);
  (void)RunKernel(dev, "AssignVariableOp", {(*h)[0], v});
  return (*h)[0];
}

void BM_Apply(benchmark::State& state, const char* op, int num_vars, int streams) {
  const int64_t n = state.range(0);
  ResourceCpuDevice dev(static_cast<int>(state.range(1)));
  std::vector<Tensor> inputs;
  for (int i = 0; i < num_vars; ++i) inputs.push_back(MakeVar(&dev, "v" + std::to_string(i), n));
  Tensor grad(DT_FLOAT, TensorShape{n});
  for (int64_t i = 0; i < n; ++i) grad.data<float>()[i] = 0.01f;
  const std::string o = op;
  if (o == "ResourceApplyGradientDescent") {
    inputs.push_back(Tensor::Scalar<float>(0.01f));
    inputs.push_back(grad);
  } else if (o == "ResourceApplyMomentum") {
    inputs.push_back(Tensor::Scalar<float>(0.01f));
    inputs.push_back(grad);
    inputs.push_back(Tensor::Scalar<float>(0.9f));
  } else {
    for (float s : {0.9f, 0.999f, 0.001f, 0.9f, 0.999f, 1e-7f}) inputs.push_back(Tensor::Scalar<float>(s));
    inputs.push_back(grad);
  }
  for (auto _ : state) {
    auto r = RunKernel(&dev, op, inputs);
    if (!r.ok()) state.SkipWithError(std::string(r.status().message()).c_str());
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float) * streams);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1 << 12, 1 << 16, 1 << 20, 1 << 24}) {
    for (int threads : {1, 2}) b->Args({n, threads});
  }
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Apply, gd, "ResourceApplyGradientDescent", 1, 3)->Apply(Args);
BENCHMARK_CAPTURE(BM_Apply, momentum, "ResourceApplyMomentum", 2, 5)->Apply(Args);
BENCHMARK_CAPTURE(BM_Apply, adam, "ResourceApplyAdam", 3, 7)->Apply(Args);

}  // namespace
}  // namespace strata
