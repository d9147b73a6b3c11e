// Acceptance tests of tools/trainer with --strategy=mirrored, as a user runs
// it: real processes on 4 virtual CPU devices.
//
//   - the digits MLP mirrored over 4 devices reaches the test accuracy of
//     one device with the same global batch and seed (within 1%);
//   - a mirrored run killed right after a step (SIGKILL) and restarted ends
//     with weights bitwise identical to an uninterrupted mirrored run's;
//   - checkpoints hold the same variables under the same names whatever the
//     strategy, and one written by either strategy resumes under the other
//     with the same weights;
//   - --trace_out writes a Chrome trace (valid JSON) with events on every
//     device's track and on the collectives' track, the gradients'
//     all-reduce overlapping the backward pass;
//   - unknown or duplicate devices and a global batch that does not split
//     over the replicas exit non-zero with a message naming the flag.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "tests/trainer_process.h"

namespace strata {
namespace {

using testing::Exit;
using testing::ExpectSameTensors;
using testing::FinalMetric;
using testing::ReadFile;
using testing::RunTrainer;
using testing::TempDir;

std::vector<std::string> Mirrored4() { return {"--strategy=mirrored", "--num_cpu_devices=4"}; }

std::vector<std::string> Join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// name -> (dtype, shape) of every tensor of a checkpoint.
std::map<std::string, std::string> Listing(const std::string& prefix) {
  std::map<std::string, std::string> out;
  auto r = CheckpointReader::Open(prefix);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return out;
  for (const auto& [name, info] : (*r)->tensors()) {
    out[name] = absl::StrCat(DataTypeString(info.dtype), info.shape.DebugString());
  }
  return out;
}

TEST(TrainerMirroredTest, FourDevicesReachOneDevicesTestAccuracy) {
  const std::vector<std::string> common = {"--model=mlp", "--hidden=128", "--data=digits",
                                           "--epochs=30", "--global_batch_size=32", "--seed=3"};
  const std::string one = TempDir("acc_one"), mirrored = TempDir("acc_mirrored");
  Exit a = RunTrainer(Join(common, {absl::StrCat("--metrics_out=", one, "/m.jsonl")}), "acc_one");
  ASSERT_EQ(a.code, 0) << a.err;
  Exit b = RunTrainer(
      Join(Join(common, Mirrored4()), {absl::StrCat("--metrics_out=", mirrored, "/m.jsonl")}),
      "acc_mirrored");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_TRUE(absl::StrContains(b.err, "mirrored on /job:localhost/replica:0/task:0/device:CPU:0, "
                                       "/job:localhost/replica:0/task:0/device:CPU:1, "
                                       "/job:localhost/replica:0/task:0/device:CPU:2, "
                                       "/job:localhost/replica:0/task:0/device:CPU:3"))
      << b.err;
  const double acc_one = FinalMetric(one + "/m.jsonl", "test_accuracy");
  const double acc_mirrored = FinalMetric(mirrored + "/m.jsonl", "test_accuracy");
  std::printf("digits MLP 64-128-10, 30 epochs of 32: test accuracy %.4f one device, %.4f mirrored x4\n",
              acc_one, acc_mirrored);
  EXPECT_GE(acc_one, 0.96);
  EXPECT_NEAR(acc_mirrored, acc_one, 0.01);
}

std::vector<std::string> ResumeFlags(const std::string& dir, int64_t steps) {
  return {"--model=mlp", "--hidden=64,32", "--optimizer=adam", "--global_batch_size=32",
          absl::StrCat("--steps=", steps), "--save_every_steps=50", "--max_to_keep=3",
          absl::StrCat("--checkpoint_dir=", dir), absl::StrCat("--metrics_out=", dir, "/metrics.jsonl")};
}

TEST(TrainerMirroredTest, SelfKillThenResumeIsBitwiseIdentical) {
  const std::string ref = TempDir("mkill_ref"), run = TempDir("mkill_run");
  ASSERT_EQ(RunTrainer(Join(ResumeFlags(ref, 300), Mirrored4()), "mkill_ref").code, 0);
  Exit crashed = RunTrainer(Join(Join(ResumeFlags(run, 300), Mirrored4()), {"--crash_at_step=170"}),
                            "mkill_crashed");
  ASSERT_EQ(crashed.signal, SIGKILL) << "exit code " << crashed.code << ": " << crashed.err;
  Exit resumed = RunTrainer(Join(ResumeFlags(run, 300), Mirrored4()), "mkill_resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(absl::StrContains(resumed.err, "resumed from " + run + "/ckpt-150 at step 150"))
      << resumed.err;
  ExpectSameTensors(ref + "/ckpt-300", run + "/ckpt-300");
  EXPECT_EQ(FinalMetric(ref + "/metrics.jsonl", "test_loss"),
            FinalMetric(run + "/metrics.jsonl", "test_loss"));
}

TEST(TrainerMirroredTest, CheckpointsMoveBetweenStrategies) {
  const std::string one = TempDir("move_one"), mirrored = TempDir("move_mirrored");
  ASSERT_EQ(RunTrainer(ResumeFlags(one, 100), "move_one").code, 0);
  ASSERT_EQ(RunTrainer(Join(ResumeFlags(mirrored, 100), Mirrored4()), "move_mirrored").code, 0);
  // The same variables (weights, Adam's slots, the step counter) under the
  // same names, dtypes and shapes.
  const std::map<std::string, std::string> names = Listing(one + "/ckpt-100");
  EXPECT_EQ(names, Listing(mirrored + "/ckpt-100"));
  EXPECT_GE(names.size(), 6u * 3 + 1);
  for (const auto& [name, type] : names) EXPECT_FALSE(absl::StrContains(name, "replica")) << name;

  // A run asked for the checkpoint's own step restores and evaluates the
  // restored weights: each strategy sees the other's weights exactly.
  struct Case {
    std::string written_by;
    std::vector<std::string> reader_flags;
  };
  for (const Case& c : {Case{mirrored, {"--strategy=one_device"}}, Case{one, Mirrored4()},
                        Case{one, {"--strategy=mirrored", "--devices=/cpu:1,/cpu:0"}}}) {
    SCOPED_TRACE(absl::StrCat(c.written_by, " read with ", c.reader_flags.back()));
    const std::string dir = TempDir("move_copy");
    ASSERT_EQ(std::system(absl::StrCat("cp '", c.written_by, "'/ckpt-100.* '", c.written_by,
                                       "'/checkpoint '", dir, "'/")
                              .c_str()),
              0);
    Exit e = RunTrainer(Join(ResumeFlags(dir, 100), c.reader_flags), "move_read");
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_TRUE(absl::StrContains(e.err, "resumed from " + dir + "/ckpt-100 at step 100")) << e.err;
    const double written = FinalMetric(c.written_by + "/metrics.jsonl", "test_loss");
    EXPECT_NEAR(FinalMetric(dir + "/metrics.jsonl", "test_loss"), written, 1e-5 * written);
    EXPECT_EQ(FinalMetric(dir + "/metrics.jsonl", "test_accuracy"),
              FinalMetric(c.written_by + "/metrics.jsonl", "test_accuracy"));
  }

  // And training goes on from it under the other strategy.
  Exit more = RunTrainer(ResumeFlags(mirrored, 200), "move_more");
  ASSERT_EQ(more.code, 0) << more.err;
  EXPECT_TRUE(absl::StrContains(more.err, "resumed from " + mirrored + "/ckpt-100")) << more.err;
  EXPECT_GE(FinalMetric(mirrored + "/metrics.jsonl", "test_accuracy"), 0.9);
}

// Events of the trace's "X" kind.
struct Event {
  std::string name, cat, device;
  double ts = 0, dur = 0;
  int pid = -1;
};

TEST(TrainerMirroredTest, TraceHasEveryDeviceAndTheCollectives) {
  const std::string dir = TempDir("trace");
  const std::string trace = dir + "/trace.json";
  // Small gradient buckets: one all-reduce per gradient, the last layer's
  // first, while the first layer's backward still runs.
  Exit e = RunTrainer(Join(Mirrored4(), {"--hidden=128,64", "--steps=40", "--gradient_bucket_bytes=1024",
                                         "--trace_steps=2", absl::StrCat("--trace_out=", trace)}),
                      "trace");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "wrote the trace of steps 11-12 to " + trace)) << e.err;

  absl::StatusOr<JsonValue> doc = ParseJson(ReadFile(trace));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const JsonValue* list = doc->Find("traceEvents");
  ASSERT_NE(list, nullptr);
  ASSERT_TRUE(list->is_array());
  std::map<int, std::string> track;  // pid -> process_name
  std::vector<Event> events;
  for (const JsonValue& v : list->items()) {
    ASSERT_TRUE(v.is_object());
    const std::string ph = v.Find("ph")->string();
    const int pid = static_cast<int>(v.Find("pid")->number());
    ASSERT_NE(v.Find("tid"), nullptr);
    if (ph == "M" && v.Find("name")->string() == "process_name") {
      track[pid] = v.Find("args")->Find("name")->string();
      continue;
    }
    if (ph != "X") continue;
    Event ev;
    ev.name = v.Find("name")->string();
    ev.cat = v.Find("cat")->string();
    ev.ts = v.Find("ts")->number();
    ev.dur = v.Find("dur")->number();
    ev.pid = pid;
    EXPECT_GE(ev.dur, 0) << ev.name;
    if (const JsonValue* args = v.Find("args")) ev.device = args->Find("device")->string();
    events.push_back(ev);
  }
  // Tracks: steps, the 4 devices, the collectives; events on each.
  std::map<std::string, int> per_track;
  for (const Event& ev : events) ++per_track[track[ev.pid]];
  ASSERT_EQ(per_track.size(), 6u) << ReadFile(trace).substr(0, 2000);
  EXPECT_EQ(per_track["steps"], 2);
  for (int d = 0; d < 4; ++d) {
    EXPECT_GT(per_track[absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", d)], 20) << d;
  }
  EXPECT_GE(per_track["collectives"], 2 * 4 * 6);  // 6 gradients, 4 replicas, 2 steps

  // Overlap: within a step, some collective of a replica starts before a
  // MatMul of that replica's backward does.
  std::vector<std::pair<double, double>> steps;
  for (const Event& ev : events) {
    if (ev.cat == "step") steps.emplace_back(ev.ts, ev.ts + ev.dur);
  }
  int overlapped = 0;
  for (const Event& c : events) {
    if (c.cat != "collective") continue;
    for (const Event& m : events) {
      if (m.cat != "op" || m.device != c.device || !absl::StrContains(m.name, "MatMul")) continue;
      for (const auto& [begin, end] : steps) {
        if (c.ts >= begin && m.ts <= end && m.ts > c.ts) ++overlapped;
      }
    }
  }
  EXPECT_GT(overlapped, 0) << "no all-reduce started before a backward MatMul of its replica";
}

TEST(TrainerMirroredTest, BadDevicesAndUnevenBatchesExitWithAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> messages;
  };
  const std::vector<Case> cases = {
      {{"--strategy=mirrored", "--devices=/cpu:0,/cpu:7"}, {"--devices=/cpu:0,/cpu:7", "unknown device '/cpu:7'"}},
      {{"--strategy=mirrored", "--num_cpu_devices=4", "--devices=/gpu:0,/cpu:1"}, {"unknown device '/gpu:0'"}},
      {{"--strategy=mirrored", "--devices=/cpu:0,/cpu:1,/device:CPU:1"}, {"--devices", "same device"}},
      {{"--strategy=mirrored", "--devices=/cpu:1,/cpu:1"}, {"--devices", "same device"}},
      {{"--strategy=mirrored", "--devices=/cpu:0,,/cpu:1"}, {"--devices", "empty device name"}},
      {{"--strategy=one_device", "--devices=/cpu:0,/cpu:1"}, {"--devices", "one device"}},
      {{"--strategy=mirrored", "--num_cpu_devices=3", "--global_batch_size=32"},
       {"--global_batch_size", "32 does not split evenly over the 3 replicas", "multiple of 3"}},
      {{"--strategy=mirrored", "--devices=/cpu:0,/cpu:1", "--num_cpu_devices=4", "--global_batch_size=33"},
       {"--global_batch_size", "over the 2 replicas"}},
      {{"--strategy=replicated"}, {"--strategy: unknown strategy 'replicated'"}},
      {{"--strategy=mirrored", "--num_cpu_devices=100000"}, {"--num_cpu_devices"}},
      {{"--trace_out=/no/such/dir/trace.json"}, {"--trace_out=/no/such/dir/trace.json"}},
  };
  for (const Case& c : cases) {
    Exit e = RunTrainer(Join(c.args, {"--steps=5"}), "bad");
    EXPECT_EQ(e.code, 1) << c.args.back() << ": " << e.err;
    EXPECT_EQ(e.signal, 0) << c.args.back();
    for (const std::string& m : c.messages) {
      EXPECT_TRUE(absl::StrContains(e.err, m)) << c.args.back() << ": expected '" << m << "' in " << e.err;
    }
  }
}

}  // namespace
}  // namespace strata
