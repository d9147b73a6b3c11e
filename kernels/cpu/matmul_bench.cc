// MatMul throughput: the Strata kernel (made once, Compute called in the
// loop, on a StandaloneCpuDevice with 1 or 2 intra-op threads) against Eigen's
// tensor contraction and Matrix product called directly, and OpenBLAS
// cblas_sgemm, on the same row-major float shapes. Reported as GFLOP/s
// (2*M*N*K per product).
//
//   bazel run //kernels/cpu:matmul_bench -- --benchmark_filter=512
//
// Args: {M=N=K, threads}. Eigen's Matrix product is single-threaded in this
// build (EIGEN_DONT_PARALLELIZE; its only parallel path is OpenMP), so it is
// run with 1 thread only.

#include <cblas.h>

#include <memory>
#include <random>
#include <vector>

#include "Eigen/Core"
#include "benchmark/benchmark.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/kernel_runner.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

Tensor RandomMatrix(int64_t rows, int64_t cols, unsigned seed) {
  Tensor t(DT_FLOAT, TensorShape{rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

void SetFlops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The Strata kernel on a [m, k] x [k, n] product (a stored transposed when
// ta, b when tb), as the executor calls it.
void RunStrataMatMul(benchmark::State& state, int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads) {
  StandaloneCpuDevice dev(threads);
  ::tensorflow::NodeDef def;
  def.set_name("matmul");
  def.set_op("MatMul");
  (*def.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
  (*def.mutable_attr())["transpose_a"] = MakeAttr(ta);
  (*def.mutable_attr())["transpose_b"] = MakeAttr(tb);
  const OpDef* op = OpRegistry::Global()->LookUp("MatMul").value();
  if (!ValidateAndCompleteAttrs(*op, &def).ok()) {
    state.SkipWithError("bad attrs");
    return;
  }
  std::vector<DataType> in_types, out_types;
  if (!InOutTypesForNode(def, *op, &in_types, &out_types).ok()) {
    state.SkipWithError("bad types");
    return;
  }
  auto kernel = CreateOpKernel(&dev, def, *op, in_types, out_types);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  std::vector<Tensor> inputs = {ta ? RandomMatrix(k, m, 1) : RandomMatrix(m, k, 1),
                                tb ? RandomMatrix(n, k, 2) : RandomMatrix(k, n, 2)};
  OpKernelContext::Params p;
  p.op_kernel = kernel->get();
  p.device = &dev;
  p.inputs = inputs.data();
  for (auto _ : state) {
    OpKernelContext ctx(p);
    absl::Status s = (*kernel)->Compute(ctx);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(ctx.mutable_output(0)->raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_StrataMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunStrataMatMul(state, n, n, n, false, false, static_cast<int>(state.range(1)));
}

// The transformer LM's products (tools/lm_bench: 1024 tokens of width 128,
// feed-forward 512): Args {m, k, n, transpose_a, transpose_b, threads}.
void BM_StrataMatMulShape(benchmark::State& state) {
  RunStrataMatMul(state, state.range(0), state.range(1), state.range(2), state.range(3) != 0, state.range(4) != 0,
                  static_cast<int>(state.range(5)));
}

void BM_OpenBlasSgemmShape(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  openblas_set_num_threads(static_cast<int>(state.range(5)));
  Tensor a = ta ? RandomMatrix(k, m, 1) : RandomMatrix(m, k, 1), b = tb ? RandomMatrix(n, k, 2) : RandomMatrix(k, n, 2);
  Tensor c(DT_FLOAT, TensorShape{m, n});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                a.data<float>(), ta ? m : k, b.data<float>(), tb ? k : n, 0.0f, c.data<float>(), n);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void LmShapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) {
    b->Args({1024, 128, 512, 0, 0, t});  // feed-forward up
    b->Args({1024, 512, 128, 0, 0, t});  // feed-forward down
    b->Args({1024, 128, 128, 0, 0, t});  // attention projections
    b->Args({1024, 512, 128, 0, 1, t});  // dx of up: dy w^T
    b->Args({128, 1024, 512, 1, 0, t});  // dw of up: x^T dy
    b->Args({512, 1024, 128, 1, 0, t});  // dw of down
  }
  b->UseRealTime();
}

void BM_EigenContraction(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  Tensor a = RandomMatrix(n, n, 1), b = RandomMatrix(n, n, 2), c(DT_FLOAT, TensorShape{n, n});
  Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1> dims = {
      Eigen::IndexPair<Eigen::DenseIndex>(1, 0)};
  for (auto _ : state) {
    Matrix<float>(c).device(device) = Matrix<float>(a).contract(Matrix<float>(b), dims);
    benchmark::DoNotOptimize(c.raw_data());
  }
  SetFlops(state, n);
}

void BM_EigenMatrixProduct(benchmark::State& state) {
  const int64_t n = state.range(0);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Tensor a = RandomMatrix(n, n, 1), b = RandomMatrix(n, n, 2), c(DT_FLOAT, TensorShape{n, n});
  Eigen::Map<const Mat> am(a.data<float>(), n, n), bm(b.data<float>(), n, n);
  Eigen::Map<Mat> cm(c.data<float>(), n, n);
  for (auto _ : state) {
    cm.noalias() = am * bm;
    benchmark::DoNotOptimize(c.raw_data());
  }
  SetFlops(state, n);
}

void BM_OpenBlasSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  Tensor a = RandomMatrix(n, n, 1), b = RandomMatrix(n, n, 2), c(DT_FLOAT, TensorShape{n, n});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
    benchmark::DoNotOptimize(c.raw_data());
  }
  SetFlops(state, n);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int n : {64, 256, 512, 1024}) {
    for (int t : {1, 2}) b->Args({n, t});
  }
  b->UseRealTime();
}

BENCHMARK(BM_StrataMatMul)->Apply(Args);
BENCHMARK(BM_StrataMatMulShape)->Apply(LmShapes);
BENCHMARK(BM_OpenBlasSgemmShape)->Apply(LmShapes);
BENCHMARK(BM_EigenContraction)->Apply(Args);
BENCHMARK(BM_OpenBlasSgemm)->Apply(Args);
BENCHMARK(BM_EigenMatrixProduct)->Args({64, 1})->Args({256, 1})->Args({512, 1})->Args({1024, 1})
    ->UseRealTime();

}  // namespace
}  // namespace strata
