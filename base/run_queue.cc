#include "base/run_queue.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/mutex.h"

namespace strata {
namespace {

// The counted threads' schedstat files, and what exited threads had waited.
struct Counted {
  Mutex mu;
  std::vector<int> fds ABSL_GUARDED_BY(mu);
  unsigned long long exited_ns ABSL_GUARDED_BY(mu) = 0;
};

Counted& Registry() {
  static Counted* const counted = new Counted;  // outlives every thread's exit
  return *counted;
}

// Nanoseconds of run-queue delay in schedstat file `fd`; 0 if unreadable.
unsigned long long WaitedNanos(int fd) {
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long running = 0, waiting = 0;
  return std::sscanf(buf, "%llu %llu", &running, &waiting) == 2 ? waiting : 0;
}

// One per counted thread: at the thread's exit, its delay joins exited_ns.
struct Registration {
  int fd = -1;
  Registration() {
    fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    Counted& c = Registry();
    MutexLock l(&c.mu);
    c.fds.push_back(fd);
  }
  ~Registration() {
    if (fd < 0) return;
    Counted& c = Registry();
    MutexLock l(&c.mu);
    c.exited_ns += WaitedNanos(fd);
    c.fds.erase(std::find(c.fds.begin(), c.fds.end(), fd));
    close(fd);
  }
};

}  // namespace

void CountThisThreadsRunQueueDelay() { thread_local const Registration registration; }

double CountedRunQueueSeconds() {
  Counted& c = Registry();
  MutexLock l(&c.mu);
  unsigned long long ns = c.exited_ns;
  for (int fd : c.fds) ns += WaitedNanos(fd);
  return static_cast<double>(ns) * 1e-9;
}

}  // namespace strata
