// A regression with a layer and a loss of its own, trained under any
// strategy with the flags every Strata trainer takes:
//
//   bazel-bin/examples/regression --epochs=30
//   bazel-bin/examples/regression --strategy=mirrored --num_cpu_devices=2
//   tools/launch --num_workers=2 -- bazel-bin/examples/regression --strategy=multi_worker_mirrored
//
// The data: y = 1.5 tanh(x) - 0.5 x + noise. The model: one custom layer,
// y = a tanh(x) + b x + c. The loss: pseudo-Huber, written here.
#include <cstdio>
#include <random>

#include "fit/strata.h"

namespace {

using strata::Output;
using strata::Scope;
namespace ops = strata::ops;

// y = a tanh(x) + b x + c, its three weights scalars.
class TanhPlusLine : public strata::train::Layer {
 public:
  TanhPlusLine() : Layer("", /*seed=*/std::nullopt) {}
  std::string kind() const override { return "tanh_plus_line"; }

 protected:
  absl::Status Build(const Scope& s, const strata::PartialTensorShape&) override {
    for (const char* w : {"a", "b", "c"}) AddWeight(s, w, strata::TensorShape{}, /*glorot=*/false);
    return s.status();
  }
  absl::StatusOr<Output> Call(const Scope& s, Output x, const std::vector<Output>& w) override {
    Output curve = ops::Add(s, ops::Mul(s, w[0], ops::Tanh(s, x)), ops::Mul(s, w[1], x));
    return ops::Add(s, curve, w[2]);
  }
};

// Pseudo-Huber with delta 1: mean of sqrt(1 + d^2) - 1, d = prediction - y.
absl::StatusOr<Output> PseudoHuber(const Scope& s, Output y, Output p) {
  Output d2 = ops::Square(s, ops::Sub(s, p, y));
  Output one = ops::Const(s, 1.0f);
  Output l = ops::Sub(s, ops::Sqrt(s, ops::Add(s, one, d2)), one);
  Output loss = ops::Mean(s, ops::Reshape(s, l, ops::Const(s, {-1})), ops::Const(s, 0));
  STRATA_RETURN_IF_ERROR(s.status());
  return loss;
}

// n examples (x [n, 1], y [n, 1]) from `seed`.
strata::data::DatasetPtr MakeData(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> x_of(-3, 3);
  std::normal_distribution<float> noise(0, 0.05f);
  strata::Tensor x(strata::DT_FLOAT, strata::TensorShape{n, 1}), y(strata::DT_FLOAT, strata::TensorShape{n, 1});
  for (int64_t i = 0; i < n; ++i) {
    const float v = x_of(gen);
    x.data<float>()[i] = v;
    y.data<float>()[i] = 1.5f * std::tanh(v) - 0.5f * v + noise(gen);
  }
  return *strata::data::FromTensors({x, y});
}

absl::Status Main() {
  STRATA_ASSIGN_OR_RETURN(strata::fit::StrategyConfig config, strata::fit::StrategyConfigFromFlags());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::distribute::Strategy> strategy, strata::fit::MakeStrategy(config));
  STRATA_ASSIGN_OR_RETURN(strata::fit::FitOptions options, strata::fit::FitOptionsFromFlags());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::train::Optimizer> optimizer, strata::fit::OptimizerFromFlags());

  strata::train::Sequential net;
  net.Add<TanhPlusLine>();
  strata::fit::Model model;
  model.predict = [&net](const Scope& s, Output x) { return net.Build(s, x); };
  model.loss = PseudoHuber;
  model.metrics = {strata::fit::MeanSquaredErrorMetric()};

  const uint32_t seed = static_cast<uint32_t>(options.seed);
  STRATA_ASSIGN_OR_RETURN(strata::fit::FitResult r, strata::fit::Fit(strategy.get(), model, optimizer.get(),
                                                                     MakeData(2048, seed), MakeData(512, seed + 1),
                                                                     options));
  if (r.preempted) {
    std::printf("regression: worker %d preempted after step %lld\n", strategy->worker_index(),
                static_cast<long long>(r.final_step));
  } else if (strategy->worker_index() == 0) {
    std::printf("regression: step %lld, loss %.6f, val_mse %.6f\n", static_cast<long long>(r.final_step),
                r.final_loss, r.validation["val_mse"]);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetFlag(&FLAGS_epochs, 10);
  absl::SetFlag(&FLAGS_global_batch_size, 64);
  absl::SetFlag(&FLAGS_learning_rate, 0.05);
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = Main();
  if (!s.ok()) std::fprintf(stderr, "regression: error: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
