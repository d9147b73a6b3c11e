// End to end: ZeRO stage 1 and PowerSGD across real trainer processes on
// loopback.
//
// ZeRO (--zero_stage=1): 2 workers x 2 devices shard Adam's slots over 4 replicas;
// after 200 steps, interrupted at 120 and resumed, every weight and every
// (unsharded-named) slot of the cluster's checkpoint is within 1e-5 of a
// one-device run's; each save gathers the workers' blocks, which the chief
// writes; the resumed run restores each worker's blocks.
//
// PowerSGD (--gradient_compression=powersgd): 2 workers x 2 devices, rank
// 2; the steps before --powersgd_start_step are the uncompressed all-reduce
// (losses within 1e-5 of one device), compression then starts on every
// worker at once (the conditional's collectives meet across processes), the
// run stops and resumes (the compressor's state is scratch, not in the
// checkpoint) and reaches one device's test accuracy within 3 points.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {


TEST(MultiWorkerZeroTest, ShardedAdamOnTwoWorkersResumesAndEndsAsOneDevice) {
  const std::vector<std::string> common = {"--hidden=32", "--global_batch_size=48",
                                           "--optimizer=adam", "--learning_rate=0.003",
                                           "--intra_op_threads=1", "--save_every_steps=40"};
  const std::string one = TempDir("zero_one");
  std::vector<std::string> alone = common;
  alone.insert(alone.end(),
               {"--steps=200", "--checkpoint_dir=" + one, "--metrics_out=" + one + "/m.jsonl"});
  Exit e = RunTrainer(alone, "zero_one");
  ASSERT_EQ(e.code, 0) << Describe(e);

  const std::string sharded = TempDir("zero_cluster");
  std::vector<std::string> flags = common;
  flags.insert(flags.end(), {"--zero_stage=1", "--num_cpu_devices=2",
                             "--checkpoint_dir=" + sharded});
  std::vector<std::string> first = flags;
  first.push_back("--steps=120");
  std::vector<Exit> exits = RunTrainerCluster(2, "zero_first", first);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  std::vector<std::string> second = flags;
  second.insert(second.end(), {"--steps=200", "--metrics_out=" + sharded + "/m.jsonl"});
  exits = RunTrainerCluster(2, "zero_second", second);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  EXPECT_NE(exits[0].err.find("resumed"), std::string::npos) << exits[0].err;
  // The last step's loss and the test loss within 1e-5.
  for (const char* key : {"loss", "test_loss"}) {
    const double a = FinalMetric(one + "/m.jsonl", key);
    ASSERT_GT(a, 0) << key;
    EXPECT_NEAR(FinalMetric(sharded + "/m.jsonl", key), a, 1e-5) << key;
  }
  // Every tensor of the one-device checkpoint (weights, "<weight>/Adam",
  // "<weight>/Adam_1", the step counter) in the cluster's and the other way
  // round, equal to rounding: the sums' order differs, and Adam's step
  // divides by the root of v, so an element of size 1e-3 differs by 1e-8.
  EXPECT_LE(ExpectCloseTensors(one + "/ckpt-200", sharded + "/ckpt-200", 1e-4), 1e-4);
  EXPECT_LE(ExpectCloseTensors(sharded + "/ckpt-200", one + "/ckpt-200", 1e-4), 1e-4);
}

// step -> loss of the metrics file's per-step lines.
std::map<int64_t, double> StepLosses(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  std::string line;
  auto number = [&line](const std::string& key, double* v) {
    const size_t at = line.find("\"" + key + "\":");
    if (at == std::string::npos) return false;
    const size_t from = at + key.size() + 3;
    const size_t to = line.find_first_of(",}", from);
    return absl::SimpleAtod(line.substr(from, to - from), v);
  };
  while (std::getline(in, line)) {
    double step = 0, loss = 0;
    if (absl::StrContains(line, "final")) continue;
    if (number("step", &step) && number("loss", &loss)) out[static_cast<int64_t>(step)] = loss;
  }
  return out;
}

TEST(MultiWorkerZeroTest, PowerSgdOnTwoWorkersStartsTogetherResumesAndLearns) {
  const std::vector<std::string> common = {"--hidden=64,64", "--global_batch_size=64",
                                           "--optimizer=momentum", "--learning_rate=0.05",
                                           "--intra_op_threads=1", "--save_every_steps=50"};
  const std::string one = TempDir("powersgd_one");
  std::vector<std::string> alone = common;
  alone.insert(alone.end(),
               {"--steps=150", "--checkpoint_dir=" + one, "--metrics_out=" + one + "/m.jsonl"});
  Exit e = RunTrainer(alone, "powersgd_one");
  ASSERT_EQ(e.code, 0) << Describe(e);

  const std::string cluster = TempDir("powersgd_cluster");
  std::vector<std::string> flags = common;
  flags.insert(flags.end(), {"--gradient_compression=powersgd", "--powersgd_rank=2",
                             "--powersgd_start_step=10", "--num_cpu_devices=2",
                             "--checkpoint_dir=" + cluster,
                             "--metrics_out=" + cluster + "/m.jsonl"});
  std::vector<std::string> first = flags;
  first.push_back("--steps=100");
  std::vector<Exit> exits = RunTrainerCluster(2, "powersgd_first", first);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  std::vector<std::string> second = flags;
  second.push_back("--steps=150");
  exits = RunTrainerCluster(2, "powersgd_second", second);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  EXPECT_NE(exits[0].err.find("resumed"), std::string::npos) << exits[0].err;

  const std::map<int64_t, double> base = StepLosses(one + "/m.jsonl");
  const std::map<int64_t, double> compressed = StepLosses(cluster + "/m.jsonl");
  ASSERT_GE(base.size(), 150u);
  int before = 0, after_differ = 0;
  for (const auto& [step, loss] : compressed) {
    auto b = base.find(step);
    if (b == base.end()) continue;
    if (step <= 10) {
      EXPECT_NEAR(loss, b->second, 1e-5) << "step " << step << " (before compression starts)";
      ++before;
    } else if (step <= 100 && std::abs(loss - b->second) > 1e-4) {
      ++after_differ;
    }
  }
  EXPECT_GE(before, 5);
  EXPECT_GT(after_differ, 10) << "compression changed nothing";
  const double want = FinalMetric(one + "/m.jsonl", "test_accuracy");
  ASSERT_GT(want, 0.8);
  EXPECT_GT(FinalMetric(cluster + "/m.jsonl", "test_accuracy"), want - 0.03);
}

}  // namespace
}  // namespace testing
}  // namespace strata
