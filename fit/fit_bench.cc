// Fit's cost per step: one model, data and strategy trained by fit::Fit and
// by a hand-written loop over the graph Fit builds (the same input
// pipeline, DistributedDataset, Strategy::Run, Minimize and one
// Session::Run per step fetching the loss), in interleaved rounds; each
// side's median steps/s over the rounds, and their ratio. Issue 18's
// target: Fit costs at most 2% (ratio >= 0.98).
//
//   bazel run -c opt //fit:fit_bench -- --steps=3000 --rounds=5 [--json]
//
// Defaults: the digits-sized MLP 64-128-64-10 at batch 64, SGD, one device
// and one intra-op thread, where a step is short and Fit's own work would
// show most.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "fit/fit.h"
#include "fit/optimizers.h"
#include "fit/strategy_flags.h"
#include "runtime/inline_pool.h"
#include "runtime/session.h"
#include "strategy/distributed_dataset.h"
#include "strategy/replica_context.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"
#include "train/losses.h"
#include "train/models.h"

ABSL_FLAG(int64_t, bench_steps, 3000, "timed steps per round and side");
ABSL_FLAG(int32_t, rounds, 5, "interleaved rounds (Fit, hand, Fit, hand, ...)");
ABSL_FLAG(bool, json, false, "print one JSON object");

namespace strata {
namespace fit {
namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kFeatures = 64;

data::DatasetPtr Examples() {
  data::SyntheticOptions o;
  o.num_examples = 8192;
  o.num_features = kFeatures;
  o.num_classes = 10;
  o.seed = 3;
  return *data::Synthetic(o);
}

absl::StatusOr<std::unique_ptr<distribute::Strategy>> OneThread() {
  StrategyConfig c;
  c.intra_op_threads = 1;
  return MakeStrategy(c);
}

// Seconds for `steps` steps of Fit.
absl::StatusOr<double> FitSeconds(int64_t steps) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, OneThread());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> mlp, train::MakeMlp({128, 64}, 10, 1));
  Model m;
  m.predict = [&mlp](const Scope& s, Output x) { return mlp->Build(s, x); };
  m.loss = [](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    return train::SparseSoftmaxCrossEntropy(s, y, p);
  };
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> sgd, MakeOptimizer("sgd", 0.05));
  FitOptions o;
  o.global_batch_size = kBatch;
  o.steps = steps;
  o.quiet = true;
  STRATA_ASSIGN_OR_RETURN(FitResult r, Fit(strategy.get(), m, sgd.get(), Examples(), nullptr, o));
  return r.train_seconds;
}

// Seconds for `steps` steps of the hand-written loop.
absl::StatusOr<double> HandSeconds(int64_t steps) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy, OneThread());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> mlp, train::MakeMlp({128, 64}, 10, 1));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> sgd, MakeOptimizer("sgd", 0.05));
  data::DatasetPtr batches = Examples();
  STRATA_ASSIGN_OR_RETURN(batches, data::Shuffle(batches, 1));
  STRATA_ASSIGN_OR_RETURN(batches, data::Batch(batches, kBatch, /*drop_remainder=*/true));
  STRATA_ASSIGN_OR_RETURN(batches, data::Repeat(batches));
  STRATA_ASSIGN_OR_RETURN(batches, data::Prefetch(batches, 2));
  Scope root = Scope::NewRootScope();
  distribute::StrategyScope in_scope = strategy->Scope();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<distribute::DistributedDataset> input,
                          strategy->DistributeDataset(batches, {{"x", DT_FLOAT, PartialTensorShape({-1, kFeatures})},
                                                                {"y", DT_INT32, PartialTensorShape({-1})}}));
  STRATA_ASSIGN_OR_RETURN(std::vector<distribute::PerReplica> inputs, input->Inputs(root));
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output logits, mlp->Build(ctx.scope(), in[0]));
    Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope().NewSubScope("loss"), in[1], logits);
    STRATA_ASSIGN_OR_RETURN(Node* train_op, train::Minimize(ctx.scope(), loss, sgd.get()));
    return distribute::ReplicaResult{{loss}, {train_op}};
  };
  STRATA_ASSIGN_OR_RETURN(distribute::RunResult step, strategy->Run(root, step_fn, inputs));
  STRATA_ASSIGN_OR_RETURN(Output loss, strategy->Reduce(root.NewSubScope("loss"), distribute::ReduceOp::kMean,
                                                        step.values[0]));
  Node* init = train::GlobalVariablesInitializer(root);
  STRATA_RETURN_IF_ERROR(root.status());
  InlinePool pool;
  SessionOptions options = strategy->session_options();
  options.inter_op_pool = &pool;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, options));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    bool end = false;
    STRATA_RETURN_IF_ERROR(input->GetNext(&feeds, &end));
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(session->Run(feeds, {loss.name()}, {step.op->name()}, &out));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status Main() {
  const int64_t steps = absl::GetFlag(FLAGS_bench_steps);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (steps < 1 || rounds < 1) return absl::InvalidArgumentError("--bench_steps and --rounds must be >= 1");
  std::vector<double> fit, hand;
  for (int r = 0; r < rounds; ++r) {
    STRATA_ASSIGN_OR_RETURN(double f, FitSeconds(steps));
    STRATA_ASSIGN_OR_RETURN(double h, HandSeconds(steps));
    fit.push_back(steps / f);
    hand.push_back(steps / h);
  }
  const double fit_rate = Median(fit), hand_rate = Median(hand);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"model\":\"64-128-64-10\",\"batch\":%lld,\"steps\":%lld,\"rounds\":%d,"
                "\"fit_steps_per_sec\":%.1f,\"hand_steps_per_sec\":%.1f,\"ratio\":%.4f}\n",
                static_cast<long long>(kBatch), static_cast<long long>(steps), rounds, fit_rate, hand_rate,
                fit_rate / hand_rate);
  } else {
    std::printf("MLP 64-128-64-10, batch %lld, SGD, one device, 1 thread; %lld steps x %d rounds\n",
                static_cast<long long>(kBatch), static_cast<long long>(steps), rounds);
    std::printf("  fit::Fit      %9.1f steps/s (median)\n  hand loop     %9.1f steps/s (median)\n", fit_rate,
                hand_rate);
    std::printf("  Fit / hand    %.3f (issue 18's target: >= 0.98)\n", fit_rate / hand_rate);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace fit
}  // namespace strata

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = strata::fit::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "fit_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
