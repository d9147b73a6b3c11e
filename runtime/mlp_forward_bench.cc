// Session::Run of a cached MLP forward pass against the same math written
// directly with Eigen, side by side in one binary.
//
//   MLP 784-512-512-10, batch 256, float32: x -> MatMul+BiasAdd+Relu ->
//   MatMul+BiasAdd+Relu -> MatMul+BiasAdd (logits).
//
// "strata" feeds x and fetches the logits through Session::Run (plan cached,
// weights are Const nodes); "eigen" runs the same three layers with Eigen
// matrix products and coefficient-wise ops on preallocated buffers, each on a
// device of the same thread count. Compare within one run.
//
//   bazel run //runtime:mlp_forward_bench -- --benchmark_min_time=2
#define EIGEN_USE_THREADS
#include <memory>
#include <vector>

#include "Eigen/Core"
#include "benchmark/benchmark.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/scope.h"
#include "runtime/session.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace strata {
namespace {

constexpr int kBatch = 256;
constexpr int kDims[] = {784, 512, 512, 10};

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Weights {
  std::vector<Tensor> w, b;
};

Weights MakeWeights() {
  Weights out;
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return (static_cast<float>(state >> 8) / 16777216.f - 0.5f) * 0.1f;
  };
  for (int l = 0; l < 3; ++l) {
    Tensor w(DT_FLOAT, TensorShape{kDims[l], kDims[l + 1]});
    Tensor b(DT_FLOAT, TensorShape{kDims[l + 1]});
    for (int64_t i = 0; i < w.NumElements(); ++i) w.data<float>()[i] = next();
    for (int64_t i = 0; i < b.NumElements(); ++i) b.data<float>()[i] = next();
    out.w.push_back(w);
    out.b.push_back(b);
  }
  return out;
}

Tensor MakeInput() {
  Tensor x(DT_FLOAT, TensorShape{kBatch, kDims[0]});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<float>()[i] = (i % 255) / 255.f;
  return x;
}

void BM_StrataSession(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const Weights wts = MakeWeights();
  Scope root = Scope::NewRootScope();
  Output h = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, kDims[0]}));
  for (int l = 0; l < 3; ++l) {
    h = ops::BiasAdd(root, ops::MatMul(root, h, ops::Const(root, wts.w[l])), ops::Const(root, wts.b[l]));
    if (l < 2) h = ops::Relu(root, h);
  }
  ops::Identity(root.WithOpName("logits"), h);
  SessionOptions opts;
  opts.devices.intra_op_threads_per_device = threads;
  opts.inter_op_threads = 1;
  auto session = Session::Create(root, opts);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  const Tensor x = MakeInput();
  std::vector<Tensor> out;
  for (auto _ : state) {
    absl::Status s = (*session)->Run({{"x", x}}, {"logits"}, {}, &out);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_EigenDirect(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const Weights wts = MakeWeights();
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  const Tensor x = MakeInput();
  // Preallocated activations: the best case for hand-written code.
  std::vector<RowMatrix> act = {RowMatrix(kBatch, kDims[1]), RowMatrix(kBatch, kDims[2]),
                                RowMatrix(kBatch, kDims[3])};
  using TMap = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;
  using CTMap = Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>>;
  const Eigen::array<Eigen::IndexPair<int>, 1> contract = {Eigen::IndexPair<int>(1, 0)};
  for (auto _ : state) {
    const float* in = x.data<float>();
    for (int l = 0; l < 3; ++l) {
      CTMap a(in, kBatch, kDims[l]);
      CTMap w(wts.w[l].data<float>(), kDims[l], kDims[l + 1]);
      TMap out(act[l].data(), kBatch, kDims[l + 1]);
      if (threads == 1) {
        // Eigen's matrix product is the faster single-thread kernel here.
        Eigen::Map<const RowMatrix> am(in, kBatch, kDims[l]);
        Eigen::Map<const RowMatrix> wm(wts.w[l].data<float>(), kDims[l], kDims[l + 1]);
        act[l].noalias() = am * wm;
      } else {
        out.device(device) = a.contract(w, contract);
      }
      Eigen::Map<const Eigen::RowVectorXf> b(wts.b[l].data<float>(), kDims[l + 1]);
      if (l < 2) {
        act[l] = (act[l].rowwise() + b).cwiseMax(0.f);
      } else {
        act[l].rowwise() += b;
      }
      in = act[l].data();
    }
    benchmark::DoNotOptimize(act[2].data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

BENCHMARK(BM_StrataSession)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata
