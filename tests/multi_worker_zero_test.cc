// End to end: ZeRO stage 1 and PowerSGD across real trainer processes on
// loopback.
//
// ZeRO (--zero_stage=1): 2 workers x 2 devices shard Adam's slots over 4 replicas;
// after 200 steps, interrupted at 120 and resumed, every weight and every
// (unsharded-named) slot of the cluster's checkpoint is within 1e-5 of a
// one-device run's; each save is sharded (each worker writes its blocks, the
// chief commits the index); the resumed run restores each worker's blocks;
// the sharded checkpoint restores into 4 replicas of one process, sharded,
// and into one device, and one device's into the sharded cluster.
//
// PowerSGD (--gradient_compression=powersgd): 2 workers x 2 devices, rank
// 2; the steps before --powersgd_start_step are the uncompressed all-reduce
// (losses within 1e-5 of one device), compression then starts on every
// worker at once (the conditional's collectives meet across processes), the
// run stops and resumes (the compressor's state is scratch, not in the
// checkpoint) and reaches one device's test accuracy within 3 points.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
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

  // The cluster's checkpoints are sharded: each worker wrote the slots it
  // holds to a shard of its own; the chief's index names both.
  auto reader = CheckpointReader::Open(sharded + "/ckpt-200");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->shard_prefixes().size(), 2u);
  EXPECT_TRUE((*reader)->VerifyAll().ok());

  // Restores across shapes, each continued to step 240 and compared with
  // one device continuing its own checkpoint: the sharded checkpoint on one
  // process of 4 replicas sharded there and on one device unsharded; one
  // device's unsharded checkpoint on the 2-worker sharded cluster.
  auto resume = [&](const std::string& from, const std::string& name) {
    const std::string dir = TempDir(name + "_ckpt");  // `name` holds the logs
    std::filesystem::copy(from, dir,
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
    std::filesystem::remove(dir + "/m.jsonl");
    std::vector<std::string> f = common;
    f.insert(f.end(), {"--steps=240", "--checkpoint_dir=" + dir, "--metrics_out=" + dir + "/m.jsonl"});
    return std::make_pair(dir, f);
  };
  // (A run from scratch would end the same: each must say it resumed.)
  auto resumed = [](const std::string& err, const std::string& dir) {
    return absl::StrContains(err, "resumed from " + dir + "/ckpt-200 at step 200");
  };
  auto [reference, reference_flags] = resume(one, "zero_continue_one");
  e = RunTrainer(reference_flags, "zero_continue_one");
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(resumed(e.err, reference)) << e.err;
  const double want = FinalMetric(reference + "/m.jsonl", "loss");
  ASSERT_GT(want, 0);
  auto [four, four_flags] = resume(sharded, "zero_sharded_on_four");
  four_flags.insert(four_flags.end(), {"--zero_stage=1", "--num_cpu_devices=4"});
  e = RunTrainer(four_flags, "zero_sharded_on_four");
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(resumed(e.err, four)) << e.err;
  auto [alone_dir, alone_flags] = resume(sharded, "zero_sharded_on_one");
  e = RunTrainer(alone_flags, "zero_sharded_on_one");
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(resumed(e.err, alone_dir)) << e.err;
  auto [cluster_dir, cluster_flags] = resume(one, "zero_one_on_cluster");
  cluster_flags.insert(cluster_flags.end(), {"--zero_stage=1", "--num_cpu_devices=2"});
  exits = RunTrainerCluster(2, "zero_one_on_cluster", cluster_flags);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  EXPECT_TRUE(resumed(exits[0].err, cluster_dir)) << exits[0].err;  // the chief reports
  for (const std::string& dir : {four, alone_dir, cluster_dir}) {
    EXPECT_EQ(LastStep(dir + "/m.jsonl"), 240) << dir;
    EXPECT_NEAR(FinalMetric(dir + "/m.jsonl", "loss"), want, 1e-5) << dir;
  }

  // A shard of the newest checkpoint lost: that checkpoint is skipped,
  // naming the shard, and the run resumes from the one before.
  auto [damaged, damaged_flags] = resume(sharded, "zero_lost_shard");
  std::filesystem::remove(damaged + "/" + io::BaseName((*reader)->shard_prefixes()[1]) + ".index");
  e = RunTrainer(damaged_flags, "zero_lost_shard");
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(e.err, io::BaseName((*reader)->shard_prefixes()[1])) &&
              absl::StrContains(e.err, "is missing"))
      << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "resumed from " + damaged + "/ckpt-160 at step 160")) << e.err;
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
