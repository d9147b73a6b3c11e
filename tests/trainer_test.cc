// Acceptance tests of tools/trainer as a user runs it: real processes, real
// files, real signals.
//
//   - the digits MLP 64-128-10 reaches >= 96% test accuracy, the CNN >= 90%;
//   - a run killed with SIGKILL (by itself right after a step, or from
//     outside while it trains) and restarted with the same flags ends with
//     weights bitwise identical to an uninterrupted run's;
//   - SIGTERM mid-run saves at the step the run stops after and exits 0;
//     the relaunch ends bitwise where an uninterrupted run does;
//   - a checkpoint with one flipped byte (index or data) is refused with
//     DataLoss and the run resumes from the previous one, again ending
//     bitwise identical to an uninterrupted run;
//   - bad flags and bad data exit non-zero with a message naming the flag,
//     or the file and line.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_manager.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "tests/trainer_process.h"

namespace strata {
namespace {

using testing::Exit;
using testing::FinalMetric;
using testing::LastStep;
using testing::Process;
using testing::ReadFile;
using testing::RunTrainer;
using testing::Spawn;
using testing::TempDir;
using testing::Wait;

// Every tensor of the two checkpoints, byte for byte.
void ExpectSameTensors(const std::string& a, const std::string& b) {
  int compared = 0;
  testing::ExpectSameTensors(a, b, &compared);
  // Weights and biases, Adam's m and v for each, the step counter, stats.
  EXPECT_GE(compared, 6 * 3 + 1);
}

TEST(TrainerTest, DigitsMlpReaches96PercentTestAccuracy) {
  const std::string dir = TempDir("digits_mlp");
  const std::string metrics = dir + "/metrics.jsonl";
  const auto t0 = std::chrono::steady_clock::now();
  Exit e = RunTrainer({"--model=mlp", "--hidden=128", "--data=digits", "--epochs=30",
                       absl::StrCat("--metrics_out=", metrics)},
                      "digits_mlp");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(e.code, 0) << e.err;
  const double acc = FinalMetric(metrics, "test_accuracy");
  std::printf("digits MLP 64-128-10: test accuracy %.4f, test loss %.4f, %.2f s wall\n", acc,
              FinalMetric(metrics, "test_loss"), seconds);
  EXPECT_GE(acc, 0.96);
  EXPECT_LT(FinalMetric(metrics, "test_loss"), 0.3);
  // One line per step (1438 training examples / 32: 45 steps per epoch, the
  // last of 30 examples), then the final one.
  EXPECT_EQ(LastStep(metrics), 45 * 30);
  EXPECT_EQ(FinalMetric(metrics, "step"), 45 * 30);
  EXPECT_TRUE(absl::StrContains(e.err, "test accuracy")) << e.err;
}

TEST(TrainerTest, CnnTrainsOnDigits) {
  const std::string dir = TempDir("digits_cnn");
  const std::string metrics = dir + "/metrics.jsonl";
  Exit e = RunTrainer({"--model=cnn", "--epochs=5", absl::StrCat("--metrics_out=", metrics)}, "cnn");
  ASSERT_EQ(e.code, 0) << e.err;
  const double acc = FinalMetric(metrics, "test_accuracy");
  std::printf("digits CNN, 5 epochs: test accuracy %.4f\n", acc);
  EXPECT_GE(acc, 0.90);
}

// Mixed precision (issue 21's check): the digits MLP and CNN under
// mixed_bfloat16 and mixed_float16 (loss-scaled) reach float32's test
// accuracy within 1 point.
TEST(TrainerTest, MixedPrecisionReachesFloat32AccuracyWithinOnePoint) {
  for (const char* model : {"mlp", "cnn"}) {
    double float32 = 0;
    for (const char* policy : {"float32", "mixed_bfloat16", "mixed_float16"}) {
      const std::string dir = TempDir(absl::StrCat("mixed_", model, "_", policy));
      const std::string metrics = dir + "/metrics.jsonl";
      Exit e = RunTrainer({absl::StrCat("--model=", model), "--hidden=128", "--steps=400",
                           absl::StrCat("--dtype_policy=", policy),
                           absl::StrCat("--metrics_out=", metrics)},
                          absl::StrCat("mixed_", model, "_", policy));
      ASSERT_EQ(e.code, 0) << e.err;
      const double acc = FinalMetric(metrics, "test_accuracy");
      std::printf("digits %s under %s: test accuracy %.4f\n", model, policy, acc);
      if (std::string(policy) == "float32") {
        float32 = acc;
        EXPECT_GE(acc, 0.9) << model;
      } else {
        EXPECT_GE(acc, float32 - 0.01) << model << " under " << policy;
      }
    }
  }
}

std::vector<std::string> ResumeFlags(const std::string& dir, int64_t steps) {
  return {"--model=mlp", "--hidden=64,32", "--optimizer=adam", "--global_batch_size=32",
          absl::StrCat("--steps=", steps), "--save_every_steps=50", "--max_to_keep=3",
          absl::StrCat("--checkpoint_dir=", dir), absl::StrCat("--metrics_out=", dir, "/metrics.jsonl")};
}

std::vector<std::string> With(std::vector<std::string> flags, const std::string& extra) {
  flags.push_back(extra);
  return flags;
}

TEST(TrainerTest, SelfKillAfterAStepThenResumeIsBitwiseIdentical) {
  const std::string ref = TempDir("selfkill_ref"), run = TempDir("selfkill_run");
  ASSERT_EQ(RunTrainer(ResumeFlags(ref, 300), "ref").code, 0);

  // Killed right after step 170: checkpoints 50, 100, 150 exist.
  Exit crashed = RunTrainer(With(ResumeFlags(run, 300), "--crash_at_step=170"), "crashed");
  ASSERT_EQ(crashed.signal, SIGKILL) << "exit code " << crashed.code << ": " << crashed.err;
  EXPECT_EQ(LastStep(run + "/metrics.jsonl"), 170);

  Exit resumed = RunTrainer(ResumeFlags(run, 300), "resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(absl::StrContains(resumed.err, "resumed from " + run + "/ckpt-150 at step 150"))
      << resumed.err;
  ExpectSameTensors(ref + "/ckpt-300", run + "/ckpt-300");
  EXPECT_EQ(FinalMetric(ref + "/metrics.jsonl", "test_accuracy"),
            FinalMetric(run + "/metrics.jsonl", "test_accuracy"));
}

TEST(TrainerTest, ExternalSigkillWhileTrainingThenResumeIsBitwiseIdentical) {
  // Wide layers make a step slow enough (~1 ms) to be killed mid-run; of
  // 1,200 steps about 900 are left when the kill comes (a run takes about
  // 35 s under TSan, three of them here).
  auto flags = [](const std::string& dir) {
    return std::vector<std::string>{
        "--model=mlp", "--hidden=512,512", "--global_batch_size=64", "--steps=1200",
        "--save_every_steps=100", "--intra_op_threads=1", absl::StrCat("--checkpoint_dir=", dir),
        absl::StrCat("--metrics_out=", dir, "/metrics.jsonl")};
  };
  const std::string ref = TempDir("extkill_ref"), run = TempDir("extkill_run");
  ASSERT_EQ(RunTrainer(flags(ref), "ext_ref").code, 0);

  Process p = Spawn(flags(run), TempDir("stderr") + "/ext_killed.txt");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (LastStep(run + "/metrics.jsonl") < 250 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(kill(p.pid, SIGKILL), 0);
  Exit killed = Wait(p);
  const int64_t reached = LastStep(run + "/metrics.jsonl");
  ASSERT_EQ(killed.signal, SIGKILL) << "the run ended before it could be killed (step " << reached
                                    << "): " << killed.err;
  ASSERT_LT(reached, 1200);
  std::printf("killed from outside at step >= %lld\n", static_cast<long long>(reached));

  Exit resumed = RunTrainer(flags(run), "ext_resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(absl::StrContains(resumed.err, "resumed from")) << resumed.err;
  ExpectSameTensors(ref + "/ckpt-1200", run + "/ckpt-1200");
}

// SIGTERM (a scheduler's preemption notice) mid-run: the trainer saves a
// checkpoint at the step it stops after and exits 0; the relaunch ends
// bitwise where an uninterrupted run does.
TEST(TrainerTest, SigtermSavesExitsZeroAndTheRelaunchEndsExactly) {
  auto flags = [](const std::string& dir) {
    return std::vector<std::string>{
        "--model=mlp", "--hidden=512,512", "--global_batch_size=64", "--steps=1200",
        "--save_every_steps=500", "--intra_op_threads=1", absl::StrCat("--checkpoint_dir=", dir),
        absl::StrCat("--metrics_out=", dir, "/metrics.jsonl")};
  };
  const std::string ref = TempDir("term_ref"), run = TempDir("term_run");
  ASSERT_EQ(RunTrainer(flags(ref), "term_ref").code, 0);

  Process p = Spawn(flags(run), TempDir("stderr") + "/term_stopped.txt");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (LastStep(run + "/metrics.jsonl") < 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(kill(p.pid, SIGTERM), 0);
  Exit stopped = Wait(p);
  ASSERT_EQ(stopped.code, 0) << testing::Describe(stopped);
  EXPECT_TRUE(absl::StrContains(stopped.err, "preempted: saving at step")) << stopped.err;
  const int64_t step = static_cast<int64_t>(FinalMetric(run + "/metrics.jsonl", "step"));
  ASSERT_GE(step, 200);
  ASSERT_LT(step, 1200) << "the run ended before the SIGTERM";
  // The checkpoint of the step it stopped after (not one of the periodic ones).
  struct stat st;
  EXPECT_EQ(stat(absl::StrCat(run, "/ckpt-", step, ".index").c_str(), &st), 0) << step;

  Exit resumed = RunTrainer(flags(run), "term_resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(absl::StrContains(resumed.err, absl::StrCat("resumed from ", run, "/ckpt-", step, " at step ", step)))
      << resumed.err;
  ExpectSameTensors(ref + "/ckpt-1200", run + "/ckpt-1200");
}

// Flips one byte at a seeded random position of `path`.
void FlipByte(const std::string& path, uint32_t seed) {
  std::string bytes = ReadFile(path);
  ASSERT_FALSE(bytes.empty()) << path;
  std::mt19937 gen(seed);
  const size_t at = std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(gen);
  bytes[at] = static_cast<char>(bytes[at] ^ (1 << (gen() % 8)));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The data file of checkpoint `base` in `dir` (BASE.data-...).
std::string DataFileOf(const std::string& dir, const std::string& base) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, base + ".data-")) names.push_back(name);
  }
  EXPECT_EQ(names.size(), 1u) << "data files of " << base << " in " << dir;
  return dir + "/" + (names.empty() ? std::string() : names[0]);
}

TEST(TrainerTest, CorruptLatestCheckpointIsRefusedAndThePreviousOneResumed) {
  const std::string ref = TempDir("corrupt_ref");
  ASSERT_EQ(RunTrainer(ResumeFlags(ref, 350), "corrupt_ref").code, 0);
  for (const std::string file : {"index", "data"}) {
    for (uint32_t seed : {1u, 2u}) {
      SCOPED_TRACE(absl::StrCat(file, " file, seed ", seed));
      const std::string run = TempDir(absl::StrCat("corrupt_", file, seed));
      ASSERT_EQ(RunTrainer(ResumeFlags(run, 300), "corrupt_first").code, 0);
      const std::string victim = file == "index" ? run + "/ckpt-300.index" : DataFileOf(run, "ckpt-300");
      FlipByte(victim, seed);

      // The reader refuses it with DataLoss, naming the file.
      absl::Status s;
      auto r = CheckpointReader::Open(run + "/ckpt-300");
      s = r.ok() ? (*r)->VerifyAll() : r.status();
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "ckpt-300")) << s;

      // The trainer says so and resumes from ckpt-250.
      Exit e = RunTrainer(ResumeFlags(run, 350), "corrupt_resume");
      ASSERT_EQ(e.code, 0) << e.err;
      EXPECT_TRUE(absl::StrContains(e.err, "skipping checkpoint: DATA_LOSS")) << e.err;
      EXPECT_TRUE(absl::StrContains(e.err, "resumed from " + run + "/ckpt-250 at step 250")) << e.err;
      ExpectSameTensors(ref + "/ckpt-350", run + "/ckpt-350");
    }
  }
}

TEST(TrainerTest, CsvWithABadRowNamesFileAndLine) {
  const std::string dir = TempDir("bad_csv");
  const std::string csv = dir + "/train.csv";
  std::ofstream(csv) << "f1,f2,label\n0.5,1.5,0\n1.0,2.0,1\n0.25,oops,1\n";
  Exit e = RunTrainer({absl::StrCat("--data=csv:", csv)}, "bad_csv");
  EXPECT_NE(e.code, 0);
  EXPECT_EQ(e.signal, 0);
  EXPECT_TRUE(absl::StrContains(e.err, csv)) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "line 4")) << e.err;
}

TEST(TrainerTest, CsvWithAbsurdLabelIsRefused) {
  const std::string dir = TempDir("huge_label");
  const std::string csv = dir + "/train.csv";
  std::ofstream(csv) << "0.5,1.5,0\n1.0,2.0,2000000000\n0.1,0.2,1\n0.3,0.3,0\n0.1,0.7,1\n";
  Exit e = RunTrainer({absl::StrCat("--data=csv:", csv), "--global_batch_size=2"}, "huge_label");
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "largest label is 2000000000")) << e.err;
}

TEST(TrainerTest, GoodCsvWithHeaderTrains) {
  const std::string dir = TempDir("good_csv");
  const std::string csv = dir + "/train.csv";
  {
    std::ofstream out(csv);
    out << "x,y,label\n";
    std::mt19937 gen(4);
    std::normal_distribution<float> n(0, 0.3f);
    for (int i = 0; i < 400; ++i) out << (i % 2 ? 1 : -1) + n(gen) << "," << n(gen) << "," << i % 2 << "\n";
  }
  const std::string metrics = dir + "/metrics.jsonl";
  Exit e = RunTrainer({absl::StrCat("--data=csv:", csv), "--hidden=8", "--epochs=10",
                       absl::StrCat("--metrics_out=", metrics)},
                      "good_csv");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_GE(FinalMetric(metrics, "test_accuracy"), 0.95);
}

TEST(TrainerTest, BadFlagsExitNonZeroWithAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model=resnet"}, "--model: unknown model 'resnet'"},
      {{"--optimizer=rmsprop"}, "--optimizer: unknown optimizer 'rmsprop'"},
      {{"--hidden=128,x"}, "--hidden=128,x"},
      {{"--data=synthetic:abc"}, "--data=synthetic:abc"},
      {{"--data=parquet:/x"}, "--data=parquet:/x"},
      {{"--data=csv:/no/such/file.csv"}, "/no/such/file.csv"},
      // Issue 23, defect 5: once std::bad_alloc after reading forever.
      {{"--data=csv:/dev/zero"}, "'/dev/zero' is a character device"},
      {{"--test_fraction=1.5"}, "--test_fraction"},
      // (Without --drop_remainder it is one partial batch an epoch.)
      {{"--global_batch_size=5000", "--drop_remainder"}, "--global_batch_size=5000"},
      {{"--save_every_steps=10"}, "needs --checkpoint_dir"},
      {{"--steps=abc"}, "steps"},
      {{"--no_such_flag=1"}, "no_such_flag"},
      {{"--model=cnn", "--data=synthetic:100:10:2"}, "square"},
      {{"--data=synthetic:100000000000:784"}, "too large"},
      {{"--hidden=200000000"}, "parameters"},
      {{"--epochs=9000000000000000000"}, "--epochs"},
  };
  for (const Case& c : cases) {
    Exit e = RunTrainer(c.args, "bad_flags");
    EXPECT_EQ(e.code, 1) << c.args[0] << ": " << e.err;
    EXPECT_EQ(e.signal, 0) << c.args[0];
    EXPECT_TRUE(absl::StrContains(e.err, c.message)) << c.args[0] << ": " << e.err;
  }
}

}  // namespace
}  // namespace strata
