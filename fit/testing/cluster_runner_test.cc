// The cluster runner with /bin/sh as the worker program: each worker's
// TF_CONFIG and arguments, its output and ending, signals, late starts and
// the deadline that ends a hanging cluster.
#include "fit/testing/cluster_runner.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace strata {
namespace testing {
namespace {

ClusterOptions Shell(const std::string& script, int workers = 2) {
  ClusterOptions o;
  o.program = "/bin/sh";
  o.num_workers = workers;
  o.args = {"-c", script};
  return o;
}

TEST(ClusterRunnerTest, EachWorkerGetsItsTfConfigAndArgumentsAndItsEndingIsReported) {
  ClusterOptions o = Shell("echo \"$TF_CONFIG\"; echo \"arg:$0\"; echo to-stderr >&2; exit 3");
  o.worker_args[1] = {"second"};  // after sh's script: its $0
  auto c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<WorkerExit> ends = (*c)->Join(absl::Seconds(30));
  ASSERT_EQ(ends.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ends[i].code, 3) << Describe(ends[i]);
    EXPECT_TRUE(absl::StrContains(ends[i].out, absl::StrCat("\"task\":{\"type\":\"worker\",\"index\":", i, "}")))
        << ends[i].out;
    EXPECT_TRUE(absl::StrContains(ends[i].out, (*c)->cluster())) << ends[i].out;
    EXPECT_EQ(ends[i].err, "to-stderr\n");
  }
  EXPECT_TRUE(absl::StrContains(ends[1].out, "arg:second")) << ends[1].out;
  EXPECT_FALSE(absl::StrContains(ends[0].out, "arg:second")) << ends[0].out;
  EXPECT_TRUE(absl::StrContains(Describe(ends[0]), "exited with code 3"));
}

TEST(ClusterRunnerTest, SignalsAndConditions) {
  // Each worker says it is ready and waits to be signalled.
  ClusterOptions o = Shell("echo ready; exec sleep 30");
  auto c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->WaitUntil(FileContains((*c)->StdoutPath(1), "ready"), absl::Seconds(10)).ok());
  ASSERT_TRUE((*c)->Signal(1, SIGKILL).ok());
  ASSERT_TRUE((*c)->Signal(0, SIGTERM).ok());
  const std::vector<WorkerExit> ends = (*c)->Join(absl::Seconds(10));
  EXPECT_EQ(ends[1].signal, SIGKILL);
  EXPECT_EQ(ends[0].signal, SIGTERM);
  EXPECT_FALSE(ends[0].timed_out);
  EXPECT_EQ((*c)->Signal(0, SIGKILL).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*c)->Signal(7, SIGKILL).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->WaitUntil([] { return false; }, absl::Milliseconds(30)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(ClusterRunnerTest, ADelayedWorkerStartsLateAndAHangingOneEndsAtTheDeadline) {
  ClusterOptions o = Shell("exec sleep 30");
  o.start_delays[1] = absl::Milliseconds(300);
  const absl::Time t0 = absl::Now();
  auto c = ClusterRunner::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(300));
  const std::vector<WorkerExit> ends = (*c)->Join(absl::Milliseconds(200));
  for (const WorkerExit& e : ends) {
    EXPECT_TRUE(e.timed_out);
    EXPECT_EQ(e.signal, SIGKILL);
    EXPECT_TRUE(absl::StrContains(Describe(e), "at the deadline"));
  }
}

TEST(ClusterRunnerTest, BadOptionsAndAMissingProgram) {
  ClusterOptions o;
  EXPECT_EQ(ClusterRunner::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.program = "/bin/true";
  o.num_workers = 0;
  EXPECT_EQ(ClusterRunner::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.program = "/no/such/program";
  o.num_workers = 1;
  auto c = ClusterRunner::Start(o);
  // posix_spawn may report the missing file itself or as the child's exit 127.
  if (c.ok()) {
    const std::vector<WorkerExit> ends = (*c)->Join(absl::Seconds(10));
    EXPECT_EQ(ends[0].code, 127) << Describe(ends[0]);
  } else {
    EXPECT_TRUE(absl::StrContains(c.status().message(), "/no/such/program")) << c.status();
  }
}

}  // namespace
}  // namespace testing
}  // namespace strata
