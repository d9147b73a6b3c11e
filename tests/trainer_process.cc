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
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint_reader.h"

extern char** environ;

namespace strata {
namespace testing {

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(dir == nullptr ? "." : dir, "/strata/", path);
}

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(t == nullptr ? "/tmp" : t, "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitForCheckpoint(const std::string& dir, int64_t step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (DIR* d = opendir(dir.c_str())) {
      bool found = false;
      while (dirent* e = readdir(d)) {
        absl::string_view name = e->d_name;
        int64_t s = 0;
        if (absl::ConsumePrefix(&name, "ckpt-") && absl::ConsumeSuffix(&name, ".index") &&
            absl::SimpleAtoi(name, &s) && s >= step) {
          found = true;
        }
      }
      closedir(d);
      if (found) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<int> FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

std::string WorkerCluster(int n) {
  std::vector<std::string> addrs;
  for (int port : FreePorts(n)) addrs.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  return absl::StrCat("{\"worker\":[", absl::StrJoin(addrs, ","), "]}");
}

std::string StdoutPathFor(const std::string& stderr_path) { return stderr_path + ".stdout"; }

Process Spawn(const std::vector<std::string>& args, const std::string& stderr_path,
              const std::vector<std::string>& env) {
  std::vector<std::string> with_data = args;
  with_data.push_back(absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz")));
  return SpawnProgram(Runfile("tools/trainer"), with_data, stderr_path, env);
}

Process SpawnProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stderr_path, const std::vector<std::string>& env) {
  std::vector<std::string> argv_s = {program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  Process p;
  p.stderr_path = stderr_path;
  p.stdout_path = StdoutPathFor(stderr_path);
  posix_spawn_file_actions_addopen(&fa, 1, p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const std::string& x : env) {
      if (entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1)) replaced = true;
    }
    if (!replaced) env_s.push_back(entry);
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&p.pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "cannot start " << argv[0];
  if (rc != 0) p.pid = -1;
  return p;
}

Exit Wait(const Process& p) {
  Exit e;
  if (p.pid < 0) return e;
  int status = 0;
  if (waitpid(p.pid, &status, 0) != p.pid) return e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
    e.core_dumped = WCOREDUMP(status);
  }
  e.err = ReadFile(p.stderr_path);
  if (!p.stdout_path.empty()) e.out = ReadFile(p.stdout_path);
  return e;
}

std::string Describe(const Exit& e, size_t stdout_tail) {
  std::string out;
  if (e.signal != 0) {
    const char* name = strsignal(e.signal);
    out = absl::StrCat("killed by signal ", e.signal, " (", name == nullptr ? "?" : name, ")",
                       e.core_dumped ? ", core dumped" : "");
  } else {
    out = absl::StrCat("exited with code ", e.code);
  }
  absl::StrAppend(&out, "\n--- stderr (", e.err.size(), " bytes) ---\n", e.err);
  if (!e.err.empty() && e.err.back() != '\n') out += '\n';
  const size_t from = e.out.size() > stdout_tail ? e.out.size() - stdout_tail : 0;
  absl::StrAppend(&out, "--- stdout (", e.out.size(), " bytes", from > 0 ? ", the tail" : "",
                  ") ---\n", absl::string_view(e.out).substr(from));
  return out;
}

Exit RunTrainer(const std::vector<std::string>& args, const std::string& name) {
  return Wait(Spawn(args, TempDir("stderr_" + name) + "/stderr.txt"));
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
