// End to end: ZeRO stage 1 (--zero_stage=1) across real trainer processes
// on loopback. 2 workers x 2 devices shard Adam's slots over 4 replicas;
// after 200 steps, interrupted at 120 and resumed, every weight and every
// (unsharded-named) slot of the cluster's checkpoint is within 1e-5 of a
// one-device run's; each save gathers the workers' blocks, which the chief
// writes; the resumed run restores each worker's blocks.
#include <string>
#include <vector>

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

}  // namespace
}  // namespace testing
}  // namespace strata
