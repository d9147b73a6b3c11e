// gpu_step_bench: the time of one training step of an MLP in Strata on one
// device, for tools/bench/gpu_step_bench.py, which runs it beside the same
// step in PyTorch eager on the same GPU.
//
//   bazel build --config=cuda //tools:gpu_step_bench
//   bazel-bin/tools/gpu_step_bench --device=/gpu:0 --json      # 784-512-512-10, batch 256
//   bazel-bin/tools/gpu_step_bench --device=/cpu:0             # any build: the CPU step
//
// The step: forward (Dense+ReLU, Dense+ReLU, Dense logits), sparse softmax
// cross-entropy, backward and plain SGD on every weight, as one Session::Run
// of the train op built with the same model code as the trainer
// (OneDeviceStrategy on --device, train::MakeMlp, a DistributedOptimizer).
// The batch is a constant on the device (PyTorch's peer keeps its batch on
// the GPU too), so the step is the model's work, not the input's. A Run
// returns once the step has finished on the GPU (the session synchronizes
// the device at the end of each step), so each timed Run is one complete
// step; --fetch_loss also copies the loss back, as a training loop printing
// it would.
//
// Output: a line per statistic, or with --json one JSON object:
//   {"framework":"strata","device":"...","step_ms_median":...,"step_ms_mean":...,
//    "step_ms_p10":...,"step_ms_p90":...,"steps":...,"loss_first":...,"loss_last":...}
// Exit status 1 with the reason on stderr when the device is not there (a
// build without CUDA, a machine without a GPU) or the step fails.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "runtime/inline_pool.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/policy.h"
#include "train/variable.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

ABSL_FLAG(std::string, device, "/gpu:0", "the device of the step (/gpu:0, /cpu:0)");
ABSL_FLAG(int64_t, batch, 256, "examples per step");
ABSL_FLAG(int64_t, features, 784, "input features");
ABSL_FLAG(std::string, hidden, "512,512", "hidden layer sizes");
ABSL_FLAG(int64_t, classes, 10, "classes");
ABSL_FLAG(double, learning_rate, 0.01, "SGD learning rate");
ABSL_FLAG(int64_t, warmup, 20, "untimed steps first (allocator, cuBLAS and NCCL set-up)");
ABSL_FLAG(int64_t, steps, 200, "timed steps");
ABSL_FLAG(bool, fetch_loss, false, "fetch the loss every step (a device-to-host copy)");
ABSL_FLAG(bool, json, false, "print one JSON object");
ABSL_FLAG(std::string, dtype_policy, "float32",
          "float32, or mixed_bfloat16: the layers compute in bfloat16 (train/policy.h)");
ABSL_FLAG(bool, record_steps, true,
          "record the GPU partition once and replay it as a CUDA graph (SessionOptions::record_gpu_steps)");
ABSL_FLAG(std::string, trace_out, "",
          "after the timed steps, trace 5 more (runtime/trace.h) into this Chrome trace file");
ABSL_FLAG(std::string, trace_synced_out, "",
          "and 5 more into this one, waiting for the device after each kernel (each event spans "
          "the kernel's run on the GPU)");

namespace strata {
namespace {

struct Stats {
  double median = 0, mean = 0, p10 = 0, p90 = 0;
};

Stats Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Stats s;
  const size_t n = ms.size();
  s.median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  for (double v : ms) s.mean += v / n;
  s.p10 = ms[n / 10];
  s.p90 = ms[std::min(n - 1, n * 9 / 10)];
  return s;
}

// Five steps traced into a Chrome trace at `path` (none if empty).
absl::Status TraceSteps(Session& session, const std::string& op, const std::string& path,
                        bool wait_for_device) {
  if (path.empty()) return absl::OkStatus();
  StepTracer tracer;
  tracer.set_wait_for_device(wait_for_device);
  RunOptions ro;
  ro.tracer = &tracer;
  const std::vector<std::string> no_fetches;
  for (int i = 0; i < 5; ++i) {
    const int64_t t0 = StepTracer::NowNanos();
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(session.Run(ro, {}, no_fetches, {op}, &out, nullptr));
    tracer.RecordSpan(absl::StrCat("step ", i), t0, StepTracer::NowNanos());
  }
  return tracer.WriteChromeTrace(path);
}

// What a run measured, printed as a JSON line (--json) or as text.
struct Report {
  std::string device;
  int64_t batch = 0, features = 0, classes = 0, steps = 0, warmup = 0;
  std::vector<int64_t> hidden;
  bool fetch = false;
  Stats stats;
  float loss_first = 0, loss_last = 0;
  std::string policy;
  RecordingStats recording;

  void Print() const {
    const Stats& s = stats;
    const RecordingStats& rec = recording;
    const std::string& full_device = device;
    std::string why = rec.not_recorded;
    absl::StrReplaceAll({{"\\", "\\\\"}, {"\"", "\\\""}}, &why);
    if (absl::GetFlag(FLAGS_json)) {
      std::printf(
          "{\"framework\":\"strata\",\"device\":\"%s\",\"batch\":%lld,\"features\":%lld,"
          "\"hidden\":\"%s\",\"classes\":%lld,\"fetch_loss\":%s,\"steps\":%lld,"
          "\"step_ms_median\":%.5f,\"step_ms_mean\":%.5f,\"step_ms_p10\":%.5f,\"step_ms_p90\":%.5f,"
          "\"loss_first\":%.6g,\"loss_last\":%.6g,\"dtype_policy\":\"%s\",\"record_steps\":%s,\"recorded\":%lld,"
          "\"replayed\":%lld,\"eager\":%lld,\"not_recorded\":\"%s\"}\n",
          full_device.c_str(), static_cast<long long>(batch), static_cast<long long>(features),
          absl::GetFlag(FLAGS_hidden).c_str(), static_cast<long long>(classes),
          fetch ? "true" : "false", static_cast<long long>(steps), s.median, s.mean, s.p10, s.p90,
          loss_first, loss_last, policy.c_str(), absl::GetFlag(FLAGS_record_steps) ? "true" : "false",
          static_cast<long long>(rec.recorded), static_cast<long long>(rec.replayed),
          static_cast<long long>(rec.eager), why.c_str());
    } else {
      std::printf("strata step on %s: MLP %lld-%s-%lld, batch %lld, SGD\n", full_device.c_str(),
                  static_cast<long long>(features), absl::StrJoin(hidden, "-").c_str(),
                  static_cast<long long>(classes), static_cast<long long>(batch));
      std::printf("  %lld steps: median %.4f ms, mean %.4f ms, p10 %.4f ms, p90 %.4f ms\n",
                  static_cast<long long>(steps), s.median, s.mean, s.p10, s.p90);
      std::printf("  loss %.5g at the first step, %.5g after %lld steps\n", loss_first, loss_last,
                  static_cast<long long>(warmup + steps + 1));
      std::printf("  recorded %lld, replayed %lld, kernel by kernel %lld%s%s\n",
                  static_cast<long long>(rec.recorded), static_cast<long long>(rec.replayed),
                  static_cast<long long>(rec.eager), why.empty() ? "" : "; not recorded: ", why.c_str());
    }
  }
};

absl::Status Main() {
  const std::string device = absl::GetFlag(FLAGS_device);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t features = absl::GetFlag(FLAGS_features);
  const int64_t classes = absl::GetFlag(FLAGS_classes);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  if (batch < 1 || features < 1 || classes < 2 || steps < 1 || warmup < 0) {
    return absl::InvalidArgumentError(
        "--batch, --features and --steps must be >= 1, --classes >= 2, --warmup >= 0");
  }
  std::vector<int64_t> hidden;
  for (absl::string_view h : absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(h, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--hidden: '", h, "' is not a positive size"));
    }
    hidden.push_back(v);
  }

  DeviceOptions machine;
  machine.num_cpu_devices = 1;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::OneDeviceStrategy> strategy,
                          distribute::OneDeviceStrategy::Create(device, machine));
  const std::string full_device = strategy->devices()[0];

  // The batch: N(0, 1) features, uniform labels, fixed seed.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  Tensor x(DT_FLOAT, TensorShape{batch, features});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<float>()[i] = normal(rng);
  Tensor y(DT_INT32, TensorShape{batch});
  for (int64_t i = 0; i < batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % classes);

  Scope root = Scope::NewRootScope();
  distribute::StrategyScope in_scope = strategy->Scope();
  const Scope on_device = root.WithDevice(full_device);
  Output xc = ops::Const(on_device.WithOpName("x"), x);
  Output yc = ops::Const(on_device.WithOpName("y"), y);
  STRATA_ASSIGN_OR_RETURN(const train::Policy policy, train::PolicyFromName(absl::GetFlag(FLAGS_dtype_policy)));
  train::SetGlobalPolicy(policy);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> model,
                          train::MakeMlp(hidden, classes, /*seed=*/1));
  distribute::DistributedOptimizer<train::SGD> sgd(absl::GetFlag(FLAGS_learning_rate));
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(ctx.scope(), in[0]));
    Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope().NewSubScope("loss"), in[1], logits);
    STRATA_ASSIGN_OR_RETURN(Node* train_op,
                            train::Minimize(ctx.scope(), loss, model->reads(), &sgd));
    return distribute::ReplicaResult{{loss}, {train_op}};
  };
  STRATA_ASSIGN_OR_RETURN(distribute::RunResult step,
                          strategy->Run(root, step_fn,
                                        {distribute::PerReplica({xc}), distribute::PerReplica({yc})}));
  Node* init = train::GlobalVariablesInitializer(root);
  STRATA_RETURN_IF_ERROR(root.status());

  InlinePool inline_pool;
  SessionOptions options = strategy->session_options();
  options.inter_op_pool = &inline_pool;
  options.record_gpu_steps = absl::GetFlag(FLAGS_record_steps);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, options));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));

  const std::string loss_name = step.values[0][0].name();
  const bool fetch = absl::GetFlag(FLAGS_fetch_loss);
  auto run_step = [&](float* loss) -> absl::Status {
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(session->Run({}, fetch || loss != nullptr ? std::vector<std::string>{loss_name}
                                                                    : std::vector<std::string>{},
                                        {step.op->name()}, &out));
    if (loss != nullptr) *loss = out[0].data<float>()[0];
    return absl::OkStatus();
  };
  float loss_first = 0, loss_last = 0;
  STRATA_RETURN_IF_ERROR(run_step(&loss_first));
  for (int64_t i = 1; i < warmup; ++i) STRATA_RETURN_IF_ERROR(run_step(nullptr));
  std::vector<double> ms;
  ms.reserve(steps);
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(run_step(nullptr));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  STRATA_RETURN_IF_ERROR(run_step(&loss_last));
  STRATA_RETURN_IF_ERROR(TraceSteps(*session, step.op->name(), absl::GetFlag(FLAGS_trace_out), false));
  STRATA_RETURN_IF_ERROR(
      TraceSteps(*session, step.op->name(), absl::GetFlag(FLAGS_trace_synced_out), true));
  Report r;
  r.device = full_device;
  r.batch = batch;
  r.features = features;
  r.classes = classes;
  r.hidden = hidden;
  r.fetch = fetch;
  r.steps = steps;
  r.warmup = warmup;
  r.stats = Summarize(ms);
  r.loss_first = loss_first;
  r.loss_last = loss_last;
  r.policy = policy.name;
  r.recording = session->recording_stats();
  r.Print();
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = strata::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_step_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
