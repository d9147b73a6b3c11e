// The trainer under a real Slurm: munged, slurmctld and slurmd started for
// this test on this machine (tests/cluster/slurm_cluster.sh, their files
// under the test's temporary directory), and `srun -n 2` of the unmodified
// trainer, which reads its cluster from srun's SLURM_* variables, trains the
// weights one process trains. A task that dies takes the step down (srun
// --kill-on-bad-exit) and the other task names it. Skips, saying what is
// missing, where Slurm is not installed (Debian: slurm-wlm munge).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

// Runs `command` with sh, returning its stdout; -1 exit code on failure to start.
int RunShell(const std::string& command, std::string* out) {
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  const int status = pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    script_ = Runfile("tests/cluster/slurm_cluster.sh");
    std::string out;
    if (RunShell(absl::StrCat("bash ", script_, " check 2>&1"), &out) != 0) {
      GTEST_SKIP() << "Slurm cannot start here: " << out;
    }
    dir_ = TempDir("slurm");
    std::string lines;
    const int rc = RunShell(absl::StrCat("bash ", script_, " start ", dir_), &lines);
    ASSERT_EQ(rc, 0) << "the test cluster did not start (stderr above)";
    // The script prints `export SLURM_CONF=...` and `unset SLURM_...` lines
    // (the latter where this test itself runs inside a Slurm job).
    for (absl::string_view line : absl::StrSplit(lines, '\n')) {
      if (absl::ConsumePrefix(&line, "export ")) {
        std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
        setenv(kv.first.c_str(), kv.second.c_str(), 1);
      } else if (absl::ConsumePrefix(&line, "unset ")) {
        for (absl::string_view v : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
          unsetenv(std::string(v).c_str());
        }
      }
    }
    started_ = true;
  }
  void TearDown() override {
    if (!started_) return;
    std::string out;
    RunShell(absl::StrCat("bash ", script_, " stop ", dir_, " 2>&1"), &out);
  }

  // `srun -n <tasks>` of the trainer with `flags`; its stderr in `name`.
  Exit Srun(int tasks, const std::vector<std::string>& flags, const std::string& name) {
    std::vector<std::string> args = {"-n", absl::StrCat(tasks), "--kill-on-bad-exit=1",
                                     "--overcommit", Runfile("tools/trainer")};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
    // srun passes this environment (the job token included) to the tasks.
    return Wait(
        SpawnProgram("/usr/bin/srun", args, TempDir(name) + "/stderr.txt", {JobTokenEnv()}));
  }

  std::string script_;
  std::string dir_;
  bool started_ = false;
};

std::vector<std::string> TrainFlags(int steps, const std::string& ckpt) {
  return {"--optimizer=sgd",
          "--hidden=32",
          absl::StrCat("--steps=", steps),
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          absl::StrCat("--checkpoint_dir=", ckpt)};
}

TEST_F(SlurmTest, SrunOfTheTrainerTrainsTheWeightsOfOneProcess) {
  const std::string one = TempDir("one_process");
  Exit e = RunTrainer(TrainFlags(20, one), "one_process");
  ASSERT_EQ(e.code, 0) << Describe(e);

  const std::string ckpt = TempDir("srun_ckpt");
  std::vector<std::string> flags = TrainFlags(20, ckpt);
  const int base = FreePortPair();
  ASSERT_GT(base, 0);
  flags.insert(flags.end(), {"--strategy=multi_worker_mirrored", "--startup_timeout=60",
                             absl::StrCat("--slurm_port_base=", base)});
  Exit s = Srun(2, flags, "srun");
  ASSERT_EQ(s.code, 0) << Describe(s);
  // Each task said where its cluster came from (srun merges their stderr).
  EXPECT_TRUE(absl::StrContains(s.err, "cluster from slurm (SLURM_PROCID=0")) << s.err;
  EXPECT_TRUE(absl::StrContains(s.err, "cluster from slurm (SLURM_PROCID=1")) << s.err;
  EXPECT_TRUE(absl::StrContains(s.err, absl::StrCat(":", base + 1))) << s.err;
  EXPECT_GE(ExpectCloseTensors(absl::StrCat(one, "/ckpt-20"), absl::StrCat(ckpt, "/ckpt-20"), 1e-5),
            0);
}

TEST_F(SlurmTest, ATaskThatDiesIsNamedByTheOther) {
  // srun --multi-prog gives task 1 its own command line: it kills itself
  // after step 5 (SIGKILL, no goodbye). Task 0 must end, naming it, well
  // before its 2000 steps.
  const std::string ckpt = TempDir("dying_ckpt");
  const int base = FreePortPair();
  ASSERT_GT(base, 0);
  std::vector<std::string> flags = TrainFlags(2000, ckpt);
  flags.insert(flags.end(), {"--strategy=multi_worker_mirrored", "--startup_timeout=60",
                             "--heartbeat_timeout=3", absl::StrCat("--slurm_port_base=", base),
                             absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz"))});
  const std::string command =
      absl::StrCat(Runfile("tools/trainer"), " ", absl::StrJoin(flags, " "));
  const std::string conf = TempDir("multi_prog") + "/tasks.conf";
  FILE* f = fopen(conf.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "0 %s\n1 %s --crash_at_step=5\n", command.c_str(), command.c_str());
  fclose(f);
  // --label: each line of output starts with its task's number ("0: ").
  Exit s = Wait(SpawnProgram("/usr/bin/srun",
                             {"-n", "2", "--overcommit", "--label", "--multi-prog", conf},
                             TempDir("dying") + "/stderr.txt", {JobTokenEnv()}));
  EXPECT_NE(s.code, 0) << Describe(s);
  EXPECT_FALSE(s.timed_out);
  bool named = false;
  for (absl::string_view line : absl::StrSplit(s.err, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    named = named || (absl::StartsWith(line, "0: ") &&
                      absl::StrContains(line, "/job:worker/replica:0/task:1") &&
                      !absl::StrContains(line, "cluster from"));
  }
  EXPECT_TRUE(named) << "task 0 never named task 1:\n" << s.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
