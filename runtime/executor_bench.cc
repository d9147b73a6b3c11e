// Per-node overhead of the runtime: graphs of 1,000 tiny ops (scalar AddV2 or
// Identity) run through Session::Run with a cached plan, so each iteration is
// one whole step: feed check, executor, kernels, fetch. The "per_node" counter
// is the step's time divided by the number of tiny ops, kernels included.
//
//   chain: x -> op -> op -> ... -> op (1,000 deep), fetch the last
//   wide:  c -> 1,000 independent ops, all joined by a NoOp target
//
// The same graphs through Executor::Run directly (no session) show what the
// session adds. Compare with runtime/torch_op_bench (libtorch's per-op cost
// on the same shapes).
//
//   bazel run -c opt //runtime:executor_bench
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "kernels/call_frame.h"
#include "runtime/executor.h"
#include "runtime/session.h"

namespace strata {
namespace {

constexpr int kNodes = 1000;

enum class Op { kAddV2, kIdentity };

Output Tiny(const Scope& s, Op op, Output x, Output one) {
  return op == Op::kAddV2 ? ops::AddV2(s, x, one) : ops::Identity(s, x);
}

// chain: fetch "out" (1,000 tiny ops after the placeholder x).
Scope ChainGraph(Op op) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({}));
  Output one = ops::Const(root.WithOpName("one"), 1.0f);
  Output y = x;
  for (int i = 0; i < kNodes; ++i) y = Tiny(root, op, y, one);
  ops::Identity(root.WithOpName("out"), y);
  return root;
}

// wide: target "join" (1,000 tiny ops, each reading the placeholder x).
Scope WideGraph(Op op) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({}));
  Output one = ops::Const(root.WithOpName("one"), 1.0f);
  std::vector<Node*> all;
  for (int i = 0; i < kNodes; ++i) all.push_back(Tiny(root, op, x, one).node());
  ops::NoOp(root.WithOpName("join").WithControlDependencies(all));
  return root;
}

SessionOptions BenchOptions() {
  SessionOptions o;
  o.devices.intra_op_threads_per_device = 1;
  o.inter_op_threads = 1;
  return o;
}

void SetCounters(benchmark::State& state) {
  state.counters["per_node"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kNodes,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void RunSessionBench(benchmark::State& state, const Scope& root, bool chain) {
  auto session = Session::Create(root, BenchOptions());
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", Tensor::Scalar<float>(1)}};
  const std::vector<std::string> fetches = chain ? std::vector<std::string>{"out"}
                                                 : std::vector<std::string>{};
  const std::vector<std::string> targets = chain ? std::vector<std::string>{}
                                                 : std::vector<std::string>{"join"};
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run(feeds, fetches, targets, &out);  // plans once
  if (!s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) {
    s = (*session)->Run(feeds, fetches, targets, &out);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  SetCounters(state);
}

void BM_SessionChainAddV2(benchmark::State& state) {
  RunSessionBench(state, ChainGraph(Op::kAddV2), true);
}
void BM_SessionChainIdentity(benchmark::State& state) {
  RunSessionBench(state, ChainGraph(Op::kIdentity), true);
}
void BM_SessionWideAddV2(benchmark::State& state) {
  RunSessionBench(state, WideGraph(Op::kAddV2), false);
}
void BM_SessionWideIdentity(benchmark::State& state) {
  RunSessionBench(state, WideGraph(Op::kIdentity), false);
}
BENCHMARK(BM_SessionChainAddV2);
BENCHMARK(BM_SessionChainIdentity);
BENCHMARK(BM_SessionWideAddV2);
BENCHMARK(BM_SessionWideIdentity);

// The executor alone on the chain: a Const in place of the placeholder, no
// session around it.
void BM_ExecutorChainAddV2(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Output one = ops::Const(root, 1.0f);
  Output y = ops::Const(root, 0.0f);
  for (int i = 0; i < kNodes; ++i) y = ops::AddV2(root, y, one);
  ops::Retval(root, y, 0);
  auto devices = CreateCpuDeviceMgr(BenchOptions().devices);
  auto ex = Executor::Create(*root.graph(), (*devices)->devices()[0]);
  if (!root.ok() || !ex.ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  for (auto _ : state) {
    VectorCallFrame frame({}, 1);
    Executor::Args args;
    args.call_frame = &frame;
    absl::Status s = (*ex)->Run(args);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  SetCounters(state);
}
BENCHMARK(BM_ExecutorChainAddV2);

}  // namespace
}  // namespace strata
