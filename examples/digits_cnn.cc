// The small CNN (train::MakeSmallCnn) classifying the bundled 8x8 digits,
// trained under any strategy with the flags every Strata trainer takes:
//
//   bazel-bin/examples/digits_cnn --epochs=20
//   bazel-bin/examples/digits_cnn --strategy=mirrored --num_cpu_devices=2
//   tools/launch --num_workers=2 -- bazel-bin/examples/digits_cnn --strategy=multi_worker_mirrored
//   bazel-bin/examples/digits_cnn --batch_norm --dropout=0.2     # BatchNormalization, Dropout
//
// 1437 examples train, the other 360 validate; pixels are scaled to [0, 1].
#include <cstdio>
#include <string>

#include "data/digits/find_digits.h"
#include "fit/strata.h"

ABSL_FLAG(std::string, digits_path, "", "the digits CSV; default: found in the runfiles or the source tree");
ABSL_FLAG(bool, batch_norm, false,
          "a BatchNormalization after each convolution (its statistics synchronized over every replica)");
ABSL_FLAG(double, dropout, 0, "the rate of a Dropout before the last layer; 0: none");

namespace {

namespace fit = strata::fit;
using strata::Output;
using strata::Scope;

constexpr int64_t kTrainExamples = 1437;

// Pixel values 0..16 to 0..1.
absl::Status Scale(strata::data::Example* e) {
  float* x = (*e)[0].data<float>();
  for (int64_t i = 0; i < (*e)[0].NumElements(); ++i) x[i] /= 16.0f;
  return absl::OkStatus();
}

absl::Status Main(const char* argv0) {
  STRATA_ASSIGN_OR_RETURN(fit::StrategyConfig config, fit::StrategyConfigFromFlags());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::distribute::Strategy> strategy, fit::MakeStrategy(config));
  STRATA_ASSIGN_OR_RETURN(fit::FitOptions options, fit::FitOptionsFromFlags());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::train::Optimizer> optimizer, fit::OptimizerFromFlags());

  STRATA_ASSIGN_OR_RETURN(std::string path, strata::FindDigitsCsv(absl::GetFlag(FLAGS_digits_path), argv0));
  STRATA_ASSIGN_OR_RETURN(strata::data::DatasetPtr all, strata::data::LoadCsv({path}));
  STRATA_ASSIGN_OR_RETURN(all, strata::data::Map(all, Scale, "scale_to_unit"));
  STRATA_ASSIGN_OR_RETURN(strata::data::DatasetPtr train, strata::data::Take(all, kTrainExamples));
  STRATA_ASSIGN_OR_RETURN(strata::data::DatasetPtr validation, strata::data::Skip(all, kTrainExamples));

  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::train::Sequential> cnn,
                          strata::train::MakeSmallCnn(8, 8, 1, 10, static_cast<int64_t>(options.seed),
                                                      {.batch_norm = absl::GetFlag(FLAGS_batch_norm),
                                                       .dropout = absl::GetFlag(FLAGS_dropout)}));
  fit::Model model;
  model.predict = [&cnn](const Scope& s, Output x) { return cnn->Build(s, x); };
  model.loss = [](const Scope& s, Output y, Output logits) -> absl::StatusOr<Output> {
    Output loss = strata::train::SparseSoftmaxCrossEntropy(s, y, logits);
    STRATA_RETURN_IF_ERROR(s.status());
    return loss;
  };
  model.metrics = {fit::AccuracyMetric()};

  STRATA_ASSIGN_OR_RETURN(fit::FitResult r,
                          fit::Fit(strategy.get(), model, optimizer.get(), train, validation, options));
  if (strategy->worker_index() == 0) {
    std::printf("digits_cnn: step %lld, loss %.4f, val_accuracy %.4f, val_loss %.4f\n",
                static_cast<long long>(r.final_step), r.final_loss, r.validation["val_accuracy"],
                r.validation["val_loss"]);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetFlag(&FLAGS_epochs, 30);
  absl::SetFlag(&FLAGS_learning_rate, 0.003);
  absl::SetFlag(&FLAGS_global_batch_size, 32);
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = Main(argv[0]);
  if (!s.ok()) std::fprintf(stderr, "digits_cnn: error: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
