// A character-level transformer language model (2 causal blocks, width 64, 4
// heads) on the bundled text (data/text: the GPL v3, as Debian ships it),
// trained under any strategy with the flags every Strata trainer takes:
//
//   bazel-bin/examples/char_lm --epochs=10
//   bazel-bin/examples/char_lm --strategy=mirrored --num_cpu_devices=2
//   tools/launch --num_workers=2 -- bazel-bin/examples/char_lm --strategy=multi_worker_mirrored
//   bazel-bin/examples/char_lm --epochs=10 --dropout=0.1         # residual dropout
//   bazel-bin/examples/char_lm --pipeline_stages=2 --micro_batches=4 --num_cpu_devices=2
//
// Windows of --seq characters predict the next character at each position;
// the last tenth of the text validates. It reports the validation loss
// beside the unigram baseline (the entropy of the characters' frequencies)
// and samples --sample characters from the trained model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "data/find_data.h"
#include "fit/strata.h"

ABSL_FLAG(std::string, text, "", "the training text; default: data/text/gpl-3.txt, found as the digits are");
ABSL_FLAG(int64_t, seq, 32, "characters per window");
ABSL_FLAG(int64_t, blocks, 2, "transformer blocks");
ABSL_FLAG(double, dropout, 0, "residual dropout rate in the blocks (training only); 0: none");
ABSL_FLAG(int64_t, sample, 200, "characters sampled after training");
ABSL_FLAG(int32_t, pipeline_stages, 1,
          "split the model into this many pipeline stages on CPU devices 0..S-1 (the blocks shared "
          "out in order, the embeddings on the first, the head on the last; needs "
          "--num_cpu_devices >= S and --strategy=one_device)");
ABSL_FLAG(int32_t, micro_batches, 1, "micro-batches each batch is cut into for the pipeline");
ABSL_FLAG(std::string, pipeline_schedule, "1f1b", "the pipeline's schedule: 1f1b or gpipe");

namespace {

using strata::Output;
using strata::Scope;
namespace ops = strata::ops;
constexpr int64_t kWidth = 64, kHeads = 4;

// Windows of `seq` ids starting every `seq` characters: x and the next characters y.
strata::data::DatasetPtr Windows(const std::vector<int32_t>& ids, int64_t seq) {
  const int64_t n = (static_cast<int64_t>(ids.size()) - 1) / seq;
  strata::Tensor x(strata::DT_INT32, strata::TensorShape{n, seq}), y(strata::DT_INT32, strata::TensorShape{n, seq});
  for (int64_t i = 0; i < n * seq; ++i) {
    x.data<int32_t>()[i] = ids[i];
    y.data<int32_t>()[i] = ids[i + 1];
  }
  return *strata::data::FromTensors({x, y});
}

// The model as --pipeline_stages stages: stage s runs blocks [s B / S,
// (s + 1) B / S), the first also the embeddings, the last also the head.
absl::StatusOr<std::vector<strata::distribute::PipelineStageFn>> Stages(
    strata::train::TransformerLm* lm, int stages) {
  if (stages < 1 || stages > lm->num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("--pipeline_stages=", stages,
                                                   ": between 1 and the ", lm->num_blocks(),
                                                   " blocks (--blocks)"));
  }
  std::vector<strata::distribute::PipelineStageFn> fns;
  for (int s = 0; s < stages; ++s) {
    const int64_t begin = s * lm->num_blocks() / stages, end = (s + 1) * lm->num_blocks() / stages;
    const bool first = s == 0, last = s + 1 == stages;
    fns.push_back([=](const Scope& scope,
                      const strata::OutputList& in) -> absl::StatusOr<strata::OutputList> {
      Output h = in[0];
      if (first) {
        STRATA_ASSIGN_OR_RETURN(h, lm->Embed(scope, h));
      }
      STRATA_ASSIGN_OR_RETURN(h, lm->Blocks(scope, h, begin, end));
      if (last) {
        STRATA_ASSIGN_OR_RETURN(h, lm->Head(scope, h));
      }
      return strata::OutputList{h};
    });
  }
  return fns;
}

absl::Status Main(const char* argv0) {
  STRATA_ASSIGN_OR_RETURN(strata::fit::StrategyConfig config,
                          strata::fit::StrategyConfigFromFlags());
  const int stages = absl::GetFlag(FLAGS_pipeline_stages),
            micro_batches = absl::GetFlag(FLAGS_micro_batches);
  const bool pipelined = stages > 1 || micro_batches > 1;
  if (pipelined && (config.strategy != "one_device" || config.num_cpu_devices < stages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline_stages=", stages,
                     " runs under --strategy=one_device with --num_cpu_devices >= ", stages));
  }
  if (absl::GetFlag(FLAGS_pipeline_schedule) != "1f1b" &&
      absl::GetFlag(FLAGS_pipeline_schedule) != "gpipe") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_schedule=", absl::GetFlag(FLAGS_pipeline_schedule), ": 1f1b or gpipe"));
  }
  STRATA_ASSIGN_OR_RETURN(auto strategy, strata::fit::MakeStrategy(config));
  STRATA_ASSIGN_OR_RETURN(strata::fit::FitOptions options, strata::fit::FitOptionsFromFlags());
  options.pipeline.micro_batches = micro_batches;
  options.pipeline.schedule = absl::GetFlag(FLAGS_pipeline_schedule) == "gpipe"
                                  ? strata::distribute::PipelineSchedule::kGPipe
                                  : strata::distribute::PipelineSchedule::kOneForwardOneBackward;
  STRATA_ASSIGN_OR_RETURN(auto optimizer, strata::fit::OptimizerFromFlags());
  STRATA_ASSIGN_OR_RETURN(std::string path, strata::FindDataFile("data/text/gpl-3.txt", "text", absl::GetFlag(FLAGS_text), argv0));
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::map<char, int64_t> counts;
  for (char c : text.str()) ++counts[c];
  std::map<char, int32_t> vocab;
  for (const auto& [c, n] : counts) vocab.emplace(c, static_cast<int32_t>(vocab.size()));
  std::vector<int32_t> ids;
  for (char c : text.str()) ids.push_back(vocab[c]);
  double unigram = 0;  // nats
  for (const auto& [c, n] : counts) unigram -= n / double(ids.size()) * std::log(n / double(ids.size()));
  const int64_t seq = absl::GetFlag(FLAGS_seq), v = static_cast<int64_t>(vocab.size()), split = ids.size() * 9 / 10;

  // Token and position embeddings, pre-norm causal blocks, a final norm and
  // logits (train/transformer_lm.h, composed from train/sequence_layers.h).
  strata::train::TransformerLm lm({.vocab = v,
                                   .seq = seq,
                                   .width = kWidth,
                                   .heads = kHeads,
                                   .blocks = absl::GetFlag(FLAGS_blocks),
                                   .seed = 1,
                                   .dropout = absl::GetFlag(FLAGS_dropout)});
  strata::fit::Model model;
  if (pipelined) {
    STRATA_ASSIGN_OR_RETURN(model.stages, Stages(&lm, stages));
  } else {
    model.predict = [&lm](const Scope& s, Output x) { return lm.Build(s, x); };
  }
  model.loss = [v](const Scope& s, Output y, Output p) -> absl::StatusOr<Output> {
    Output flat = ops::Reshape(s, p, ops::Const<int32_t>(s, {-1, static_cast<int32_t>(v)}));
    return strata::train::SparseSoftmaxCrossEntropy(s, ops::Reshape(s, y, ops::Const<int32_t>(s, {-1})), flat);
  };
  std::vector<int32_t> train_ids(ids.begin(), ids.begin() + split), val_ids(ids.begin() + split, ids.end());
  STRATA_ASSIGN_OR_RETURN(strata::fit::FitResult r, strata::fit::Fit(strategy.get(), model, optimizer.get(),
                                                                     Windows(train_ids, seq), Windows(val_ids, seq), options));
  if (strategy->worker_index() != 0 || r.preempted) return absl::OkStatus();
  std::printf("char_lm: step %lld, loss %.4f, val_loss %.4f nats/char (unigram baseline %.4f)\n",
              static_cast<long long>(r.final_step), r.final_loss, r.validation["val_loss"], unigram);
  // Sampling: the text's first window as the prompt, then each next
  // character drawn from the model's distribution (temperature 0.8).
  std::vector<char> chars(v);
  for (const auto& [c, id] : vocab) chars[id] = c;
  std::vector<int32_t> window(ids.begin(), ids.begin() + seq);
  std::mt19937 rng(static_cast<uint32_t>(options.seed));
  std::string sample;
  for (int64_t i = 0; i < absl::GetFlag(FLAGS_sample); ++i) {
    strata::Tensor x(strata::DT_INT32, strata::TensorShape{1, seq});
    std::copy(window.begin(), window.end(), x.data<int32_t>());
    STRATA_ASSIGN_OR_RETURN(strata::Tensor out, r.predictor->Predict(x));
    const float* last = out.data<float>() + (seq - 1) * v;
    std::vector<double> p(v);
    for (int64_t c = 0; c < v; ++c) p[c] = std::exp((last[c] - *std::max_element(last, last + v)) / 0.8);
    const int32_t next = static_cast<int32_t>(std::discrete_distribution<int64_t>(p.begin(), p.end())(rng));
    sample += chars[next];
    window.erase(window.begin());
    window.push_back(next);
  }
  std::printf("char_lm: sample after \"%s\":\n%s\n", text.str().substr(0, seq).c_str(), sample.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetFlag(&FLAGS_epochs, 10);
  absl::SetFlag(&FLAGS_global_batch_size, 32);
  absl::SetFlag(&FLAGS_learning_rate, 0.003);
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = Main(argv[0]);
  if (!s.ok()) std::fprintf(stderr, "char_lm: error: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
