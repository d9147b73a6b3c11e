// Test harness: runs N ranks over the shared-memory transport, as threads of this process
// (one InMemoryKeyValueStore) or as forked processes (a FileKeyValueStore in
// a fresh directory), and returns every rank's Status, so one test body
// covers both.
//
//   auto statuses = shm_test::RunRanks(shm_test::Mode::kProcesses, 3, options,
//       [](int rank, Transport& t) -> absl::Status { ... });
//   for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
//
// A child process reports its Status through a pipe (code and message) and
// _exits; one killed by a signal reports Internal naming the signal.
//
// Thread-safety: call from one thread. Ownership: plain functions.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TEST_UTIL_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TEST_UTIL_H_

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "runtime/collective/file_key_value_store.h"
#include "runtime/collective/transport/shm_transport.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace shm_test {

enum class Mode { kThreads, kProcesses };

using RankFn = std::function<absl::Status(int rank, Transport& t)>;

// A key prefix no other call of this process or any other uses.
inline std::string UniquePrefix(const std::string& name) {
  static std::atomic<int> counter{0};
  return absl::StrCat("shmtest-", name, "-", getpid(), "-", counter.fetch_add(1));
}

// Names in /dev/shm that contain `part`.
inline std::vector<std::string> ShmEntries(const std::string& part) {
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).find(part) != std::string::npos) found.push_back(e->d_name);
    }
    closedir(d);
  }
  return found;
}

// A fresh directory for a FileKeyValueStore.
inline std::string MakeKvDir() { return io::MakeTempDir("shmkv").value_or("/tmp"); }

inline absl::Status ConnectAndRun(int rank, int n, KeyValueStore& kv,
                                  const ShmTransportOptions& options, const RankFn& fn) {
  auto t = ConnectShmTransport(rank, n, kv, options);
  if (!t.ok()) return t.status();
  return fn(rank, **t);
}

inline std::vector<absl::Status> RunRanks(Mode mode, int n, const ShmTransportOptions& options,
                                          const RankFn& fn) {
  std::vector<absl::Status> statuses(n);
  if (mode == Mode::kThreads) {
    InMemoryKeyValueStore kv;
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] { statuses[r] = ConnectAndRun(r, n, kv, options, fn); });
    }
    for (auto& t : threads) t.join();
    return statuses;
  }
  const std::string dir = MakeKvDir();
  std::vector<pid_t> pids(n);
  std::vector<int> pipes(n);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      statuses[r] = absl::InternalError("pipe failed");
      continue;
    }
    pids[r] = fork();
    if (pids[r] == 0) {
      close(fds[0]);
      FileKeyValueStore kv(dir);
      const absl::Status s = ConnectAndRun(r, n, kv, options, fn);
      const std::string report = absl::StrCat(static_cast<int>(s.code()), "\n", s.message());
      ssize_t unused = write(fds[1], report.data(), report.size());
      (void)unused;
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    pipes[r] = fds[0];
  }
  for (int r = 0; r < n; ++r) {
    std::string report;
    char buf[4096];
    ssize_t got;
    while ((got = read(pipes[r], buf, sizeof(buf))) > 0) report.append(buf, got);
    close(pipes[r]);
    int wstatus = 0;
    waitpid(pids[r], &wstatus, 0);
    const size_t nl = report.find('\n');
    if (WIFSIGNALED(wstatus)) {
      statuses[r] = absl::InternalError(absl::StrCat("rank ", r, " killed by signal ",
                                                     WTERMSIG(wstatus)));
    } else if (nl == std::string::npos) {
      statuses[r] = absl::InternalError(absl::StrCat("rank ", r, " reported nothing"));
    } else {
      statuses[r] = absl::Status(static_cast<absl::StatusCode>(std::atoi(report.c_str())),
                                 report.substr(nl + 1));
    }
  }
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') unlink(absl::StrCat(dir, "/", e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
  return statuses;
}

}  // namespace shm_test
}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_SHM_TEST_UTIL_H_
