// Transformer language model training throughput (issue 19's speed target):
// train::TransformerLm (the model of examples/char_lm at bench sizes),
// cross-entropy over every position, Adam, one Session::Run per step on one
// device, in rounds of timed steps; the median round's tokens/s (batch x
// seq per step). tools/bench/lm_torch.py runs the same model in PyTorch;
// tools/perf.sh target L1 puts them side by side.
//
//   bazel run -c opt //tools:lm_bench -- --threads=1 --json
//   bazel run -c opt --config=cuda //tools:lm_bench -- --device=/gpu:0
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "runtime/inline_pool.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/transformer_lm.h"

ABSL_FLAG(std::string, device, "/cpu:0", "/cpu:0 or /gpu:0");
ABSL_FLAG(int32_t, threads, 1, "intra-op threads of the CPU device");
ABSL_FLAG(int64_t, batch, 16, "sequences per step");
ABSL_FLAG(int64_t, seq, 64, "tokens per sequence");
ABSL_FLAG(int64_t, width, 128, "model width");
ABSL_FLAG(int64_t, heads, 4, "attention heads");
ABSL_FLAG(int64_t, blocks, 2, "transformer blocks");
ABSL_FLAG(int64_t, vocab, 96, "vocabulary");
ABSL_FLAG(int64_t, steps, 20, "timed steps per round");
ABSL_FLAG(int64_t, warmup, 3, "untimed steps first");
ABSL_FLAG(int32_t, rounds, 3, "rounds; the median round is reported");
ABSL_FLAG(bool, json, false, "print one JSON object");
ABSL_FLAG(std::string, trace_out, "", "after the timed rounds, a Chrome trace of 3 steps (runtime/trace.h)");

namespace strata {
namespace {

absl::Status Main() {
  const int64_t batch = absl::GetFlag(FLAGS_batch), seq = absl::GetFlag(FLAGS_seq);
  const int64_t vocab = absl::GetFlag(FLAGS_vocab);
  const std::string device = absl::GetFlag(FLAGS_device);
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, PartialTensorShape({batch, seq}));
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, PartialTensorShape({batch * seq}));
  const Scope on = root.WithDevice(device);
  train::TransformerLm lm({vocab, seq, absl::GetFlag(FLAGS_width), absl::GetFlag(FLAGS_heads),
                           absl::GetFlag(FLAGS_blocks), /*seed=*/1});
  STRATA_ASSIGN_OR_RETURN(Output logits, lm.Build(on, ids));
  Output flat = ops::Reshape(on, logits, ops::Const<int32_t>(on, {-1, static_cast<int32_t>(vocab)}));
  Output loss = train::SparseSoftmaxCrossEntropy(on, labels, flat);
  train::Adam adam(1e-3);
  STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(on, loss, lm.reads(), &adam));
  const std::string init = train::GlobalVariablesInitializer(root)->name();
  STRATA_RETURN_IF_ERROR(root.status());

  InlinePool inline_pool;
  SessionOptions options;
  options.devices.num_cpu_devices = 1;
  options.devices.intra_op_threads_per_device = absl::GetFlag(FLAGS_threads);
  if (device.find("gpu") != std::string::npos) options.devices.num_gpus = 1;
  options.host_fallback_without_kernel = true;
  options.inter_op_pool = &inline_pool;  // ops one at a time, each parallel inside
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, options));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init}, nullptr));

  std::mt19937 rng(1);
  Tensor x(DT_INT32, TensorShape{batch, seq}), y(DT_INT32, TensorShape{batch * seq});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng() % vocab);
  for (int64_t i = 0; i < y.NumElements(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % vocab);
  std::vector<Tensor> out;
  auto step = [&]() { return session->Run({{"ids", x}, {"labels", y}}, {loss.name()}, {train_op->name()}, &out); };
  float first_loss = 0;
  for (int64_t i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    STRATA_RETURN_IF_ERROR(step());
    if (i == 0) first_loss = out[0].data<float>()[0];
  }
  std::vector<double> rates;
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  for (int32_t r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) STRATA_RETURN_IF_ERROR(step());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(steps * batch * seq) / s);
  }
  if (const std::string path = absl::GetFlag(FLAGS_trace_out); !path.empty()) {
    StepTracer tracer;
    RunOptions ro;
    ro.tracer = &tracer;
    for (int i = 0; i < 3; ++i) {
      STRATA_RETURN_IF_ERROR(
          session->Run(ro, {{"ids", x}, {"labels", y}}, {loss.name()}, {train_op->name()}, &out, nullptr));
    }
    STRATA_RETURN_IF_ERROR(tracer.WriteChromeTrace(path));
  }
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  const float last_loss = out[0].data<float>()[0];
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"framework\":\"strata\",\"device\":\"%s\",\"threads\":%d,\"batch\":%lld,\"seq\":%lld,"
                "\"width\":%lld,\"blocks\":%lld,\"tokens_per_sec\":%.1f,\"loss_first\":%.5f,\"loss_last\":%.5f}\n",
                device.c_str(), absl::GetFlag(FLAGS_threads), static_cast<long long>(batch),
                static_cast<long long>(seq), static_cast<long long>(absl::GetFlag(FLAGS_width)),
                static_cast<long long>(absl::GetFlag(FLAGS_blocks)), median, first_loss, last_loss);
  } else {
    std::printf("strata transformer LM on %s, %d thread(s): %.0f tokens/s (median of %zu rounds); loss %.4f -> %.4f\n",
                device.c_str(), absl::GetFlag(FLAGS_threads), median, rates.size(), first_loss, last_loss);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = strata::Main();
  if (!s.ok()) std::fprintf(stderr, "lm_bench: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
