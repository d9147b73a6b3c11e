// End to end: parameter-server clusters of real trainer processes on
// loopback (--strategy=parameter_server: a chief coordinating, workers
// stepping asynchronously, variables on ps tasks), as TF_CONFIG or
// tools/launch --num_ps configures them. What a user relies on:
//   - the digits MLP and CNN trained by 2 workers and 2 ps tasks end within a
//     point of the accuracy one process reaches in the same epochs;
//   - a worker killed mid-step (SIGKILL) costs nothing: its step runs
//     elsewhere, the run finishes, and the worker restarted by the launcher
//     takes steps again;
//   - a ps task killed ends every task with an error naming it, within the
//     heartbeat timeout and 5 s; with tools/launch --max_restarts the job
//     starts again and resumes from its checkpoint;
//   - a checkpoint written with 2 ps tasks resumes on 1, a partitioned
//     table's too (whole);
//   - --max_staleness=0 (rounds) ends on the weights two synchronous
//     workers train, within 1e-5, also when stopped half way and resumed
//     (the checkpoint holds the workers' input positions);
//   - a cluster without ps tasks or without a chief is refused, naming it;
//   - a 1M x 64 embedding table partitioned over 2 ps tasks trains with no
//     task's peak resident memory reaching the table's size, its checkpoint
//     (written and restored a partition at a time) included, and resumes
//     over 3 ps tasks likewise.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

// The last "test accuracy <x>" in `text`; -1 if none.
double LastAccuracy(const std::string& text) {
  const std::string key = "test accuracy ";
  const size_t at = text.rfind(key);
  if (at == std::string::npos) return -1;
  const size_t begin = at + key.size();
  size_t end = begin;
  while (end < text.size() && (isdigit(text[end]) || text[end] == '.')) ++end;
  double v = -1;
  return absl::SimpleAtod(text.substr(begin, end - begin), &v) ? v : -1;
}

std::vector<std::string> Flags(int epochs) {
  return {"--hidden=32", absl::StrCat("--epochs=", epochs), "--prefetch=0", "--intra_op_threads=1"};
}

// Runs tools/launch with `launch_flags` over the trainer with `flags`
// (through `wrapper`, a shell script taking the trainer and its flags,
// when given).
Exit Launch(const std::vector<std::string>& launch_flags, const std::vector<std::string>& flags,
            const std::string& name, const std::string& wrapper = "") {
  const std::string dir = TempDir(name);
  std::vector<std::string> args = launch_flags;
  args.push_back("--");
  if (!wrapper.empty()) args.push_back(wrapper);
  args.push_back(Runfile("tools/trainer"));
  args.push_back("--strategy=parameter_server");
  args.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
  args.insert(args.end(), flags.begin(), flags.end());
  Process p = SpawnProgram(Runfile("tools/launch"), args, dir + "/stderr.txt", {JobTokenEnv()});
  return Wait(p);
}

TEST(ParameterServerTest, TwoWorkersAndTwoPsTasksTrainWithinAPointOfOneProcess) {
  const int epochs = 10;
  Exit one = RunTrainer(Flags(epochs), "ps_one_process");
  ASSERT_EQ(one.code, 0) << Describe(one);
  const double sync_accuracy = LastAccuracy(one.err);
  ASSERT_GT(sync_accuracy, 0.9) << one.err;
  Exit ps = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, Flags(epochs), "ps_run");
  ASSERT_EQ(ps.code, 0) << Describe(ps);
  // Every task had its role; the chief trained the run's steps.
  for (const char* role : {"[ps:0]", "[ps:1]", "[worker:0]", "[worker:1]", "[chief:0]"}) {
    EXPECT_TRUE(absl::StrContains(ps.out + ps.err, role)) << role;
  }
  ASSERT_TRUE(absl::StrContains(ps.out + ps.err, "done: ")) << Describe(ps);
  const double async_accuracy = LastAccuracy(ps.out + ps.err);
  EXPECT_NEAR(async_accuracy, sync_accuracy, 0.01) << Describe(ps);
}

TEST(ParameterServerTest, TheCnnTrainsWithinAPointOfOneProcess) {
  // Asynchronous runs differ from one another (the order updates land in),
  // by about a point on the 359 test examples here: the median of three
  // runs is compared.
  const std::vector<std::string> flags = {"--model=cnn", "--epochs=15", "--prefetch=0",
                                          "--intra_op_threads=1"};
  Exit one = RunTrainer(flags, "ps_cnn_one_process");
  ASSERT_EQ(one.code, 0) << Describe(one);
  ASSERT_GT(LastAccuracy(one.err), 0.9) << one.err;
  std::vector<double> accuracies;
  for (int run = 0; run < 3; ++run) {
    Exit ps = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, flags,
                     absl::StrCat("ps_cnn_run_", run));
    ASSERT_EQ(ps.code, 0) << Describe(ps);
    accuracies.push_back(LastAccuracy(ps.out + ps.err));
  }
  std::sort(accuracies.begin(), accuracies.end());
  EXPECT_NEAR(accuracies[1], LastAccuracy(one.err), 0.01)
      << "runs: " << absl::StrJoin(accuracies, ", ");
}

// Each task's "peak resident memory N bytes" line, by task name.
std::vector<std::pair<std::string, int64_t>> PeakMemory(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  const std::string key = ": peak resident memory ";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const size_t line = text.rfind("trainer ", at);
    const size_t begin = at + key.size();
    int64_t bytes = -1;
    (void)absl::SimpleAtoi(text.substr(begin, text.find(' ', begin) - begin), &bytes);
    out.push_back({line == std::string::npos ? "?" : text.substr(line + 8, at - line - 8), bytes});
  }
  return out;
}

TEST(ParameterServerTest, AMillionRowTableOverTwoPsTasksIsNeverWholeInAnyTask) {
  // 1M x 64 floats: 256 MB, split over the two ps tasks; the workers and
  // the chief look rows up and send rows back (sparse updates), so no task
  // ever holds the table whole.
  // The chief's checkpoint, saved at the end, is written a partition at a
  // time, and restored so into 3 ps tasks.
  const int64_t table_bytes = int64_t{1000000} * 64 * 4;
  const std::string ckpt = TempDir("ps_embedding_checkpoint_dir");
  auto run = [&](int num_ps, const std::string& partitioner, const std::string& length,
                 const std::string& name) {
    return Launch({"--num_chiefs=1", "--num_workers=2", absl::StrCat("--num_ps=", num_ps)},
                  {"--model=embedding", "--vocabulary=1000000", "--embedding_dim=64",
                   "--variable_partitioner=" + partitioner, "--optimizer=sgd", "--learning_rate=5",
                   length, "--prefetch=0", "--intra_op_threads=1", "--checkpoint_dir=" + ckpt},
                  name);
  };
  auto expect_never_whole = [&](const Exit& e, int num_ps) {
    const auto peaks = PeakMemory(e.out + e.err);
    ASSERT_EQ(peaks.size(), 3u + num_ps) << Describe(e);
    for (const auto& [task, bytes] : peaks) {
      EXPECT_GT(bytes, 0) << task;
      EXPECT_LT(bytes, table_bytes) << task << " held " << bytes << " bytes at its peak";
      // A ps task holds its part of the table.
      if (absl::StrContains(task, "/job:ps/")) {
        EXPECT_GT(bytes, table_bytes / num_ps) << task;
      }
    }
  };
  Exit ps = run(2, "fixed:2", "--epochs=20", "ps_embedding");
  ASSERT_EQ(ps.code, 0) << Describe(ps);
  expect_never_whole(ps, 2);
  const double accuracy = LastAccuracy(ps.out + ps.err);
  EXPECT_GT(accuracy, 0.9) << Describe(ps);
  Exit resumed = run(3, "fixed:3", "--epochs=21", "ps_embedding_resumed");
  ASSERT_EQ(resumed.code, 0) << Describe(resumed);
  EXPECT_TRUE(absl::StrContains(resumed.out + resumed.err, "resumed from")) << Describe(resumed);
  expect_never_whole(resumed, 3);
  EXPECT_GT(LastAccuracy(resumed.out + resumed.err), accuracy - 0.02) << Describe(resumed);
  // The measure can tell: unpartitioned, the table's ps task holds it
  // whole (and each step reads all of it: two steps do).
  ASSERT_TRUE(std::filesystem::remove_all(ckpt) > 0);
  Exit whole = run(2, "", "--steps=2", "ps_embedding_whole");
  ASSERT_EQ(whole.code, 0) << Describe(whole);
  int64_t largest = 0;
  for (const auto& [task, bytes] : PeakMemory(whole.out + whole.err))
    largest = std::max(largest, bytes);
  EXPECT_GT(largest, table_bytes);
}

TEST(ParameterServerTest, AKilledWorkersStepRunsElsewhereAndTheRestartedWorkerRejoins) {
  // worker:1's first life SIGKILLs itself in its 10th step (the update
  // applied, the answer never sent); the launcher starts it again.
  const std::string dir = TempDir("ps_worker_killed");
  const std::string wrapper = dir + "/crash_once.sh";
  {
    std::ofstream f(wrapper);
    f << "#!/bin/sh\n"
      << "if [ \"$STRATA_TASK\" = worker:1 ] && [ ! -e " << dir << "/crashed ]; then\n"
      << "  touch " << dir << "/crashed\n"
      << "  exec \"$@\" --crash_at_step=10\n"
      << "fi\n"
      << "exec \"$@\"\n";
  }
  chmod(wrapper.c_str(), 0755);
  Exit e = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2", "--max_worker_restarts=1"},
                  Flags(30), "ps_worker_killed_run", wrapper);
  const std::string all = e.out + e.err;
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "worker:1")) << all;
  EXPECT_TRUE(absl::StrContains(all, "restarted worker:1")) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "done: ")) << Describe(e);
  // The chief's last epoch line: the step rescheduled, both workers up.
  const size_t last = all.rfind("epoch ");
  ASSERT_NE(last, std::string::npos);
  const std::string line = all.substr(last, all.find('\n', last) - last);
  EXPECT_TRUE(absl::StrContains(line, "2 of 2 workers up")) << line;
  EXPECT_FALSE(absl::StrContains(line, " 0 steps rescheduled")) << line;
  EXPECT_GT(LastAccuracy(all), 0.9) << Describe(e);
}

// Every float tensor of synchronous checkpoint `sync` (but the trainer's
// feature statistics) is in `ps` with the same shape, each element within
// `rel_tol` relative; returns how many were compared.
int ExpectSameWeights(const std::string& sync, const std::string& ps, double rel_tol) {
  auto a = CheckpointReader::Open(sync);
  auto b = CheckpointReader::Open(ps);
  EXPECT_TRUE(a.ok() && b.ok()) << sync << " / " << ps;
  if (!a.ok() || !b.ok()) return 0;
  int compared = 0;
  for (const auto& [name, info] : (*a)->tensors()) {
    if (absl::StartsWith(name, "_trainer/")) continue;
    Tensor x, y;
    EXPECT_TRUE((*a)->Read(name, &x).ok()) << name;
    if (!(*b)->Read(name, &y).ok()) {
      ADD_FAILURE() << name << " is not in " << ps;
      continue;
    }
    if (x.dtype() != y.dtype() || x.shape() != y.shape()) {
      ADD_FAILURE() << name << ": " << x.shape().DebugString() << " vs " << y.shape().DebugString();
      continue;
    }
    ++compared;
    if (x.dtype() != DT_FLOAT) {
      EXPECT_EQ(0, std::memcmp(x.raw_data(), y.raw_data(), x.TotalBytes())) << name;
      continue;
    }
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      const double u = x.data<float>()[i], v = y.data<float>()[i];
      if (std::abs(u - v) / std::max(std::abs(u), 1e-3) > rel_tol) {
        ADD_FAILURE() << name << "[" << i << "]: " << u << " vs " << v;
        break;
      }
    }
  }
  return compared;
}

TEST(ParameterServerTest, AStalenessBoundOfZeroTrainsAsSynchronousWorkersDo) {
  // Two synchronous workers (multi_worker_mirrored, each its half of every
  // global batch) and two workers with ps tasks at staleness 0 (rounds: each
  // worker's half, the mean gradient applied once per round) end on the same
  // weights: the MLP, and an embedding table partitioned over the ps tasks
  // (initialised to the whole table's values, its sparse gradients
  // accumulated beside each partition) against the whole table.
  const std::vector<std::vector<std::string>> models = {
      {"--hidden=32"},
      {"--model=embedding", "--vocabulary=20000", "--embedding_dim=8", "--learning_rate=5",
       "--variable_partitioner=fixed:2", "--steps=220"}};
  for (size_t k = 0; k < models.size(); ++k) {
    SCOPED_TRACE(models[k][0]);
    std::vector<std::string> flags = {"--optimizer=sgd",  "--steps=60",   "--global_batch_size=48",
                                      "--drop_remainder", "--prefetch=0", "--intra_op_threads=1"};
    flags.insert(flags.end(), models[k].begin(), models[k].end());
    const std::string sync_dir = TempDir(absl::StrCat("ps_sync_reference_", k));
    std::vector<std::string> sync_args = {"--num_workers=2",
                                          "--",
                                          Runfile("tools/trainer"),
                                          "--strategy=multi_worker_mirrored",
                                          "--checkpoint_dir=" + sync_dir,
                                          "--digits_path=" + Runfile("data/digits/digits.csv.gz")};
    // (--variable_partitioner is the parameter-server strategy's; the
    // synchronous run's table is whole.)
    sync_args.insert(sync_args.end(), flags.begin(), flags.end());
    Exit sync = Wait(SpawnProgram(
        Runfile("tools/launch"), sync_args,
        TempDir(absl::StrCat("ps_sync_reference_log_", k)) + "/stderr.txt", {JobTokenEnv()}));
    ASSERT_EQ(sync.code, 0) << Describe(sync);
    const std::string ps_dir = TempDir(absl::StrCat("ps_rounds_", k));
    std::vector<std::string> ps_flags = flags;
    ps_flags.push_back("--max_staleness=0");
    ps_flags.push_back("--checkpoint_dir=" + ps_dir);
    Exit ps = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, ps_flags,
                     absl::StrCat("ps_rounds_run_", k));
    ASSERT_EQ(ps.code, 0) << Describe(ps);
    EXPECT_TRUE(absl::StrContains(
        ps.out + ps.err, k == 0 ? "steps per worker: 60, 60" : "steps per worker: 220, 220"))
        << Describe(ps);
    // The MLP's 2 kernels, 2 biases and step counter; the table (saved
    // whole), the dense layer's kernel and bias and the counter.
    EXPECT_GE(ExpectSameWeights(sync_dir + (k == 0 ? "/ckpt-60" : "/ckpt-220"),
                                ps_dir + (k == 0 ? "/ckpt-60" : "/ckpt-220"), 1e-5),
              k == 0 ? 5 : 4);
    EXPECT_NEAR(LastAccuracy(ps.out + ps.err), LastAccuracy(sync.out + sync.err), 1e-6);
    if (k != 0) continue;
    // Stopped after 30 steps and resumed from its checkpoint, which holds
    // the workers' input positions: each goes on with the batches it would
    // have read next, and the run ends on the same weights.
    const std::string resumed_dir = TempDir("ps_rounds_resumed");
    std::vector<std::string> resumed_flags = flags;
    resumed_flags.push_back("--max_staleness=0");
    resumed_flags.push_back("--checkpoint_dir=" + resumed_dir);
    std::vector<std::string> half = resumed_flags;
    std::replace(half.begin(), half.end(), std::string("--steps=60"), std::string("--steps=30"));
    Exit first =
        Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, half, "ps_rounds_half");
    ASSERT_EQ(first.code, 0) << Describe(first);
    Exit second = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, resumed_flags,
                         "ps_rounds_resumed_run");
    ASSERT_EQ(second.code, 0) << Describe(second);
    EXPECT_TRUE(absl::StrContains(second.out + second.err,
                                  "input positions restored on 2 of 2 workers (2 saved)"))
        << Describe(second);
    EXPECT_GE(ExpectSameWeights(sync_dir + "/ckpt-60", resumed_dir + "/ckpt-60", 1e-5), 5);
  }
}

TEST(ParameterServerTest, ACheckpointOfTwoPsTasksResumesOnOne) {
  const std::string ckpt = TempDir("ps_checkpoint_dir");
  std::vector<std::string> flags = Flags(0);
  flags[1] = "--steps=300";
  flags.push_back("--checkpoint_dir=" + ckpt);
  Exit first = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, flags, "ps_ckpt_first");
  ASSERT_EQ(first.code, 0) << Describe(first);
  const double accuracy_at_300 = LastAccuracy(first.out + first.err);
  ASSERT_GT(accuracy_at_300, 0.8) << Describe(first);
  // The same variables, saved by name, restored into one ps task.
  flags[1] = "--steps=600";
  Exit second =
      Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=1"}, flags, "ps_ckpt_second");
  ASSERT_EQ(second.code, 0) << Describe(second);
  const std::string all = second.out + second.err;
  EXPECT_TRUE(absl::StrContains(all, "ckpt-300 at step 300")) << Describe(second);
  // Its first epoch line is past step 300 and starts from the trained model.
  const size_t first_epoch = all.find("epoch ");
  ASSERT_NE(first_epoch, std::string::npos);
  const std::string line = all.substr(first_epoch, all.find('\n', first_epoch) - first_epoch);
  EXPECT_TRUE(absl::StrContains(line, "(step 308)")) << line;
  EXPECT_GT(LastAccuracy(line), accuracy_at_300 - 0.02) << line;
  EXPECT_TRUE(absl::StrContains(all, "done: 600 steps")) << Describe(second);
}

TEST(ParameterServerTest, APartitionedTablesCheckpointResumesWholeOnOnePsTask) {
  const std::string ckpt = TempDir("ps_partitioned_checkpoint_dir");
  std::vector<std::string> flags = {
      "--model=embedding", "--optimizer=sgd",      "--learning_rate=5",       "--steps=176",
      "--prefetch=0",      "--intra_op_threads=1", "--checkpoint_dir=" + ckpt};
  flags.push_back("--variable_partitioner=fixed:2");
  Exit first = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2"}, flags,
                      "ps_partitioned_ckpt_first");
  ASSERT_EQ(first.code, 0) << Describe(first);
  const double accuracy_before = LastAccuracy(first.out + first.err);
  ASSERT_GT(accuracy_before, 0.5) << Describe(first);
  // The table saved whole under its name, restored into one unpartitioned
  // variable.
  flags.pop_back();
  flags[3] = "--steps=220";
  Exit second = Launch({"--num_chiefs=1", "--num_workers=1", "--num_ps=1"}, flags,
                       "ps_partitioned_ckpt_second");
  ASSERT_EQ(second.code, 0) << Describe(second);
  const std::string all = second.out + second.err;
  EXPECT_TRUE(absl::StrContains(all, "ckpt-176 at step 176")) << Describe(second);
  EXPECT_GT(LastAccuracy(all), accuracy_before - 0.02) << Describe(second);
}

TEST(ParameterServerTest, AfterAKilledPsTaskTheLauncherRestartsTheJobFromItsCheckpoint) {
  // ps:1's first life is SIGKILLed once a checkpoint exists; the chief's
  // steps fail naming it, the chief exits, and --max_restarts starts every
  // task again: the chief resumes from the newest checkpoint and finishes.
  const std::string dir = TempDir("ps_restart");
  const std::string wrapper = dir + "/kill_ps_once.sh";
  {
    std::ofstream f(wrapper);
    f << "#!/bin/sh\n"
      << "if [ \"$STRATA_TASK\" = ps:1 ] && [ ! -e " << dir << "/killed ]; then\n"
      << "  touch " << dir << "/killed\n"
      << "  \"$@\" &\n"
      << "  child=$!\n"
      << "  while [ ! -e " << dir << "/ckpt/checkpoint ]; do sleep 0.05; done\n"
      << "  sleep 0.2\n"
      << "  kill -9 $child\n"
      << "  wait $child\n"
      << "  exit 137\n"
      << "fi\n"
      << "exec \"$@\"\n";
  }
  chmod(wrapper.c_str(), 0755);
  std::vector<std::string> flags = Flags(0);
  flags[1] = "--steps=8000";
  flags.push_back("--checkpoint_dir=" + dir + "/ckpt");
  flags.push_back("--save_every_steps=200");
  flags.push_back("--heartbeat_timeout=2");
  Exit e = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=2", "--max_restarts=1"}, flags,
                  "ps_restart_run", wrapper);
  const std::string all = e.out + e.err;
  ASSERT_EQ(e.code, 0) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "/job:ps/replica:0/task:1")) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "restarting every task")) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "resumed from ")) << Describe(e);
  EXPECT_TRUE(absl::StrContains(all, "done: 8000 steps")) << Describe(e);
}

// One process per task with TF_CONFIG, so that the test knows every pid.
struct PsCluster {
  std::vector<std::string> names;  // "chief:0", "worker:0", ...
  std::vector<Process> tasks;
};

PsCluster StartPsCluster(const std::string& dir, const std::vector<std::string>& flags) {
  const std::vector<int> ports = FreePorts(5);
  auto at = [&](int i) { return absl::StrCat("\"127.0.0.1:", ports[i], "\""); };
  const std::string cluster = absl::StrCat("{\"chief\":[", at(0), "],\"worker\":[", at(1), ",",
                                           at(2), "],\"ps\":[", at(3), ",", at(4), "]}");
  PsCluster c;
  c.names = {"chief:0", "worker:0", "worker:1", "ps:0", "ps:1"};
  for (const std::string& name : c.names) {
    const size_t colon = name.find(':');
    const std::string tf_config =
        absl::StrCat("TF_CONFIG={\"cluster\":", cluster, ",\"task\":{\"type\":\"",
                     name.substr(0, colon), "\",\"index\":", name.substr(colon + 1), "}}");
    std::vector<std::string> args = flags;
    args.push_back("--strategy=parameter_server");
    c.tasks.push_back(Spawn(args, absl::StrCat(dir, "/stderr_", name, ".txt"), {tf_config}));
  }
  return c;
}

// A ps task killed (its port then refuses), or frozen (SIGSTOP: its
// kernel keeps the connections open, nothing answers; the workers' keepalive
// pings find it): every other task ends non-zero naming it, within the
// heartbeat timeout and 5 s (and the 1 s between pings).
class LostPsTask : public ::testing::TestWithParam<int> {};

TEST_P(LostPsTask, EndsEveryTaskNamingIt) {
  const int signal = GetParam();
  const std::string dir = TempDir(signal == SIGKILL ? "ps_killed" : "ps_stopped");
  const double heartbeat = 2;
  std::vector<std::string> flags = Flags(100000);
  flags.push_back(absl::StrCat("--heartbeat_timeout=", heartbeat));
  PsCluster c = StartPsCluster(dir, flags);
  // Training is under way once the chief logged an epoch.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!absl::StrContains(ReadFile(c.tasks[0].stderr_path), "epoch 2") &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(absl::StrContains(ReadFile(c.tasks[0].stderr_path), "epoch 2"))
      << ReadFile(c.tasks[0].stderr_path);
  const auto lost = Clock::now();
  kill(c.tasks[4].pid, signal);  // ps:1
  for (size_t i = 0; i < c.tasks.size(); ++i) {
    if (i == 4) continue;
    Exit e = Wait(c.tasks[i]);
    EXPECT_NE(e.code, 0) << c.names[i] << ": " << Describe(e);
    EXPECT_TRUE(absl::StrContains(e.err, "/job:ps/replica:0/task:1"))
        << c.names[i] << ": " << e.err;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - lost).count();
  EXPECT_LT(seconds, heartbeat + (signal == SIGKILL ? 5 : 6))
      << "the tasks took " << seconds << " s to end";
  if (signal != SIGKILL) kill(c.tasks[4].pid, SIGKILL);
  Wait(c.tasks[4]);
}

INSTANTIATE_TEST_SUITE_P(Signals, LostPsTask, ::testing::Values(SIGKILL, SIGSTOP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGKILL ? std::string("Killed")
                                                        : std::string("Stopped");
                         });

TEST(ParameterServerTest, AWorkerWhoseInputFailsIsNamedByTheChiefAtOnce) {
  // worker:1 is given a file that does not exist: it fails at start and
  // tells the chief, which ends the job naming it and the file.
  const std::string dir = TempDir("ps_bad_input");
  const std::string wrapper = dir + "/bad_input.sh";
  {
    std::ofstream f(wrapper);
    f << "#!/bin/sh\n"
      << "if [ \"$STRATA_TASK\" = worker:1 ]; then exec \"$@\" --data=csv:" << dir
      << "/missing.csv; fi\n"
      << "exec \"$@\"\n";
  }
  chmod(wrapper.c_str(), 0755);
  const auto start = Clock::now();
  Exit e = Launch({"--num_chiefs=1", "--num_workers=2", "--num_ps=1"}, Flags(5), "ps_bad_input_run",
                  wrapper);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(e.code, 1) << Describe(e);
  const std::string all = e.out + e.err;
  ASSERT_NE(all.find("[chief:0] trainer: error"), std::string::npos) << Describe(e);
  const std::string line = all.substr(all.find("[chief:0] trainer: error"));
  EXPECT_TRUE(absl::StrContains(line.substr(0, line.find('\n')), "/job:worker/replica:0/task:1"))
      << line;
  EXPECT_TRUE(absl::StrContains(line.substr(0, line.find('\n')), "missing.csv")) << line;
  EXPECT_LT(seconds, 30) << "the chief waited for its start-up timeout";
}

TEST(ParameterServerTest, AClusterWithoutPsTasksOrAChiefIsRefused) {
  const std::vector<int> ports = FreePorts(2);
  const std::string no_ps = absl::StrCat(
      "TF_CONFIG={\"cluster\":{\"chief\":[\"127.0.0.1:", ports[0],
      "\"],\"worker\":[\"127.0.0.1:", ports[1], "\"]},\"task\":{\"type\":\"chief\",\"index\":0}}");
  const std::string dir = TempDir("ps_refused");
  Exit e = Wait(Spawn({"--strategy=parameter_server"}, dir + "/no_ps.txt", {no_ps}));
  EXPECT_EQ(e.code, 1);
  EXPECT_TRUE(absl::StrContains(e.err, "has no ps task")) << e.err;
  const std::string no_chief = absl::StrCat(
      "TF_CONFIG={\"cluster\":{\"ps\":[\"127.0.0.1:", ports[0],
      "\"],\"worker\":[\"127.0.0.1:", ports[1], "\"]},\"task\":{\"type\":\"worker\",\"index\":0}}");
  e = Wait(Spawn({"--strategy=parameter_server"}, dir + "/no_chief.txt", {no_chief}));
  EXPECT_EQ(e.code, 1);
  EXPECT_TRUE(absl::StrContains(e.err, "has no chief task")) << e.err;
  // A ps task that is also a worker (one address for both).
  const std::string shared =
      absl::StrCat("TF_CONFIG={\"cluster\":{\"chief\":[\"127.0.0.1:", ports[0],
                   "\"],\"worker\":[\"127.0.0.1:", ports[1], "\"],\"ps\":[\"127.0.0.1:", ports[1],
                   "\"]},\"task\":{\"type\":\"ps\",\"index\":0}}");
  e = Wait(Spawn({"--strategy=parameter_server"}, dir + "/shared.txt", {shared}));
  EXPECT_EQ(e.code, 1);
  EXPECT_TRUE(absl::StrContains(e.err, absl::StrCat("127.0.0.1:", ports[1]))) << e.err;
}

}  // namespace
}  // namespace testing
}  // namespace strata
