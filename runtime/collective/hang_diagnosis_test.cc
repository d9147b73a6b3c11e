#include "runtime/collective/hang_diagnosis.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/testing/test_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/collective/hang_watchdog.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CollectiveInfo AllReduce(int instance, uint64_t execution, const std::string& name = "grad") {
  return {"all-reduce", 1, instance, execution, name, "float", "[256]", 1024};
}

TEST(FlightRecorderTest, KeepsTheNewestCollectivesInOrder) {
  FlightRecorder r(4);
  r.SetStep(3);
  r.SetActivity("step");
  std::vector<uint64_t> seqs;
  for (int i = 0; i < 6; ++i) seqs.push_back(r.Begin(AllReduce(i, 0)));
  for (int i = 0; i < 5; ++i) r.End(seqs[i], absl::OkStatus());
  r.End(seqs[0], absl::InternalError("late"));  // slot reused: ignored
  FlightRecorderSnapshot s = r.Snapshot("t0");
  EXPECT_EQ(s.task(), "t0");
  EXPECT_EQ(s.step(), 3);
  EXPECT_EQ(s.activity(), "step");
  EXPECT_EQ(s.recorded(), 6u);
  ASSERT_EQ(s.records_size(), 4);
  EXPECT_EQ(s.records(0).instance_key(), 2);
  EXPECT_EQ(s.records(3).instance_key(), 5);
  EXPECT_EQ(s.records(2).state(), CollectiveRecord::DONE);
  EXPECT_EQ(s.records(3).state(), CollectiveRecord::RUNNING);
  EXPECT_EQ(s.records(3).step(), 3);
  std::optional<RunningCollective> running = r.LongestRunning();
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->seq, seqs[5]);
  EXPECT_THAT(running->description, HasSubstr("instance 5"));
  r.End(seqs[5], absl::DeadlineExceededError("slow peer"));
  EXPECT_FALSE(r.LongestRunning().has_value());
  s = r.Snapshot("t0", 2);
  ASSERT_EQ(s.records_size(), 2);
  EXPECT_EQ(s.records(1).state(), CollectiveRecord::FAILED);
  EXPECT_EQ(s.records(1).error(), "slow peer");
  EXPECT_THAT(FormatSnapshot(s), HasSubstr("FAILED"));
}

TEST(FlightRecorderTest, TimeInCollectivesCountsOverlapsOnce) {
  FlightRecorder r(8);
  EXPECT_EQ(r.completed_seconds(), 0);
  const uint64_t a = r.Begin(AllReduce(1, 0));
  const uint64_t b = r.Begin(AllReduce(2, 0));
  absl::SleepFor(absl::Milliseconds(30));
  r.End(a, absl::OkStatus());
  EXPECT_EQ(r.completed_seconds(), 0);  // b still runs
  absl::SleepFor(absl::Milliseconds(30));
  r.End(b, absl::OkStatus());
  const double both = r.completed_seconds();
  EXPECT_GE(both, 0.055);
  EXPECT_LT(both, 0.5);        // once, not a's and b's durations summed
  r.End(b, absl::OkStatus());  // twice: ignored
  EXPECT_EQ(r.completed_seconds(), both);
}

CollectiveRecord Record(int instance, uint64_t execution, CollectiveRecord::State state, double ago,
                        int64_t step) {
  CollectiveRecord r;
  r.set_op("all-reduce");
  r.set_group_key(1);
  r.set_instance_key(instance);
  r.set_execution(execution);
  r.set_name(absl::StrCat("grad_", instance));
  r.set_dtype("float");
  r.set_shape("[8]");
  r.set_bytes(32);
  r.set_step(step);
  r.set_state(state);
  r.set_started_ago_seconds(ago);
  if (state != CollectiveRecord::RUNNING) r.set_duration_seconds(0.001);
  return r;
}

TaskReport Task(const std::string& name, int64_t step, const std::string& activity,
                std::vector<CollectiveRecord> records) {
  TaskReport t;
  t.task = name;
  FlightRecorderSnapshot s;
  s.set_task(name);
  s.set_step(step);
  s.set_activity(activity);
  s.set_activity_age_seconds(12);
  for (auto& r : records) *s.add_records() = r;
  t.snapshot = s;
  return t;
}

TEST(HangDiagnosisTest, NamesTheTaskThatHasNotStartedTheCollective) {
  // Task 1 finished step 6's all-reduce and never started step 7's, which
  // tasks 0 and 2 wait in.
  std::vector<TaskReport> tasks = {
      Task("task:0", 7, "step",
           {Record(3, 5, CollectiveRecord::DONE, 12.5, 6),
            Record(3, 6, CollectiveRecord::RUNNING, 10.2, 7)}),
      Task("task:1", 7, "input pipeline", {Record(3, 5, CollectiveRecord::DONE, 12.4, 6)}),
      Task("task:2", 7, "step",
           {Record(3, 5, CollectiveRecord::DONE, 12.5, 6),
            Record(3, 6, CollectiveRecord::RUNNING, 9.0, 7)}),
  };
  const std::string d = DiagnoseHang(tasks, 1, "task:0", "all-reduce waited 10.2 s");
  EXPECT_THAT(d, HasSubstr("hang diagnosis #1, requested by task:0"));
  EXPECT_THAT(d, HasSubstr("behind: task:1 at step 7 has not started all-reduce 'grad_3'"));
  EXPECT_THAT(d, HasSubstr("execution 6) of step 7, which 2 tasks wait in for 10.2 s"));
  EXPECT_THAT(d, HasSubstr("it is in \"input pipeline\" for 12.0 s"));
  EXPECT_THAT(d, HasSubstr("its last collective: all-reduce 'grad_3'"));
  EXPECT_THAT(d, HasSubstr("waiting: task:0 at step 7"));
  EXPECT_THAT(d, HasSubstr("waiting: task:2 at step 7"));
  EXPECT_THAT(d, Not(HasSubstr("mismatch")));
}

TEST(HangDiagnosisTest, TasksIssuingDifferentCollectivesAreAMismatchNamingBoth) {
  std::vector<TaskReport> tasks = {
      Task("task:0", 4, "step", {Record(3, 4, CollectiveRecord::RUNNING, 10, 4)}),
      Task("task:1", 4, "step", {Record(9, 0, CollectiveRecord::RUNNING, 10, 4)}),
  };
  const std::string d = DiagnoseHang(tasks, 2, "task:0", "x");
  EXPECT_THAT(d, HasSubstr("mismatch: task:1 and task:0 issue different collectives: task:1 "
                           "waits in all-reduce 'grad_9'"));
  EXPECT_THAT(d, HasSubstr("task:0 in all-reduce 'grad_3'"));
}

TEST(HangDiagnosisTest, SilentTasksAndStalledNetworksAreSaidSo) {
  std::vector<TaskReport> tasks = {
      Task("task:0", 4, "step", {Record(3, 4, CollectiveRecord::RUNNING, 10, 4)}),
      TaskReport{"task:1", std::nullopt, "no answer within 3.0 s"},
  };
  std::string d = DiagnoseHang(tasks, 1, "task:0", "x");
  EXPECT_THAT(d, HasSubstr("no answer: task:1 (no answer within 3.0 s)"));
  EXPECT_THAT(d, HasSubstr("the ones that did not answer hold it up"));
  tasks[1] = Task("task:1", 4, "step", {Record(3, 4, CollectiveRecord::RUNNING, 9, 4)});
  d = DiagnoseHang(tasks, 1, "task:0", "x");
  EXPECT_THAT(d, HasSubstr("every task waits in it"));
  // No collective running anywhere (SIGUSR1 on a healthy cluster).
  tasks = {Task("task:0", 4, "step", {Record(3, 4, CollectiveRecord::DONE, 1, 4)})};
  d = DiagnoseHang(tasks, 1, "task:0", "SIGUSR1");
  EXPECT_THAT(d, HasSubstr("task:0 at step 4, in no collective"));
}

TEST(HangWatchdogTest, AStalledCollectiveGetsOneDiagnosisFromTheChief) {
  InMemoryKeyValueStore store;
  FlightRecorder r0, r1;
  const std::vector<std::string> names = {"/job:worker/replica:0/task:0",
                                          "/job:worker/replica:0/task:1"};
  r0.SetStep(5);
  r1.SetStep(5);
  r1.SetActivity("reading files");
  r0.End(r0.Begin(AllReduce(3, 0)), absl::OkStatus());
  r1.End(r1.Begin(AllReduce(3, 0)), absl::OkStatus());
  r0.Begin(AllReduce(3, 1));  // task 0 waits; task 1 never comes

  Mutex mu;
  std::vector<std::string> printed;
  absl::Notification got;
  auto make = [&](int rank, FlightRecorder* rec) {
    HangWatchdogOptions o;
    o.store = &store;
    o.key_prefix = "test/diag";
    o.rank = rank;
    o.task_names = names;
    o.recorder = rec;
    o.stall_threshold = absl::Milliseconds(100);
    o.poll_interval = absl::Milliseconds(20);
    o.answer_timeout = absl::Seconds(2);
    o.request_wait = absl::Milliseconds(200);
    o.print = [&](const std::string& text) {
      MutexLock l(&mu);
      printed.push_back(text);
      if (!got.HasBeenNotified()) got.Notify();
    };
    return HangWatchdog::Start(o);
  };
  auto w0 = make(0, &r0);
  auto w1 = make(1, &r1);
  ASSERT_TRUE(got.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(400));  // no second one for the same stall
  MutexLock l(&mu);
  ASSERT_EQ(printed.size(), 1u);
  EXPECT_THAT(printed[0], HasSubstr("behind: /job:worker/replica:0/task:1 at step 5 has not "
                                    "started all-reduce 'grad'"));
  EXPECT_THAT(printed[0], HasSubstr("\"reading files\""));
}

TEST(HangWatchdogTest, AtTheClusterErrorTheChiefDiagnosesEveryTaskThatIsLeft) {
  // Three tasks; task 2 is lost: the others answer, the chief names it.
  InMemoryKeyValueStore store;
  FlightRecorder r0, r1;
  const std::vector<std::string> names = {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1",
                                          "/job:worker/replica:0/task:2"};
  r0.SetStep(7);
  r1.SetStep(7);
  r1.SetActivity("input pipeline");
  r0.Begin(AllReduce(3, 6));
  r1.Begin(AllReduce(3, 6));
  Mutex mu;
  std::vector<std::string> printed;
  auto make = [&](int rank, FlightRecorder* rec) {
    HangWatchdogOptions o;
    o.store = &store;
    o.key_prefix = "test/diag";
    o.rank = rank;
    o.task_names = names;
    o.recorder = rec;
    o.stall_threshold = absl::Hours(1);
    o.request_wait = absl::Milliseconds(100);
    o.error_gather_timeout = absl::Milliseconds(500);
    if (rank == 0) {
      o.peek = [&store](const std::string& key) { return store.Get(key, absl::ZeroDuration()); };
    }
    o.print = [&](const std::string& text) {
      MutexLock l(&mu);
      printed.push_back(text);
    };
    return HangWatchdog::Start(o);
  };
  auto w0 = make(0, &r0);
  auto w1 = make(1, &r1);
  const absl::Status error = absl::UnavailableError("task /job:worker/replica:0/task:2 lost");
  w1->OnClusterError(error);
  w0->OnClusterError(error);
  w0->OnClusterError(error);  // once only
  w1->AwaitClusterErrorReport(absl::Seconds(5));
  w0->AwaitClusterErrorReport(absl::Seconds(5));
  MutexLock l(&mu);
  ASSERT_EQ(printed.size(), 1u);
  EXPECT_THAT(printed[0], HasSubstr("requested by the cluster's error (task /job:worker/replica:0/task:2 lost"));
  EXPECT_THAT(printed[0], HasSubstr("no answer: /job:worker/replica:0/task:2 (no answer within "));
  EXPECT_THAT(printed[0], HasSubstr(" s of the error: it failed, was lost or is cut off"));
  EXPECT_THAT(printed[0], HasSubstr("waiting: /job:worker/replica:0/task:1 at step 7 in all-reduce 'grad'"));
  EXPECT_THAT(printed[0], HasSubstr("waiting: /job:worker/replica:0/task:0 at step 7"));
}

TEST(HangWatchdogTest, TheChiefStopsGatheringWhenTheAnswersStopComing) {
  // No limit on the gathering but the quiet period (500 ms, on a manual
  // clock): the chief answers at 0, task 1 at 250 ms (in time), task 2 at
  // 900 ms (too late: 500 ms after task 1's answer the chief has stopped).
  InMemoryKeyValueStore store;
  testing::ManualClockEnv clock;
  FlightRecorder r0, r1, r2;
  const std::vector<std::string> names = {"/job:worker/replica:0/task:0",
                                          "/job:worker/replica:0/task:1",
                                          "/job:worker/replica:0/task:2"};
  for (FlightRecorder* r : {&r0, &r1, &r2}) r->SetStep(4);
  const absl::Time start = clock.Now();
  HangWatchdogOptions o;
  o.store = &store;
  o.key_prefix = "test/diag";
  o.task_names = names;
  o.recorder = &r0;
  o.stall_threshold = absl::Hours(1);
  o.request_wait = absl::Milliseconds(100);
  o.error_gather_timeout = absl::InfiniteDuration();
  o.error_quiet_period = absl::Milliseconds(500);
  o.env = &clock;
  o.peek = [&](const std::string& key) {
    // The others' answers arrive as the chief's clock passes their times.
    for (int rank : {1, 2}) {
      const absl::Duration at = absl::Milliseconds(rank == 1 ? 250 : 900);
      if (clock.Now() - start >= at) {
        (void)store.Insert(absl::StrCat("test/diag/at_error/", rank),
                           (rank == 1 ? r1 : r2).Snapshot(names[rank]).SerializeAsString());
      }
    }
    return store.Get(key, absl::ZeroDuration());
  };
  std::string printed;
  absl::Notification done;
  o.print = [&](const std::string& text) {
    printed = text;
    done.Notify();
  };
  auto w = HangWatchdog::Start(o);
  w->OnClusterError(absl::UnavailableError("task /job:worker/replica:0/task:2 lost"));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "still gathering: the quiet period did not end it";
  w->AwaitClusterErrorReport(absl::Seconds(5));
  EXPECT_THAT(printed, HasSubstr("/job:worker/replica:0/task:1 at step 4"));
  EXPECT_THAT(
      printed,
      HasSubstr("no answer: /job:worker/replica:0/task:2 (no answer within 0.8 s of the error"));
  EXPECT_LT(clock.Now() - start, absl::Milliseconds(900));
}

TEST(HangWatchdogTest, AnErrorBeforeTrainingStartedGetsNoDiagnosis) {
  // A bad flag on one task: nobody has a step or a collective to report.
  InMemoryKeyValueStore store;
  FlightRecorder r0;
  HangWatchdogOptions o;
  o.store = &store;
  o.key_prefix = "test/diag";
  o.task_names = {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"};
  o.recorder = &r0;
  o.request_wait = absl::Milliseconds(100);
  o.error_gather_timeout = absl::Milliseconds(100);
  o.peek = [&store](const std::string& key) { return store.Get(key, absl::ZeroDuration()); };
  int printed = 0;
  o.print = [&](const std::string&) { ++printed; };
  auto w = HangWatchdog::Start(o);
  w->OnClusterError(absl::InvalidArgumentError("task 1: --global_batch_size"));
  w->AwaitClusterErrorReport(absl::Seconds(5));
  w.reset();
  EXPECT_EQ(printed, 0);
}

}  // namespace
}  // namespace strata
