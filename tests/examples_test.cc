// The example trainers (examples/) as a user runs them: on one device,
// mirrored over 4 virtual CPUs and as 2 worker processes, each ending on the
// same weights (within 1e-5), and resuming after a crash exactly.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
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

// Two worker processes of `program` with TF_CONFIG, as tools/launch starts
// them; the chief writes the checkpoints to `dir`.
void RunTwoWorkers(const std::string& program, std::vector<std::string> args, const std::string& dir) {
  args.push_back("--checkpoint_dir=" + dir);
  args.push_back("--quiet");
  args.push_back("--strategy=multi_worker_mirrored");
  const std::string cluster = WorkerCluster(2);
  std::vector<Process> workers;
  for (int i = 0; i < 2; ++i) {
    const std::string tf_config =
        absl::StrCat("TF_CONFIG={\"cluster\":", cluster, ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}");
    workers.push_back(SpawnProgram(Runfile(program), args, absl::StrCat(dir, "/stderr.", i, ".txt"), {tf_config}));
  }
  for (const Process& w : workers) {
    const Exit e = Wait(w);
    EXPECT_EQ(e.code, 0) << Describe(e);
  }
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

TEST(ExamplesTest, DigitsCnnEndsOnTheSameWeightsUnderEveryStrategy) {
  const std::vector<std::string> args = {"--epochs=2"};
  const std::string one = TempDir("cnn_one"), two = TempDir("cnn_mirrored2"), workers = TempDir("cnn_workers2");
  RunToCompletion("examples/digits_cnn", args, one);
  std::vector<std::string> mirrored = args;
  mirrored.push_back("--strategy=mirrored");
  mirrored.push_back("--num_cpu_devices=2");
  RunToCompletion("examples/digits_cnn", mirrored, two);
  RunTwoWorkers("examples/digits_cnn", args, workers);
  // 2 epochs of 1437 / 32 steps.
  const std::string last = "/ckpt-88";
  std::vector<std::string> weights;
  for (const char* layer : {"conv2d", "conv2d_1", "dense", "dense_1"}) {
    weights.push_back(absl::StrCat(layer, "/kernel"));
    weights.push_back(absl::StrCat(layer, "/bias"));
  }
  EXPECT_LE(WorstWeightDifference(one + last, two + last, weights), 1e-5);
  EXPECT_LE(WorstWeightDifference(one + last, workers + last, weights), 1e-5);
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

}  // namespace
}  // namespace testing
}  // namespace strata
