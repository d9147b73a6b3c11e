#include "tests/trainer_process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/security/job_token.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"

namespace strata {
namespace testing {

bool WaitForCheckpoint(const std::string& dir, int64_t step) {
  const auto reached = CheckpointReached(dir, step);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (reached()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string StdoutPathFor(const std::string& stderr_path) { return stderr_path + ".stdout"; }

std::string JobTokenEnv() {
  static const std::string* const entry =
      new std::string(absl::StrCat(kJobTokenEnv, "=", JobToken::Generate().secret()));
  return *entry;
}

Process Spawn(const std::vector<std::string>& args, const std::string& stderr_path,
              const std::vector<std::string>& env) {
  std::vector<std::string> with_data = args;
  with_data.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
  std::vector<std::string> with_token = env;
  if (!HasJobToken(env)) with_token.push_back(JobTokenEnv());
  return SpawnProgram(Runfile("tools/trainer"), with_data, stderr_path, with_token);
}

Exit RunTrainer(const std::vector<std::string>& args, const std::string& name) {
  return Wait(Spawn(args, TempDir("stderr_" + name) + "/stderr.txt"));
}

std::vector<Exit> RunTrainerCluster(int n, const std::string& name, const std::vector<std::string>& flags) {
  const std::string dir = TempDir(name);
  const std::string cluster = WorkerCluster(n);
  std::vector<Process> tasks;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"--strategy=multi_worker_mirrored", "--heartbeat_timeout=5",
                             "--startup_timeout=60", "--intra_op_threads=1"});
    tasks.push_back(Spawn(args, absl::StrCat(dir, "/stderr_", i, ".txt"),
                          {absl::StrCat("TF_CONFIG={\"cluster\":", cluster,
                                        ",\"task\":{\"type\":\"worker\",\"index\":", i, "}}")}));
  }
  std::vector<Exit> exits;
  for (const Process& p : tasks) exits.push_back(Wait(p));
  return exits;
}

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

int64_t LastStep(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "{\"step\":")) {
      step = std::max<int64_t>(step, std::atoll(line.c_str() + 8));
    }
  }
  return step;
}

void ExpectSameTensors(const std::string& a, const std::string& b, int* compared) {
  if (compared != nullptr) *compared = 0;
  auto ra = CheckpointReader::Open(a);
  auto rb = CheckpointReader::Open(b);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ((*ra)->tensors().size(), (*rb)->tensors().size());
  for (const auto& [name, info] : (*ra)->tensors()) {
    Tensor ta, tb;
    ASSERT_TRUE((*ra)->Read(name, &ta).ok()) << name;
    ASSERT_TRUE((*rb)->Read(name, &tb).ok()) << name << " missing in " << b;
    ASSERT_EQ(ta.dtype(), tb.dtype()) << name;
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    EXPECT_EQ(0, std::memcmp(ta.raw_data(), tb.raw_data(), ta.TotalBytes()))
        << "tensor '" << name << "' differs between " << a << " and " << b;
    if (compared != nullptr) ++*compared;
  }
  // The step, the input position and whatever else the program tracked.
  EXPECT_TRUE((*ra)->metadata() == (*rb)->metadata()) << "the metadata of " << a << " and " << b << " differ";
}

double ExpectCloseTensors(const std::string& a, const std::string& b, double rel_tol) {
  double worst = 0;
  auto ra = CheckpointReader::Open(a);
  auto rb = CheckpointReader::Open(b);
  EXPECT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(rb.ok()) << rb.status();
  if (!ra.ok() || !rb.ok()) return -1;
  EXPECT_EQ((*ra)->tensors().size(), (*rb)->tensors().size());
  for (const auto& [name, info] : (*ra)->tensors()) {
    Tensor ta, tb;
    EXPECT_TRUE((*ra)->Read(name, &ta).ok()) << name;
    if (!(*rb)->Read(name, &tb).ok()) {
      ADD_FAILURE() << name << " missing in " << b;
      continue;
    }
    EXPECT_EQ(ta.dtype(), tb.dtype()) << name;
    EXPECT_EQ(ta.shape(), tb.shape()) << name;
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) continue;
    if (ta.dtype() != DT_FLOAT) {
      EXPECT_EQ(0, std::memcmp(ta.raw_data(), tb.raw_data(), ta.TotalBytes())) << name;
      continue;
    }
    const float* x = ta.data<float>();
    const float* y = tb.data<float>();
    for (int64_t i = 0; i < ta.NumElements(); ++i) {
      const double d = std::abs(double(x[i]) - y[i]) / std::max(std::abs(double(x[i])), 1e-3);
      worst = std::max(worst, d);
      if (d > rel_tol) {
        ADD_FAILURE() << "tensor '" << name << "' element " << i << ": " << x[i] << " vs " << y[i];
        break;
      }
    }
  }
  return worst;
}

}  // namespace testing
}  // namespace strata
