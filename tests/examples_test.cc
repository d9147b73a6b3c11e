// The example trainers (examples/) as a user runs them: on one device,
// mirrored over virtual CPUs and as 2 worker processes, each ending on the
// same weights (within 1e-5; the transformer 1e-4), and resuming after a
// crash exactly.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <chrono>
#include <utility>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "fit/testing/cluster_runner.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

// Runs `program` with `args`; its final checkpoint (after `steps`) in `dir`.
void RunToCompletion(const std::string& program, std::vector<std::string> args, const std::string& dir) {
  args.push_back("--checkpoint_dir=" + dir);
  args.push_back("--quiet");
  const Exit e = Wait(SpawnProgram(Runfile(program), args, dir + "/stderr.txt"));
  ASSERT_EQ(e.code, 0) << Describe(e);
}

// Two worker processes of `program` (ClusterRunner: TF_CONFIG each, as
// tools/launch starts them); the chief writes the checkpoints to `dir`.
void RunTwoWorkers(const std::string& program, std::vector<std::string> args, const std::string& dir) {
  ClusterOptions o;
  o.program = Runfile(program);
  o.num_workers = 2;
  o.args = std::move(args);
  o.args.push_back("--checkpoint_dir=" + dir);
  o.args.push_back("--quiet");
  o.args.push_back("--strategy=multi_worker_mirrored");
  absl::StatusOr<std::unique_ptr<ClusterRunner>> c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const WorkerExit& e : (*c)->Join(absl::Seconds(120))) EXPECT_EQ(e.code, 0) << Describe(e);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The largest absolute difference between the float weights `names` of two
// checkpoints.
double WorstWeightDifference(const std::string& a, const std::string& b, const std::vector<std::string>& names) {
  auto ra = CheckpointReader::Open(a);
  auto rb = CheckpointReader::Open(b);
  EXPECT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(rb.ok()) << rb.status();
  if (!ra.ok() || !rb.ok()) return 1e30;
  double worst = 0;
  for (const std::string& name : names) {
    Tensor ta, tb;
    EXPECT_TRUE((*ra)->Read(name, &ta).ok()) << name << " in " << a;
    EXPECT_TRUE((*rb)->Read(name, &tb).ok()) << name << " in " << b;
    if (ta.NumElements() != tb.NumElements() || ta.dtype() != DT_FLOAT) return 1e30;
    for (int64_t i = 0; i < ta.NumElements(); ++i) {
      worst = std::max<double>(worst, std::abs(ta.data<float>()[i] - tb.data<float>()[i]));
    }
  }
  return worst;
}

TEST(ExamplesTest, RegressionEndsOnTheSameWeightsUnderEveryStrategy) {
  const std::vector<std::string> args = {"--epochs=4"};
  const std::string one = TempDir("regression_one"), four = TempDir("regression_mirrored4"),
                    two = TempDir("regression_workers2");
  RunToCompletion("examples/regression", args, one);
  std::vector<std::string> mirrored = args;
  mirrored.push_back("--strategy=mirrored");
  mirrored.push_back("--num_cpu_devices=4");
  RunToCompletion("examples/regression", mirrored, four);
  RunTwoWorkers("examples/regression", args, two);
  // 4 epochs of 2048 / 64 steps.
  const std::string last = "/ckpt-128";
  const std::vector<std::string> weights = {"tanh_plus_line/a", "tanh_plus_line/b", "tanh_plus_line/c"};
  EXPECT_LE(WorstWeightDifference(one + last, four + last, weights), 1e-5);
  EXPECT_LE(WorstWeightDifference(one + last, two + last, weights), 1e-5);
}

// The digits CNN with `args` on one device, mirrored over 2 CPUs and on 2
// worker processes: the three checkpoint directories.
std::array<std::string, 3> DigitsCnnUnderEveryStrategy(const std::vector<std::string>& args, const std::string& tag) {
  const std::array<std::string, 3> dirs = {TempDir(tag + "_one"), TempDir(tag + "_mirrored2"),
                                           TempDir(tag + "_workers2")};
  RunToCompletion("examples/digits_cnn", args, dirs[0]);
  std::vector<std::string> mirrored = args;
  mirrored.push_back("--strategy=mirrored");
  mirrored.push_back("--num_cpu_devices=2");
  RunToCompletion("examples/digits_cnn", mirrored, dirs[1]);
  RunTwoWorkers("examples/digits_cnn", args, dirs[2]);
  return dirs;
}

TEST(ExamplesTest, DigitsCnnEndsOnTheSameWeightsUnderEveryStrategy) {
  const auto [one, two, workers] = DigitsCnnUnderEveryStrategy({"--epochs=2"}, "cnn");
  // 2 epochs of ceil(1437 / 32) steps: each epoch's last batch of 29
  // trains, split 15/14 over 2 replicas and weighted.
  const std::string last = "/ckpt-90";
  std::vector<std::string> weights;
  for (const char* layer : {"conv2d", "conv2d_1", "dense", "dense_1"}) {
    weights.push_back(absl::StrCat(layer, "/kernel"));
    weights.push_back(absl::StrCat(layer, "/bias"));
  }
  EXPECT_LE(WorstWeightDifference(one + last, two + last, weights), 1e-5);
  EXPECT_LE(WorstWeightDifference(one + last, workers + last, weights), 1e-5);
}

TEST(ExamplesTest, DigitsCnnWithSynchronizedBatchNormEndsOnTheSameWeightsUnderEveryStrategy) {
  // Mirrored replicas and worker processes normalize by the global batch's
  // statistics, all-reduced forward and backward, as one device does.
  // SGD: Adam would turn rounding-level gradients (a channel ReLU silenced)
  // into learning-rate-sized steps of either sign.
  const auto [one, two, workers] =
      DigitsCnnUnderEveryStrategy({"--epochs=1", "--batch_norm", "--optimizer=sgd", "--learning_rate=0.05"}, "cnn_bn");
  const std::string last = "/ckpt-45";  // ceil(1437 / 32) steps
  std::vector<std::string> weights;
  for (const char* layer : {"conv2d", "conv2d_1", "dense", "dense_1"}) weights.push_back(absl::StrCat(layer, "/kernel"));
  for (const char* layer : {"batch_normalization", "batch_normalization_1"}) {
    for (const char* w : {"gamma", "beta", "moving_mean", "moving_variance"}) {
      weights.push_back(absl::StrCat(layer, "/", w));
    }
  }
  EXPECT_LE(WorstWeightDifference(one + last, two + last, weights), 1e-5);
  EXPECT_LE(WorstWeightDifference(one + last, workers + last, weights), 1e-5);
}

// The value of "key": in the last line of a metrics file (--metrics_out).
double FinalMetric(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  const size_t at = last.find("\"" + key + "\":");
  EXPECT_NE(at, std::string::npos) << key << " in " << path << ": " << last;
  return at == std::string::npos ? NAN : std::atof(last.c_str() + at + key.size() + 3);
}

TEST(ExamplesTest, CharLmTransformerEndsOnTheSameLossUnderEveryStrategy) {
  const std::string one = TempDir("lm_one"), two = TempDir("lm_mirrored2"), workers = TempDir("lm_workers2");
  auto args = [](const std::string& dir) {
    return std::vector<std::string>{"--epochs=1", "--sample=0", "--metrics_out=" + dir + "/metrics.jsonl"};
  };
  RunToCompletion("examples/char_lm", args(one), one);
  std::vector<std::string> mirrored = args(two);
  mirrored.push_back("--strategy=mirrored");
  mirrored.push_back("--num_cpu_devices=2");
  RunToCompletion("examples/char_lm", mirrored, two);
  RunTwoWorkers("examples/char_lm", args(workers), workers);
  // The last step's loss and the validation loss, as the issue asks: within
  // 1e-4. (Adam divides by the gradients' running magnitude, so the order of
  // an all-reduce's additions moves some weights by up to about 2e-4 in 30
  // steps; the losses agree closer.)
  for (const char* key : {"loss", "val_loss"}) {
    const double l1 = FinalMetric(one + "/metrics.jsonl", key);
    EXPECT_NEAR(FinalMetric(two + "/metrics.jsonl", key), l1, 1e-4) << key;
    EXPECT_NEAR(FinalMetric(workers + "/metrics.jsonl", key), l1, 1e-4) << key;
  }
  // 988 windows of 32 characters, batches of 32 (the last of 28).
  const std::string last = "/ckpt-31";
  std::vector<std::string> weights = {"tokens/embeddings", "positions/embeddings", "final_norm/gamma",
                                      "final_norm/beta", "logits/kernel", "logits/bias"};
  for (const char* block : {"block0", "block1"}) {
    for (const char* w : {"ln1/gamma", "ln1/beta", "ln2/gamma", "ln2/beta", "attention/query/kernel",
                          "attention/key/kernel", "attention/value/kernel", "attention/output/kernel",
                          "attention/output/bias", "ff1/kernel", "ff1/bias", "ff2/kernel", "ff2/bias"}) {
      weights.push_back(absl::StrCat(block, "/", w));
    }
  }
  EXPECT_LE(WorstWeightDifference(one + last, two + last, weights), 1e-3);
  EXPECT_LE(WorstWeightDifference(one + last, workers + last, weights), 1e-3);
}

// The transformer split into 2 pipeline stages (a block each, the
// embeddings on the first, the head on the second; 4 micro-batches, 1F1B)
// ends on the unsplit model's weights. SGD: Adam's division by the
// gradients' magnitude turns the rounding of a near-zero gradient summed
// over micro-batches into a step of the learning rate (1.8e-3 in 31 steps).
TEST(ExamplesTest, CharLmTransformerInPipelineStagesEndsOnTheUnsplitWeights) {
  const std::string one = TempDir("lm_sgd_one"), stages = TempDir("lm_sgd_stages2");
  auto args = [](const std::string& dir) {
    return std::vector<std::string>{"--epochs=1", "--sample=0", "--optimizer=sgd",
                                    "--learning_rate=0.1",
                                    "--metrics_out=" + dir + "/metrics.jsonl"};
  };
  RunToCompletion("examples/char_lm", args(one), one);
  std::vector<std::string> pipelined = args(stages);
  for (const char* a : {"--pipeline_stages=2", "--micro_batches=4", "--num_cpu_devices=2"})
    pipelined.push_back(a);
  RunToCompletion("examples/char_lm", pipelined, stages);
  for (const char* key : {"loss", "val_loss"}) {
    EXPECT_NEAR(FinalMetric(stages + "/metrics.jsonl", key),
                FinalMetric(one + "/metrics.jsonl", key), 1e-5)
        << key;
  }
  std::vector<std::string> weights = {"tokens/embeddings", "positions/embeddings",
                                      "final_norm/gamma",  "final_norm/beta",
                                      "logits/kernel",     "logits/bias"};
  for (const char* block : {"block0", "block1"}) {
    for (const char* w : {"ln1/gamma", "ln2/beta", "attention/query/kernel",
                          "attention/output/bias", "ff1/kernel", "ff2/bias"}) {
      weights.push_back(absl::StrCat(block, "/", w));
    }
  }
  EXPECT_LE(WorstWeightDifference(one + "/ckpt-31", stages + "/ckpt-31", weights), 1e-5);
}

// The step in "regression: worker W preempted after step S" of a worker's
// output; -1 if absent.
int64_t PreemptedStep(const std::string& out) {
  const std::string key = "preempted after step ";
  const size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + key.size());
}

TEST(ExamplesTest, SigtermToOneWorkerStopsEveryWorkerAtOneStepAndTheRelaunchEndsExactly) {
  const std::vector<std::string> args = {"--epochs=1000", "--save_every_steps=2000"};
  const std::string whole = TempDir("preempt_whole"), cut = TempDir("preempt_cut");
  RunTwoWorkers("examples/regression", args, whole);

  // Worker 1 gets SIGTERM once the run has saved step 2000.
  ClusterOptions o;
  o.program = Runfile("examples/regression");
  o.args = args;
  for (const char* a : {"--strategy=multi_worker_mirrored", "--quiet"}) o.args.push_back(a);
  o.args.push_back("--checkpoint_dir=" + cut);
  absl::StatusOr<std::unique_ptr<ClusterRunner>> c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->WaitUntil(CheckpointReached(cut, 2000), absl::Seconds(60)).ok());
  ASSERT_TRUE((*c)->Signal(1, SIGTERM).ok());
  const std::vector<WorkerExit> ends = (*c)->Join(absl::Seconds(60));
  int64_t stopped[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(ends[i].code, 0) << "worker " << i << ": " << Describe(ends[i]);
    stopped[i] = PreemptedStep(ends[i].out);
    EXPECT_GT(stopped[i], 0) << "worker " << i << " was not preempted: " << Describe(ends[i]);
  }
  EXPECT_EQ(stopped[0], stopped[1]) << "the workers stopped after different steps";
  EXPECT_TRUE(FileExists(absl::StrCat(cut, "/ckpt-", stopped[0], ".index"))) << "no checkpoint at the stop";

  RunTwoWorkers("examples/regression", args, cut);
  int compared = 0;
  ExpectSameTensors(whole + "/ckpt-32000", cut + "/ckpt-32000", &compared);
  EXPECT_GT(compared, 0);
}

TEST(ExamplesTest, RegressionResumesExactlyAfterACrash) {
  const std::string whole = TempDir("regression_whole"), cut = TempDir("regression_cut");
  RunToCompletion("examples/regression", {"--epochs=3", "--save_every_steps=10"}, whole);
  // The first run stops at step 50 (a checkpoint at 50), the second resumes.
  RunToCompletion("examples/regression", {"--steps=50", "--save_every_steps=10"}, cut);
  RunToCompletion("examples/regression", {"--epochs=3", "--save_every_steps=10"}, cut);
  int compared = 0;
  ExpectSameTensors(whole + "/ckpt-96", cut + "/ckpt-96", &compared);
  EXPECT_GT(compared, 0);
}

// A Fit worker that fails tells the others its error: the chief's run ends
// with worker 1's own message (here: its trace file cannot be written),
// named by task, not with a lost-peer error after a timeout.
TEST(ExamplesTest, AFailingWorkersErrorReachesTheChief) {
  ClusterOptions o;
  o.program = Runfile("examples/regression");
  o.num_workers = 2;
  o.args = {"--epochs=200", "--quiet", "--strategy=multi_worker_mirrored"};
  o.worker_args[1] = {"--trace_out=" + TempDir("failing_worker") + "/absent/trace.json"};
  absl::StatusOr<std::unique_ptr<ClusterRunner>> c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<WorkerExit> ends = (*c)->Join(absl::Seconds(120));
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_NE(ends[1].code, 0) << Describe(ends[1]);
  EXPECT_NE(ends[0].code, 0) << Describe(ends[0]);
  for (const WorkerExit& e : ends) {
    EXPECT_TRUE(absl::StrContains(e.err, "/job:worker/replica:0/task:1: trace_out:")) << Describe(e);
  }
}

// Ten Fit runs killed with SIGKILL at random moments (so at random steps,
// between or during checkpoints) and restarted end exactly on the
// uninterrupted run's weights and final loss.
TEST(ExamplesTest, RegressionKilledAtRandomStepsEndsExactlyWhereAnUninterruptedRunDoes) {
  // 300 epochs of 32 steps: about 2 s a run, so every kill lands mid-run.
  const std::vector<std::string> args = {"--epochs=300", "--save_every_steps=7"};
  const std::string last = "/ckpt-9600";
  auto with_metrics = [&](const std::string& dir) {
    std::vector<std::string> a = args;
    a.push_back("--metrics_out=" + dir + "/metrics.jsonl");
    return a;
  };
  const std::string whole = TempDir("killed_whole");
  RunToCompletion("examples/regression", with_metrics(whole), whole);
  const double final_loss = FinalMetric(whole + "/metrics.jsonl", "loss");
  std::mt19937 gen(20261128);
  std::uniform_int_distribution<int> delay_ms(50, 1200);
  for (int run = 0; run < 10; ++run) {
    const std::string cut = TempDir(absl::StrCat("killed_", run));
    std::vector<std::string> a = with_metrics(cut);
    a.push_back("--checkpoint_dir=" + cut);
    a.push_back("--quiet");
    Process p = SpawnProgram(Runfile("examples/regression"), a, cut + "/killed_stderr.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(gen)));
    ASSERT_EQ(kill(p.pid, SIGKILL), 0);
    const Exit killed = Wait(p);
    ASSERT_EQ(killed.signal, SIGKILL) << "run " << run << " ended before the kill: " << Describe(killed);
    const int64_t reached = LastStep(cut + "/metrics.jsonl");
    std::printf("run %d: killed at step >= %lld\n", run, static_cast<long long>(reached));
    RunToCompletion("examples/regression", with_metrics(cut), cut);
    SCOPED_TRACE(absl::StrCat("run ", run, " killed at step >= ", reached));
    int compared = 0;
    ExpectSameTensors(whole + last, cut + last, &compared);
    EXPECT_GT(compared, 0);
    EXPECT_EQ(FinalMetric(cut + "/metrics.jsonl", "loss"), final_loss);
  }
}

}  // namespace
}  // namespace testing
}  // namespace strata
