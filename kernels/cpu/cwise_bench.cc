// Per-call cost of elementwise kernels on tiny tensors (what a chain of many
// small ops pays per node) and their throughput on large ones. Each kernel
// is made once; the loop makes a fresh context and calls Compute, as the
// executor does, with the inputs held only by the context so that the
// output may reuse an input's buffer.
//
//   bazel run //kernels/cpu:cwise_bench

#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "kernels/kernel_registry.h"
#include "kernels/kernel_runner.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

// chain: each step's output is the next step's input 0 (z = z op y), as in
// a chain of small ops where nobody else holds the intermediate, so the
// kernel writes in place instead of allocating.
void RunOp(benchmark::State& state, const std::string& op, const TensorShape& xs,
           const TensorShape& ys, int threads, bool chain = false) {
  StandaloneCpuDevice dev(threads);
  ::tensorflow::NodeDef def;
  def.set_name("n");
  def.set_op(op);
  (*def.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
  const OpDef* op_def = OpRegistry::Global()->LookUp(op).value();
  std::vector<DataType> in_types, out_types;
  if (!ValidateAndCompleteAttrs(*op_def, &def).ok() ||
      !InOutTypesForNode(def, *op_def, &in_types, &out_types).ok()) {
    state.SkipWithError("bad node");
    return;
  }
  auto kernel = CreateOpKernel(&dev, def, *op_def, in_types, out_types);
  if (!kernel.ok()) {
    state.SkipWithError("no kernel");
    return;
  }
  Tensor x(dev.allocator(), DT_FLOAT, xs), y(dev.allocator(), DT_FLOAT, ys);
  for (float& v : x.span<float>()) v = 1.5f;
  for (float& v : y.span<float>()) v = 0.5f;
  std::vector<Tensor> inputs(2);
  OpKernelContext::Params p;
  p.op_kernel = kernel->get();
  p.device = &dev;
  p.inputs = inputs.data();
  inputs[0] = x.DeepCopy();
  inputs[1] = y;
  for (auto _ : state) {
    if (!chain) {
      // Fresh inputs each step (copies; the originals keep a reference, so
      // no input can be forwarded and the output is allocated).
      inputs[0] = x;
      inputs[1] = y;
    }
    Tensor z;
    {
      OpKernelContext ctx(p);
      absl::Status s = (*kernel)->Compute(ctx);
      if (!s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        return;
      }
      z = std::move(*ctx.mutable_output(0));
    }
    benchmark::DoNotOptimize(z.raw_data());
    if (chain) inputs[0] = std::move(z);
  }
  state.SetItemsProcessed(state.iterations() * std::max(xs.num_elements(), ys.num_elements()));
}

void BM_AddV2_Scalar(benchmark::State& s) { RunOp(s, "AddV2", TensorShape{}, TensorShape{}, 1); }
void BM_AddV2_ScalarChain(benchmark::State& s) {
  RunOp(s, "AddV2", TensorShape{}, TensorShape{}, 1, /*chain=*/true);
}
void BM_AddV2_Vec8(benchmark::State& s) { RunOp(s, "AddV2", TensorShape{8}, TensorShape{8}, 1); }
void BM_Mul_Vec8TimesScalar(benchmark::State& s) {
  RunOp(s, "Mul", TensorShape{8}, TensorShape{}, 1);
}
void BM_AddV2_BiasBroadcast_64x10(benchmark::State& s) {
  RunOp(s, "AddV2", TensorShape{64, 10}, TensorShape{10}, 1);
}
void BM_AddV2_1M(benchmark::State& s) {
  RunOp(s, "AddV2", TensorShape{1 << 20}, TensorShape{1 << 20}, static_cast<int>(s.range(0)));
}

BENCHMARK(BM_AddV2_Scalar);
BENCHMARK(BM_AddV2_ScalarChain);
BENCHMARK(BM_AddV2_Vec8);
BENCHMARK(BM_Mul_Vec8TimesScalar);
BENCHMARK(BM_AddV2_BiasBroadcast_64x10);
BENCHMARK(BM_AddV2_1M)->Arg(1)->Arg(2)->UseRealTime();

// The transformer's shapes ([batch * seq, width] activations, 1024 x 128):
// same shapes, a per-row scale ([rows, 1], LayerNormalization's) and a
// per-column one ([width], gamma).
void BM_Mul_Rows1024x128(benchmark::State& s) {
  RunOp(s, "Mul", TensorShape{1024, 128}, TensorShape{1024, 128}, static_cast<int>(s.range(0)));
}
void BM_Mul_Rows1024x128_ByRow(benchmark::State& s) {
  RunOp(s, "Mul", TensorShape{1024, 128}, TensorShape{1024, 1}, static_cast<int>(s.range(0)));
}
void BM_Mul_Rows1024x128_ByColumn(benchmark::State& s) {
  RunOp(s, "Mul", TensorShape{1024, 128}, TensorShape{128}, static_cast<int>(s.range(0)));
}
BENCHMARK(BM_Mul_Rows1024x128)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_Mul_Rows1024x128_ByRow)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_Mul_Rows1024x128_ByColumn)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace strata
