// The local launcher's rounds, for tools/launch_lib.cc only: one round
// starts every task of the cluster as a child process (each in its own
// process group, on its start delay), relays its output line by line
// prefixed with the task's name, and stops every task once one fails or the
// launcher is signalled (SIGINT/SIGTERM forwarded; a second one, or the
// grace period passing, SIGKILLs them).
//
// Thread-safety: one round at a time, on one thread, inside a SignalScope.
#ifndef STRATA_TOOLS_LAUNCH_ROUND_H_
#define STRATA_TOOLS_LAUNCH_ROUND_H_

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/launch_lib.h"

namespace strata {
namespace launch_internal {

std::string ErrnoText(int err);
// "launch: <message>" on stderr.
void Say(absl::string_view message);

// Routes SIGINT, SIGTERM and SIGCHLD into the rounds' poll loop (a
// self-pipe) and ignores SIGPIPE while it lives; error() is non-empty if
// the pipe could not be made.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  const std::string& error() const { return error_; }

 private:
  static constexpr int kHandled[3] = {SIGINT, SIGTERM, SIGCHLD};
  struct sigaction old_[3];
  struct sigaction old_pipe_;
  std::string error_;
};

// How one round of tasks ended.
struct RoundEnd {
  int exit_code = 0;
  bool task_failed = false;  // a task failed (not a signal to the launcher)
};

// Runs `tasks` (the program at `path`) as round `round` until all ended.
RoundEnd RunRound(const LaunchOptions& options, const std::string& path,
                  const std::vector<LaunchTask>& tasks, int round);

}  // namespace launch_internal
}  // namespace strata

#endif  // STRATA_TOOLS_LAUNCH_ROUND_H_
