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
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"

extern char** environ;

namespace strata {
namespace {

// A strict JSON reader, enough to check that a trace is JSON a viewer
// loads (objects, arrays, strings with escapes, numbers, literals).
namespace json_lite {

struct Value {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = kNull;
  double number = 0;
  std::string str;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;
  const Value* Find(const std::string& key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}
  absl::StatusOr<Value> ParseDocument() {
    Value v;
    if (!ParseValue(&v, 0)) return Error();
    SkipSpace();
    if (at_ != s_.size()) return Error();
    return v;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("not JSON at offset ", at_, ": '",
                                                   s_.substr(at_, 40), "'"));
  }
  void SkipSpace() {
    while (at_ < s_.size() && s_[at_] != '\0' && std::strchr(" \t\r\n", s_[at_]) != nullptr) ++at_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool ParseString(std::string* out) {
    if (!Eat('"')) return false;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (at_ >= s_.size()) return false;
        const char e = s_[at_++];
        if (e == 'u') {
          if (at_ + 4 > s_.size()) return false;
          for (int i = 0; i < 4; ++i) {
            if (!std::isxdigit(static_cast<unsigned char>(s_[at_ + i]))) return false;
          }
          c = static_cast<char>(std::strtol(s_.substr(at_, 4).c_str(), nullptr, 16));
          at_ += 4;
        } else if (e != '\0' && std::strchr("\"\\/bfnrt", e) != nullptr) {
          c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          return false;
        }
      }
      out->push_back(c);
    }
    return Eat('"');
  }
  bool ParseValue(Value* v, int depth) {
    if (depth > 64) return false;
    SkipSpace();
    if (at_ >= s_.size()) return false;
    const char c = s_[at_];
    if (c == '{') {
      ++at_;
      v->kind = Value::kObject;
      if (Eat('}')) return true;
      do {
        std::string key;
        Value item;
        if (!ParseString(&key) || !Eat(':') || !ParseValue(&item, depth + 1)) return false;
        v->object.emplace_back(std::move(key), std::move(item));
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++at_;
      v->kind = Value::kArray;
      if (Eat(']')) return true;
      do {
        Value item;
        if (!ParseValue(&item, depth + 1)) return false;
        v->array.push_back(std::move(item));
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      v->kind = Value::kString;
      return ParseString(&v->str);
    }
    for (const char* lit : {"true", "false", "null"}) {
      if (s_.compare(at_, std::strlen(lit), lit) == 0) {
        at_ += std::strlen(lit);
        v->kind = lit[0] == 'n' ? Value::kNull : Value::kBool;
        return true;
      }
    }
    // A number as JSON writes it: -?digits(.digits)?([eE][+-]?digits)?
    const size_t begin = at_;
    if (s_[at_] == '-') ++at_;
    auto digits = [&] {
      const size_t d = at_;
      while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_]))) ++at_;
      return at_ > d;
    };
    if (!digits()) return false;
    if (at_ < s_.size() && s_[at_] == '.' && (++at_, !digits())) return false;
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (!digits()) return false;
    }
    v->kind = Value::kNumber;
    v->number = std::strtod(s_.substr(begin, at_ - begin).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  size_t at_ = 0;
};

absl::StatusOr<Value> Parse(const std::string& text) { return Parser(text).ParseDocument(); }

}  // namespace json_lite

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(dir == nullptr ? "." : dir, "/strata/", path);
}

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(t == nullptr ? "/tmp" : t, "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str());
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Exit {
  int code = -1;    // exit status, or -1 if killed
  int signal = 0;   // the signal that killed it
  std::string err;  // its stderr
};

// Runs the trainer with `args` and waits; stderr is kept.
Exit RunTrainer(const std::vector<std::string>& args, const std::string& name) {
  const std::string err_path = TempDir("stderr_" + name) + "/stderr.txt";
  std::vector<std::string> argv_s = {Runfile("tools/trainer")};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Exit e;
  EXPECT_EQ(rc, 0) << "cannot start " << argv[0];
  if (rc != 0) return e;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  e.err = ReadFile(err_path);
  return e;
}

// The value of "key":<number> in the metrics file's final line.
double FinalMetric(const std::string& metrics_path, const std::string& key) {
  std::ifstream in(metrics_path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, "\"final\":true")) last = line;
  }
  const std::string needle = absl::StrCat("\"", key, "\":");
  const size_t at = last.find(needle);
  if (at == std::string::npos) return -1;
  return std::atof(last.c_str() + at + needle.size());
}

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

void ExpectSameTensors(const std::string& a, const std::string& b) {
  auto ra = CheckpointReader::Open(a);
  auto rb = CheckpointReader::Open(b);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ((*ra)->tensors().size(), (*rb)->tensors().size());
  for (const auto& [name, info] : (*ra)->tensors()) {
    Tensor ta, tb;
    ASSERT_TRUE((*ra)->Read(name, &ta).ok()) << name;
    ASSERT_TRUE((*rb)->Read(name, &tb).ok()) << name << " missing in " << b;
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    EXPECT_EQ(0, std::memcmp(ta.raw_data(), tb.raw_data(), ta.TotalBytes()))
        << "tensor '" << name << "' differs between " << a << " and " << b;
  }
  EXPECT_EQ((*ra)->GetMetadata("input_iterator").value_or("a"),
            (*rb)->GetMetadata("input_iterator").value_or("b"));
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
    std::system(absl::StrCat("cp '", c.written_by, "'/ckpt-100.* '", c.written_by, "'/checkpoint '",
                             dir, "'/").c_str());
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

  absl::StatusOr<json_lite::Value> doc = json_lite::Parse(ReadFile(trace));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const json_lite::Value* list = doc->Find("traceEvents");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->kind, json_lite::Value::kArray);
  std::map<int, std::string> track;  // pid -> process_name
  std::vector<Event> events;
  for (const json_lite::Value& v : list->array) {
    ASSERT_EQ(v.kind, json_lite::Value::kObject);
    const std::string ph = v.Find("ph")->str;
    const int pid = static_cast<int>(v.Find("pid")->number);
    ASSERT_NE(v.Find("tid"), nullptr);
    if (ph == "M" && v.Find("name")->str == "process_name") {
      track[pid] = v.Find("args")->Find("name")->str;
      continue;
    }
    if (ph != "X") continue;
    Event ev;
    ev.name = v.Find("name")->str;
    ev.cat = v.Find("cat")->str;
    ev.ts = v.Find("ts")->number;
    ev.dur = v.Find("dur")->number;
    ev.pid = pid;
    EXPECT_GE(ev.dur, 0) << ev.name;
    if (const json_lite::Value* args = v.Find("args")) ev.device = args->Find("device")->str;
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
