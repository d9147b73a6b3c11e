// A task for launch_test: prints what the launcher gave it, then does what
// the test asks of its task.
//
//   launch_test_worker DIR worker:1=exit:3 *=sleep
//
// Each argument after DIR is TASK=ACTION (TASK as in STRATA_TASK, or * for
// every other task). It first prints "TF_CONFIG=...", "STRATA_TASK=..." and
// "pid=N" on stdout, then:
//   ok                  exit 0
//   lines:N             N lines "out TASK k" on stdout and "err TASK k" on
//                       stderr, then "partial TASK" with no newline; exit 0
//   bind                parse TF_CONFIG (strategy/cluster_resolver.h) and
//                       listen on this task's address; print "bound ADDR"
//   exit:N              exit N
//   sigkill             SIGKILL itself
//   sleep               write DIR/ready.TASK (its pid), sleep until killed
//   ignore_term         ignore SIGTERM, then as sleep
//   term_exit0          as sleep, but on SIGTERM print "got SIGTERM", exit 0
//   exit_when_ready:T:N wait for DIR/ready.T, then exit N
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "strategy/cluster_resolver.h"

namespace {

volatile sig_atomic_t g_got_term = 0;
void OnTerm(int) { g_got_term = 1; }

std::string g_dir;

void WriteReady(const std::string& task) {
  const std::string path = absl::StrCat(g_dir, "/ready.", task);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) std::exit(20);
  std::fprintf(f, "%d\n", static_cast<int>(getpid()));
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::exit(21);
}

[[noreturn]] void SleepForever() {
  for (;;) pause();
}

int Bind() {
  absl::StatusOr<strata::ClusterSpec> spec = strata::ClusterSpecFromEnvironment();
  if (!spec.ok()) {
    std::fprintf(stderr, "bad TF_CONFIG: %s\n", std::string(spec.status().message()).c_str());
    return 10;
  }
  const std::string& address = spec->task_address();
  const size_t colon = address.rfind(':');
  int port = 0;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "cannot parse address %s\n", address.c_str());
    return 11;
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 1) != 0) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", address.c_str(), std::strerror(errno));
    return 12;
  }
  std::printf("bound %s\n", address.c_str());
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* task_env = std::getenv("STRATA_TASK");
  const char* config_env = std::getenv("TF_CONFIG");
  if (argc < 2 || task_env == nullptr || config_env == nullptr) {
    std::fprintf(stderr, "usage: launch_test_worker DIR TASK=ACTION... (under launch)\n");
    return 2;
  }
  g_dir = argv[1];
  const std::string task = task_env;
  std::string wanted, fallback;
  for (int i = 2; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.first == task) wanted = kv.second;
    if (kv.first == "*") fallback = kv.second;
  }
  absl::string_view action = wanted.empty() ? fallback : wanted;
  std::printf("TF_CONFIG=%s\nSTRATA_TASK=%s\npid=%d\n", config_env, task_env,
              static_cast<int>(getpid()));
  std::fflush(stdout);

  int n = 0;
  if (action == "ok") return 0;
  if (absl::ConsumePrefix(&action, "lines:") && absl::SimpleAtoi(action, &n)) {
    for (int k = 0; k < n; ++k) {
      std::printf("out %s %d\n", task.c_str(), k);
      std::fprintf(stderr, "err %s %d\n", task.c_str(), k);
    }
    std::printf("partial %s", task.c_str());
    return 0;
  }
  if (action == "bind") return Bind();
  if (absl::ConsumePrefix(&action, "exit:") && absl::SimpleAtoi(action, &n)) return n;
  if (action == "sigkill") raise(SIGKILL);
  if (action == "sleep") {
    WriteReady(task);
    SleepForever();
  }
  if (action == "ignore_term") {
    signal(SIGTERM, SIG_IGN);
    WriteReady(task);
    SleepForever();
  }
  if (action == "term_exit0") {
    // SIGTERM stays blocked outside sigsuspend, so it cannot slip in between
    // the check and the wait.
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &old);
    struct sigaction sa = {};
    sa.sa_handler = OnTerm;
    sigaction(SIGTERM, &sa, nullptr);
    WriteReady(task);
    while (!g_got_term) sigsuspend(&old);
    std::printf("got SIGTERM\n");
    return 0;
  }
  if (absl::ConsumePrefix(&action, "exit_when_ready:")) {
    const size_t last = action.rfind(':');
    std::pair<std::string, std::string> tn(action.substr(0, last),
                                           action.substr(last == action.npos ? 0 : last + 1));
    if (absl::SimpleAtoi(tn.second, &n)) {  // e.g. "worker:1:2": task worker:1, status 2
      const std::string path = absl::StrCat(g_dir, "/ready.", tn.first);
      while (access(path.c_str(), F_OK) != 0) usleep(10000);
      return n;
    }
  }
  std::fprintf(stderr, "unknown action \"%s\" for %s\n", std::string(action).c_str(),
               task.c_str());
  return 2;
}
