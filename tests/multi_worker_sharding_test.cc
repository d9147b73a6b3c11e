// End to end: input auto-sharding across real trainer processes on loopback
// (--strategy=multi_worker_mirrored). What a user relies on:
//   - 2 workers over 4 CSV files (the digits, cut in 4) each load only
//     their own 2 files (FILE), say so in one line each, cover every
//     training example between them, and train to a good test accuracy
//     (measured over every worker's test examples);
//   - a FILE-sharded cluster restarted from its checkpoint ends bitwise
//     identical to an uninterrupted one;
//   - with fewer files than workers the input is sharded by example (DATA),
//     and --input_sharding=file is refused at start-up saying why.

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"
#include "train/data/csv.h"

namespace strata {
namespace testing {
namespace {


// The digits cut into `n` CSV files part_0.csv ... of consecutive rows, in
// a fresh directory; returns the directory.
std::string DigitsInFiles(const std::string& name, int n) {
  const std::string dir = TempDir(name);
  absl::StatusOr<data::DatasetPtr> digits = data::LoadCsv({Runfile("data/digits/digits.csv.gz")});
  EXPECT_TRUE(digits.ok()) << digits.status();
  if (!digits.ok()) return dir;
  const int64_t rows = (*digits)->Cardinality();
  for (int f = 0; f < n; ++f) {
    std::ofstream out(absl::StrCat(dir, "/part_", f, ".csv"));
    for (int64_t i = rows * f / n; i < rows * (f + 1) / n; ++i) {
      data::Example e;
      EXPECT_TRUE((*digits)->Get(i, &e).ok());
      for (int64_t j = 0; j < e[0].NumElements(); ++j) out << e[0].data<float>()[j] << ",";
      out << *e[1].data<int32_t>() << "\n";
    }
  }
  return dir;
}

// From a worker's sharding line: its files, its training examples and the
// cluster's.
struct ShardLine {
  std::string policy, files;
  int64_t mine = -1, all = -1;
};

ShardLine ParseShardLine(const std::string& err) {
  ShardLine out;
  std::smatch m;
  static const std::regex kLine(
      R"(input sharding (\w+) \(.*?\): reads 2 of 4 files \(([^)]*)\), (\d+) of the (\d+) training)");
  static const std::regex kPolicy(R"(input sharding (\w+) )");
  if (std::regex_search(err, m, kLine)) {
    out.policy = m[1];
    out.files = m[2];
    EXPECT_TRUE(absl::SimpleAtoi(std::string(m[3]), &out.mine));
    EXPECT_TRUE(absl::SimpleAtoi(std::string(m[4]), &out.all));
  } else if (std::regex_search(err, m, kPolicy)) {
    out.policy = m[1];
  }
  return out;
}

// Digits rows cut into CSV files of the given sizes (consecutive rows);
// returns "dir/part_0.csv,dir/part_1.csv,...".
std::string DigitsInFilesOf(const std::string& name, const std::vector<int>& sizes) {
  const std::string dir = TempDir(name);
  absl::StatusOr<data::DatasetPtr> digits = data::LoadCsv({Runfile("data/digits/digits.csv.gz")});
  EXPECT_TRUE(digits.ok()) << digits.status();
  std::vector<std::string> paths;
  int64_t row = 0;
  for (size_t f = 0; f < sizes.size() && digits.ok(); ++f) {
    paths.push_back(absl::StrCat(dir, "/part_", f, ".csv"));
    std::ofstream out(paths.back());
    for (int i = 0; i < sizes[f]; ++i, ++row) {
      data::Example e;
      EXPECT_TRUE((*digits)->Get(row, &e).ok());
      for (int64_t j = 0; j < e[0].NumElements(); ++j) out << e[0].data<float>()[j] << ",";
      out << *e[1].data<int32_t>() << "\n";
    }
  }
  return absl::StrJoin(paths, ",");
}

std::vector<std::string> Flags(const std::string& data, int steps, const std::string& ckpt) {
  return {"--data=csv:" + data, "--hidden=32", "--global_batch_size=48", absl::StrCat("--steps=", steps),
          "--prefetch=2", "--checkpoint_dir=" + ckpt};
}

TEST(MultiWorkerShardingTest, TwoWorkersOverFourFilesEachReadTheirOwnAndLearn) {
  const std::string data = DigitsInFiles("four_files", 4);
  const std::string ckpt = TempDir("four_files_ckpt");
  std::vector<std::string> flags = Flags(data, 600, ckpt);  // about 20 epochs
  flags.push_back("--metrics_out=" + ckpt + "/metrics.jsonl");
  const std::vector<Exit> exits = RunTrainerCluster(2, "four_files_run", flags);
  ASSERT_EQ(exits.size(), 2u);
  int64_t total = 0;
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
    const ShardLine line = ParseShardLine(exits[w].err);
    EXPECT_EQ(line.policy, "FILE") << exits[w].err;
    // Worker w reads files w and w + 2 of the sorted list, and no other.
    EXPECT_EQ(line.files, absl::StrCat("part_", w, ".csv, part_", w + 2, ".csv")) << exits[w].err;
    EXPECT_GT(line.mine, 600) << exits[w].err;  // half of the 1437 training examples
    EXPECT_EQ(line.all, 1437) << exits[w].err;
    total += line.mine;
  }
  EXPECT_EQ(total, 1437);  // disjoint shares that cover every training example
  const double accuracy = FinalMetric(ckpt + "/metrics.jsonl", "test_accuracy");
  EXPECT_GE(accuracy, 0.9) << exits[0].err;
  // Over every worker's test examples, not the chief's alone.
  EXPECT_EQ(FinalMetric(ckpt + "/metrics.jsonl", "test_examples"), 360);
}

TEST(MultiWorkerShardingTest, ARestartedFileShardedClusterEndsBitwiseIdentical) {
  const std::string data = DigitsInFiles("restart_files", 4);
  const std::string straight = TempDir("restart_straight_ckpt");
  std::vector<std::string> flags = Flags(data, 40, straight);
  flags.push_back("--save_every_steps=10");
  for (const Exit& e : RunTrainerCluster(2, "restart_straight", flags)) ASSERT_EQ(e.code, 0) << Describe(e);

  const std::string resumed = TempDir("restart_resumed_ckpt");
  flags = Flags(data, 40, resumed);
  flags.push_back("--save_every_steps=10");
  std::vector<std::string> crashing = flags;
  crashing.push_back("--crash_at_step=25");  // both workers die after step 25 (checkpoint 20)
  for (const Exit& e : RunTrainerCluster(2, "restart_crashing", crashing)) EXPECT_NE(e.code, 0);
  const std::vector<Exit> exits = RunTrainerCluster(2, "restart_resuming", flags);
  for (const Exit& e : exits) {
    ASSERT_EQ(e.code, 0) << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, "input sharding FILE")) << e.err;
  }
  EXPECT_TRUE(absl::StrContains(exits[0].err, "resumed from")) << exits[0].err;
  int compared = 0;
  ExpectSameTensors(straight + "/ckpt-40", resumed + "/ckpt-40", &compared);
  EXPECT_GT(compared, 4);
}

TEST(MultiWorkerShardingTest, FewerFilesThanWorkersShardsByExampleAndFileIsRefused) {
  const std::string data = DigitsInFiles("one_file", 1);
  std::vector<Exit> exits = RunTrainerCluster(2, "one_file_auto", Flags(data, 5, TempDir("one_file_ckpt")));
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(exits[w].code, 0) << Describe(exits[w]);
    EXPECT_TRUE(absl::StrContains(exits[w].err, "input sharding DATA (auto: only 1 file(s) for 2 workers)"))
        << exits[w].err;
  }
  std::vector<std::string> forced = Flags(data, 5, TempDir("one_file_forced_ckpt"));
  forced.push_back("--input_sharding=file");
  exits = RunTrainerCluster(2, "one_file_forced", forced);
  for (int w = 0; w < 2; ++w) {
    EXPECT_NE(exits[w].code, 0) << Describe(exits[w]);
    EXPECT_TRUE(absl::StrContains(exits[w].err, "at least as many files as workers")) << exits[w].err;
  }
  EXPECT_TRUE(absl::StrContains(exits[0].err, "--input_sharding=file")) << exits[0].err;
}

// Uneven inputs (as PyTorch's Join): files of 100, 97 and 61 examples over
// 3 workers (one file each) and over 2 (161 and 97): every worker runs the
// longest shard's steps each epoch, the others' last batches partial or
// empty and weighted, so no worker waits for a collective another never
// starts; no example is dropped or repeated within an epoch.
TEST(MultiWorkerShardingTest, UnevenFilesFinishEveryEpochWithoutAHang) {
  const std::string data = DigitsInFilesOf("uneven", {100, 97, 61});
  struct Case {
    int workers;
    std::string shards;  // the sharding line's counts
    int steps;           // per epoch
    int devices;         // per worker
  };
  for (const Case& c : {Case{3, "100, 97, 61", 7, 1}, Case{2, "161, 97", 7, 2}}) {
    SCOPED_TRACE(absl::StrCat(c.workers, " workers"));
    const std::string metrics = TempDir(absl::StrCat("uneven_", c.workers)) + "/metrics.jsonl";
    std::vector<Exit> exits = RunTrainerCluster(
        c.workers, absl::StrCat("uneven_run_", c.workers),
        {"--data=csv:" + data, "--hidden=32", "--global_batch_size=48", "--epochs=4",
         "--test_fraction=0", "--prefetch=2", "--metrics_out=" + metrics,
         absl::StrCat("--num_cpu_devices=", c.devices)});
    for (int w = 0; w < c.workers; ++w) {
      EXPECT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
      EXPECT_TRUE(absl::StrContains(
          exits[w].err, absl::StrCat("the shards are uneven (", c.shards,
                                     " examples): every epoch is ", c.steps,
                                     " steps, each example once")))
          << exits[w].err;
    }
    const std::string m = ReadFile(metrics);
    for (int e = 1; e <= 4; ++e) {
      EXPECT_TRUE(absl::StrContains(m, absl::StrCat("{\"epoch\":", e, ",\"step\":", e * c.steps,
                                                    ",\"loss\":")))
          << m;
    }
  }
  // A shard with no examples at all is refused naming its worker.
  const std::string tiny = DigitsInFilesOf("uneven_tiny", {50, 1});
  std::vector<Exit> exits =
      RunTrainerCluster(2, "uneven_tiny_run",
                 {"--data=csv:" + tiny, "--hidden=32", "--global_batch_size=48", "--steps=5",
                  "--test_fraction=0.5"});
  EXPECT_NE(exits[0].code, 0);
  EXPECT_TRUE(absl::StrContains(exits[0].err + exits[1].err, "holds no training examples"))
      << exits[0].err << exits[1].err;
}

// A partial last global batch (--drop_remainder=false, DATA sharding): the
// 1438 training digits in global batches of 40 are 36 steps an epoch, the
// last of 38 examples, split 10/10/9/9 over 2 workers x 2 devices and
// weighted: the cluster ends where one device does, and the epochs end
// where they should.
TEST(MultiWorkerShardingTest, PartialLastBatchesTrainAsOneDeviceDoes) {
  const std::string data = DigitsInFiles("partial", 1);
  const std::vector<std::string> common = {"--data=csv:" + data, "--hidden=32", "--global_batch_size=40",
                                           "--epochs=2", "--drop_remainder=false", "--optimizer=sgd",
                                           "--intra_op_threads=1"};
  const std::string one = TempDir("partial_one");
  std::vector<std::string> alone = common;
  alone.push_back("--checkpoint_dir=" + one);
  Exit e = RunTrainer(alone, "partial_one");
  ASSERT_EQ(e.code, 0) << Describe(e);
  const std::string cluster = TempDir("partial_cluster");
  std::vector<std::string> flags = common;
  flags.insert(flags.end(), {"--checkpoint_dir=" + cluster, "--num_cpu_devices=2",
                             "--metrics_out=" + cluster + "/metrics.jsonl"});
  std::vector<Exit> exits = RunTrainerCluster(2, "partial_run", flags);
  for (int w = 0; w < 2; ++w) ASSERT_EQ(exits[w].code, 0) << "worker " << w << " " << Describe(exits[w]);
  const std::string m = ReadFile(cluster + "/metrics.jsonl");
  EXPECT_TRUE(absl::StrContains(m, "{\"epoch\":1,\"step\":36,\"loss\":")) << m;
  EXPECT_TRUE(absl::StrContains(m, "{\"epoch\":2,\"step\":72,\"loss\":")) << m;
  EXPECT_LE(ExpectCloseTensors(one + "/ckpt-72", cluster + "/ckpt-72", 1e-5), 1e-5);
  // Dropping the remainder instead: 35 steps an epoch, another model.
  const std::string dropped = TempDir("partial_dropped");
  std::vector<std::string> drop = common;
  drop[4] = "--drop_remainder=true";
  drop.push_back("--checkpoint_dir=" + dropped);
  e = RunTrainer(drop, "partial_dropped");
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(std::ifstream(dropped + "/ckpt-70.index").good()) << e.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
