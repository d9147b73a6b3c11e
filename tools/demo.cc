// Strata demo: builds a graph with the C++ builder API, splits it across two
// (virtual) CPU devices and runs it with a Session.
//
// The graph is an MLP forward pass 64-128-10 with seeded random weights: layer
// 1 is placed on /cpu:0, layer 2 on /cpu:1, so the session partitions the
// graph and a _Send/_Recv pair carries the hidden activations between devices.
// It prints the partitions, the predictions for a few inputs, the softmax rows'
// sums, and the step time once the plan is cached.
//
//   bazel run //tools:demo
#include <chrono>
#include <cstdio>
#include <iostream>

#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/ops/random_ops.h"
#include "graph/scope.h"
#include "runtime/session.h"

namespace strata {
namespace {

Output Dense(const Scope& s, Output x, int64_t in, int64_t out, int seed, bool relu) {
  const ops::RandomAttrs seeded = ops::RandomAttrs().Seed(42).Seed2(seed);
  Output w = ops::Mul(s, ops::RandomNormal(s, ops::Const<int32_t>(s, {static_cast<int32_t>(in),
                                                                      static_cast<int32_t>(out)}),
                                           DT_FLOAT, seeded),
                      ops::Const(s, 0.1f));
  Output b = ops::Const(s, Tensor(DT_FLOAT, TensorShape{out}));
  Output y = ops::BiasAdd(s, ops::MatMul(s, x, w), b);
  return relu ? ops::Relu(s, y) : y;
}

absl::Status Main() {
  constexpr int kBatch = 256;
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
  Output h = Dense(root.NewSubScope("layer1").WithDevice("/cpu:0"), x, 64, 128, 1, true);
  Output logits = Dense(root.NewSubScope("layer2").WithDevice("/cpu:1"), h, 128, 10, 2, false);
  Output probs = ops::Softmax(root.WithOpName("probs"), logits);
  Output sums = ops::Sum(root.WithOpName("row_sums"), probs, ops::Const(root, 1));
  Output pred = ops::ArgMax(root.WithOpName("pred"), probs, ops::Const(root, 1));
  if (!root.ok()) return root.status();

  SessionOptions opts;
  opts.devices.num_cpu_devices = 2;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, opts));

  // Inputs: a deterministic pattern in [0, 1).
  Tensor input(DT_FLOAT, TensorShape{kBatch, 64});
  for (int64_t i = 0; i < input.NumElements(); ++i) {
    input.data<float>()[i] = static_cast<float>((i * 37) % 101) / 101.f;
  }

  std::vector<Tensor> out;
  RunOptions run_opts;
  run_opts.output_partition_graphs = true;
  RunMetadata meta;
  STRATA_RETURN_IF_ERROR(session->Run(run_opts, {{"x", input}}, {pred.name(), sums.name()}, {},
                                      &out, &meta));
  std::printf("graph: %d nodes, split into %zu partitions:\n", root.graph()->num_nodes(),
              meta.partition_devices.size());
  for (size_t i = 0; i < meta.partition_devices.size(); ++i) {
    std::printf("  %-45s %d nodes\n", meta.partition_devices[i].c_str(),
                meta.partition_graphs[i].node_size());
  }
  std::printf("predicted classes of the first 8 inputs:");
  for (int i = 0; i < 8; ++i) std::printf(" %lld", static_cast<long long>(out[0].data<int64_t>()[i]));
  float min_sum = 2, max_sum = 0;
  for (int i = 0; i < kBatch; ++i) {
    min_sum = std::min(min_sum, out[1].data<float>()[i]);
    max_sum = std::max(max_sum, out[1].data<float>()[i]);
  }
  std::printf("\nsoftmax rows sum to [%.6f, %.6f]\n", min_sum, max_sum);

  constexpr int kSteps = 200;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    STRATA_RETURN_IF_ERROR(session->Run({{"x", input}}, {pred.name()}, {}, &out));
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("cached step (batch %d): %.1f us, %lld plan(s) built for %d runs\n", kBatch,
              us / kSteps, static_cast<long long>(session->num_plans_built()), kSteps + 1);
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main() {
  absl::Status s = strata::Main();
  if (!s.ok()) {
    std::cerr << "demo failed: " << s << "\n";
    return 1;
  }
  return 0;
}
