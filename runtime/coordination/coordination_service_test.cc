#include "runtime/coordination/coordination_service.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/testing/test_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char kChief[] = "/job:chief/replica:0/task:0";
const char kW0[] = "/job:worker/replica:0/task:0";
const char kW1[] = "/job:worker/replica:0/task:1";

std::unique_ptr<CoordinationServiceImpl> MakeService(
    absl::Duration heartbeat_timeout = absl::Seconds(10)) {
  CoordinationServiceOptions opts;
  opts.tasks = {kChief, kW0, kW1};
  opts.cluster_fingerprint = "abc";
  opts.heartbeat_timeout = heartbeat_timeout;
  auto s = CoordinationServiceImpl::Create(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

// The cluster error a poll of `task` sees within `timeout`.
absl::Status Poll(CoordinationServiceImpl* s, const std::string& task, absl::Duration timeout) {
  absl::Status error;
  EXPECT_TRUE(s->PollForError(task, timeout, &error).ok());
  return error;
}

std::vector<std::string> Devices(const std::string& task) {
  return {absl::StrCat(task, "/device:CPU:0")};
}

// Registers every task but `skip` from threads, in reverse order.
std::vector<std::thread> RegisterOthers(CoordinationServiceImpl* s, const std::string& skip,
                                        std::vector<absl::Status>* results) {
  std::vector<std::thread> threads;
  const std::vector<std::string> tasks = s->tasks();
  results->assign(tasks.size(), absl::OkStatus());
  for (int i = static_cast<int>(tasks.size()) - 1; i >= 0; --i) {
    if (tasks[i] == skip) continue;
    threads.emplace_back([s, i, tasks, results] {
      (*results)[i] =
          s->RegisterTask(tasks[i], 1 + i, Devices(tasks[i]), "abc", absl::Seconds(20)).status();
    });
  }
  return threads;
}

TEST(CoordinatedTasksTest, ChiefFirstThenWorkersByIndexWithoutPsOrEvaluator) {
  tensorflow::ClusterDef def;
  tensorflow::JobDef* w = def.add_job();
  w->set_name("worker");
  (*w->mutable_tasks())[1] = "h:2";
  (*w->mutable_tasks())[0] = "h:1";
  tensorflow::JobDef* ps = def.add_job();
  ps->set_name("ps");
  (*ps->mutable_tasks())[0] = "h:3";
  tensorflow::JobDef* c = def.add_job();
  c->set_name("chief");
  (*c->mutable_tasks())[0] = "h:0";
  EXPECT_THAT(CoordinatedTasks(def), ElementsAre(kChief, kW0, kW1));

  tensorflow::ClusterDef reordered;
  *reordered.add_job() = *c;
  *reordered.add_job() = *ps;
  *reordered.add_job() = *w;
  EXPECT_EQ(ClusterFingerprint(def), ClusterFingerprint(reordered));
  (*reordered.mutable_job(2)->mutable_tasks())[1] = "h:9";
  EXPECT_NE(ClusterFingerprint(def), ClusterFingerprint(reordered));
}

TEST(CoordinationServiceTest, BadOptionsRefused) {
  CoordinationServiceOptions opts;
  EXPECT_EQ(CoordinationServiceImpl::Create(opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts.tasks = {kW0, kW0};
  EXPECT_THAT(CoordinationServiceImpl::Create(opts).status().message(), HasSubstr("listed twice"));
}

TEST(CoordinationServiceTest, RegistrationWaitsForAllAndGivesDevicesInTaskOrder) {
  auto s = MakeService();
  std::vector<absl::Status> results;
  std::vector<std::thread> threads = RegisterOthers(s.get(), kChief, &results);
  absl::SleepFor(absl::Milliseconds(50));
  absl::StatusOr<RegisterResult> r =
      s->RegisterTask(kChief, 7, Devices(kChief), "abc", absl::Seconds(20));
  for (auto& t : threads) t.join();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& st : results) EXPECT_TRUE(st.ok()) << st;
  EXPECT_THAT(r->devices,
              ElementsAre(absl::StrCat(kChief, "/device:CPU:0"), absl::StrCat(kW0, "/device:CPU:0"),
                          absl::StrCat(kW1, "/device:CPU:0")));
  EXPECT_EQ(r->service_task, kChief);
  // A retry with the same incarnation is not a restart.
  EXPECT_TRUE(s->RegisterTask(kChief, 7, Devices(kChief), "abc", absl::Seconds(1)).ok());
  EXPECT_TRUE(s->cluster_error().ok());
}

TEST(CoordinationServiceTest, RegistrationTimeoutNamesMissingTask) {
  auto s = MakeService();
  std::vector<absl::Status> results;
  std::thread chief([&] {
    EXPECT_TRUE(s->RegisterTask(kChief, 1, {}, "abc", absl::Milliseconds(300)).status().code() ==
                absl::StatusCode::kDeadlineExceeded);
  });
  absl::StatusOr<RegisterResult> r = s->RegisterTask(kW0, 2, {}, "abc", absl::Milliseconds(300));
  chief.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(),
              HasSubstr(absl::StrCat("1 of 3 tasks never registered: ", kW1)));
}

// Defect 4 of issue 23: an early task blocked in registration sends no
// heartbeats, so its clock must not run until every task is there.
TEST(CoordinationServiceTest, TaskLaterThanTheHeartbeatTimeoutJoinsAndNobodyIsLost) {
  auto s = MakeService(absl::Milliseconds(200));
  std::vector<absl::Status> results;
  std::vector<std::thread> threads = RegisterOthers(s.get(), kW1, &results);
  absl::SleepFor(absl::Milliseconds(900));  // 4.5 heartbeat timeouts late
  EXPECT_TRUE(s->cluster_error().ok()) << s->cluster_error();
  absl::StatusOr<RegisterResult> r =
      s->RegisterTask(kW1, 3, Devices(kW1), "abc", absl::Seconds(20));
  for (auto& t : threads) t.join();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& st : results) EXPECT_TRUE(st.ok()) << st;
  // From the start on every task is judged: beating ones stay, and the
  // cluster has no error.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(s->Heartbeat(kChief, 1).ok());
    EXPECT_TRUE(s->Heartbeat(kW0, 2).ok());
    EXPECT_TRUE(s->Heartbeat(kW1, 3).ok());
    absl::SleepFor(absl::Milliseconds(40));
  }
  EXPECT_TRUE(s->cluster_error().ok()) << s->cluster_error();
  // ...and one that stops beating is lost.
  absl::Status polled = Poll(s.get(), kW0, absl::Seconds(10));
  EXPECT_EQ(polled.code(), absl::StatusCode::kUnavailable);
}

// Error messages travel as gRPC status messages, which must fit in a
// response's metadata: at any cluster size they name a bounded number of
// tasks and say how many more there are.
TEST(CoordinationServiceTest, ErrorsOfLargeClustersNameSixteenTasksAndCountTheRest) {
  CoordinationServiceOptions opts;
  for (int i = 0; i < 300; ++i)
    opts.tasks.push_back(absl::StrCat("/job:worker/replica:0/task:", i));
  auto s = CoordinationServiceImpl::Create(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status st = (*s)->RegisterTask(opts.tasks[0], 1, {}, "", absl::Milliseconds(50)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("299 of 300 tasks never registered: "
                                      "/job:worker/replica:0/task:1, "));
  EXPECT_THAT(st.message(), HasSubstr("/job:worker/replica:0/task:16 and 283 more"));
  EXPECT_LT(st.message().size(), 1024u);
  st = (*s)->RegisterTask("/job:worker/replica:0/task:300", 1, {}, "", absl::Seconds(1)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("and 284 more"));
  EXPECT_LT(st.message().size(), 1024u);
}

TEST(CoordinationServiceTest, UnknownTaskRefused) {
  auto s = MakeService();
  absl::Status st =
      s->RegisterTask("/job:worker/replica:0/task:7", 1, {}, "abc", absl::Seconds(1)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("/job:worker/replica:0/task:7"));
}

TEST(CoordinationServiceTest, FingerprintMismatchFailsTheTaskAndTheOthers) {
  auto s = MakeService();
  std::thread waiting([&] {
    absl::Status st = s->RegisterTask(kChief, 1, {}, "abc", absl::Seconds(20)).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr(kW1));
  });
  absl::SleepFor(absl::Milliseconds(50));
  absl::Status st = s->RegisterTask(kW1, 2, {}, "xyz", absl::Seconds(20)).status();
  waiting.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(kW1));
  EXPECT_THAT(st.message(), HasSubstr("xyz"));
  EXPECT_THAT(st.message(), HasSubstr("abc"));
  absl::Status polled = Poll(s.get(), kW0, absl::Seconds(1));
  EXPECT_THAT(polled.message(), HasSubstr(kW1));
}

TEST(CoordinationServiceTest, NewIncarnationBeforeStartReplacesAfterStartIsARestart) {
  auto s = MakeService();
  std::vector<absl::Status> results;
  // kW1 registers twice before everyone is there (each attempt giving up
  // at once): the second process takes the first one's place.
  EXPECT_EQ(s->RegisterTask(kW1, 100, {"old"}, "abc", absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s->RegisterTask(kW1, 3, Devices(kW1), "abc", absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread w0(
      [&] { EXPECT_TRUE(s->RegisterTask(kW0, 2, Devices(kW0), "abc", absl::Seconds(20)).ok()); });
  absl::StatusOr<RegisterResult> r =
      s->RegisterTask(kChief, 1, Devices(kChief), "abc", absl::Seconds(20));
  w0.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices.back(), absl::StrCat(kW1, "/device:CPU:0"));
  EXPECT_TRUE(s->cluster_error().ok());

  absl::Status st = s->RegisterTask(kW1, 555, Devices(kW1), "abc", absl::Seconds(1)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted);
  const std::string expected = absl::StrCat("task ", kW1, " restarted (incarnation 3 -> 555)");
  EXPECT_THAT(st.message(), HasSubstr(expected));
  absl::Status polled = Poll(s.get(), kChief, absl::Seconds(1));
  EXPECT_THAT(polled.message(), HasSubstr(expected));
}

TEST(CoordinationServiceTest, SilentTaskIsLostAndEveryPollSeesIt) {
  auto s = MakeService(absl::Milliseconds(300));
  std::vector<absl::Status> results;
  std::vector<std::thread> threads = RegisterOthers(s.get(), "", &results);
  for (auto& t : threads) t.join();
  // Everyone but kW0 keeps beating.
  std::atomic<bool> stop{false};
  std::thread beats([&] {
    while (!stop) {
      (void)s->Heartbeat(kChief, 1);
      (void)s->Heartbeat(kW1, 3);
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  absl::Status polled = Poll(s.get(), kChief, absl::Seconds(10));
  stop = true;
  beats.join();
  EXPECT_EQ(polled.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(polled.message(), absl::StrCat("task ", kW0, " lost: no heartbeat for 300ms"));
  EXPECT_EQ(s->Heartbeat(kW0, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->Heartbeat(kW1, 99).code(), absl::StatusCode::kAborted);
}

// Heartbeats and deadlines run on the service's Env clock: with a manual
// clock a minute's heartbeat timeout and a 30 s wait are tested without
// waiting for them (the timer still wakes in real time, once a period).
TEST(CoordinationServiceTest, HeartbeatsAndDeadlinesFollowTheEnvClock) {
  testing::ManualClockEnv clock;
  CoordinationServiceOptions opts;
  opts.tasks = {kChief, kW0, kW1};
  opts.heartbeat_timeout = absl::Minutes(1);
  opts.env = &clock;
  auto created = CoordinationServiceImpl::Create(opts);
  ASSERT_TRUE(created.ok()) << created.status();
  CoordinationServiceImpl* s = created->get();
  std::vector<absl::Status> results;
  std::vector<std::thread> threads = RegisterOthers(s, "", &results);
  for (auto& t : threads) t.join();
  for (const absl::Status& r : results) ASSERT_TRUE(r.ok()) << r;

  std::atomic<bool> got_deadline{false};
  s->GetKeyValueAsync("never", absl::Seconds(30), [&](absl::StatusOr<std::string> v) {
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();
    got_deadline = true;
  });
  clock.Advance(absl::Seconds(29));
  absl::SleepFor(absl::Milliseconds(1500));  // more than a timer period (1 s)
  EXPECT_FALSE(got_deadline) << "29 s of the clock's 30";

  // kW0 stays silent; the others beat at 50 s.
  clock.Advance(absl::Seconds(21));
  ASSERT_TRUE(s->Heartbeat(kChief, 1).ok());
  ASSERT_TRUE(s->Heartbeat(kW1, 3).ok());
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(got_deadline);
  EXPECT_TRUE(s->cluster_error().ok()) << "50 s of silence is within the minute";

  clock.Advance(absl::Seconds(11));  // kW0 silent 61 s, the others 11 s
  const absl::Time real_deadline = absl::Now() + absl::Seconds(30);
  while (s->cluster_error().ok() && absl::Now() < real_deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s->cluster_error().message(), absl::StrCat("task ", kW0, " lost: no heartbeat for 1m"));
}

TEST(CoordinationServiceTest, BarrierPassesAndTimesOutNamingMissing) {
  auto s = MakeService();
  std::thread a([&] { EXPECT_TRUE(s->WaitForBarrier("b", kW0, absl::Seconds(20), {}).ok()); });
  std::thread b([&] { EXPECT_TRUE(s->WaitForBarrier("b", kW1, absl::Seconds(20), {}).ok()); });
  EXPECT_TRUE(s->WaitForBarrier("b", kChief, absl::Seconds(20), {}).ok());
  a.join();
  b.join();

  std::thread c([&] {
    EXPECT_EQ(s->WaitForBarrier("t", kW0, absl::Seconds(20), {}).code(),
              absl::StatusCode::kDeadlineExceeded);
  });
  absl::Status st = s->WaitForBarrier("t", kChief, absl::Milliseconds(200), {});
  c.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("'t'"));
  EXPECT_THAT(st.message(), HasSubstr(kW1));
  // A finished barrier keeps its result.
  EXPECT_EQ(s->WaitForBarrier("t", kW1, absl::Seconds(1), {}).code(),
            absl::StatusCode::kDeadlineExceeded);

  // Tasks disagreeing about a barrier's members.
  absl::Status mismatch = s->WaitForBarrier("b", kW1, absl::Seconds(1), {kW1});
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatch.message(), HasSubstr("'b'"));
  EXPECT_EQ(s->WaitForBarrier("sub", kChief, absl::Seconds(1), {kW0, kW1}).code(),
            absl::StatusCode::kInvalidArgument);
  // A barrier of some tasks.
  std::thread d([&] {
    EXPECT_TRUE(s->WaitForBarrier("sub", kW0, absl::Seconds(20), {kW0, kW1}).ok());
  });
  EXPECT_TRUE(s->WaitForBarrier("sub", kW1, absl::Seconds(20), {kW1, kW0}).ok());
  d.join();
}

TEST(CoordinationServiceTest, KeyValueInsertOnceAndBlockingGet) {
  auto s = MakeService();
  std::thread getter([&] {
    absl::StatusOr<std::string> v = s->GetKeyValue("k", absl::Seconds(20));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, "v1");
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(s->InsertKeyValue("k", "v1").ok());
  getter.join();
  absl::Status again = s->InsertKeyValue("k", "v2");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("'k'"));
  EXPECT_EQ(*s->GetKeyValue("k", absl::ZeroDuration()), "v1");
  absl::StatusOr<std::string> missing = s->GetKeyValue("nope", absl::Milliseconds(50));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nope'"));
}

// Issue 23, defect 3: the store is bounded per value, in keys and in bytes.
TEST(CoordinationServiceTest, KeyValueStoreIsBounded) {
  CoordinationServiceOptions opts;
  opts.tasks = {kChief};
  opts.max_value_bytes = 100;
  opts.max_keys = 3;
  opts.max_store_bytes = 250;
  auto s = *CoordinationServiceImpl::Create(opts);
  absl::Status st = s->InsertKeyValue("big", std::string(101, 'v'));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("'big' has 101 bytes, more than the 100"));
  EXPECT_TRUE(s->InsertKeyValue("a", std::string(100, 'v')).ok());
  EXPECT_TRUE(s->InsertKeyValue("b", std::string(100, 'v')).ok());
  st = s->InsertKeyValue("c", std::string(100, 'v'));  // 303 bytes > 250
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(s->InsertKeyValue("c", "v").ok());
  st = s->InsertKeyValue("d", "v");  // a fourth key
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("3 keys"));
  // A key quoted in an error is bounded and escaped.
  st = s->InsertKeyValue(std::string(5000, 'k') + "\x1b", "v");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_LT(st.message().size(), 400u);
}

// Waiting calls are bounded: past max_waiting_calls one that would wait is
// refused (it holds no thread either way); an answer that needs no wait
// still comes.
TEST(CoordinationServiceTest, WaitingCallsAreBounded) {
  CoordinationServiceOptions o;
  o.tasks = {kChief, kW0};
  o.max_waiting_calls = 2;
  auto s = *CoordinationServiceImpl::Create(o);
  std::vector<absl::StatusOr<std::string>> got(3);
  std::vector<WaitId> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(s->GetKeyValueAsync("k", absl::Hours(1),
                                      [&got, i](absl::StatusOr<std::string> v) { got[i] = v; }));
  }
  EXPECT_NE(ids[0], kNoWait);
  EXPECT_NE(ids[1], kNoWait);
  EXPECT_EQ(ids[2], kNoWait);
  EXPECT_EQ(got[2].status().code(), absl::StatusCode::kResourceExhausted) << got[2].status();
  EXPECT_THAT(got[2].status().message(), HasSubstr("2 calls waiting already"));
  EXPECT_EQ(s->blocked_calls(), 2);
  ASSERT_TRUE(s->InsertKeyValue("k", "v").ok());
  EXPECT_EQ(s->blocked_calls(), 0);
  EXPECT_EQ(*got[0], "v");
  EXPECT_EQ(*got[1], "v");
  auto now = s->GetKeyValue("k", absl::Seconds(1));
  EXPECT_EQ(*now, "v");
  // A cancelled wait ends Cancelled; cancelling again, or an ended wait, is a no-op.
  absl::Status cancelled;
  const WaitId id = s->WaitForBarrierAsync("b", kChief, absl::Hours(1), {},
                                           [&](absl::Status st) { cancelled = st; });
  s->CancelWait(id);
  s->CancelWait(id);
  s->CancelWait(ids[0]);
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled) << cancelled;
}

// Waits end on time without a thread of their own: the timer thread ends
// each at its deadline (not before), whatever order they came in.
TEST(CoordinationServiceTest, AsyncWaitsEndAtTheirDeadlines) {
  auto s = MakeService();
  Mutex mu;
  std::vector<std::pair<int, absl::Duration>> ended;
  const absl::Time t0 = absl::Now();
  for (int ms : {300, 100, 200}) {
    s->GetKeyValueAsync(absl::StrCat("k", ms), absl::Milliseconds(ms),
                        [&, ms](absl::StatusOr<std::string> v) {
                          EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
                          MutexLock l(&mu);
                          ended.emplace_back(ms, absl::Now() - t0);
                        });
  }
  EXPECT_EQ(s->blocked_calls(), 3);
  while (s->blocked_calls() > 0) absl::SleepFor(absl::Milliseconds(5));
  MutexLock l(&mu);
  ASSERT_EQ(ended.size(), 3u);
  for (const auto& [ms, after] : ended) EXPECT_GE(after, absl::Milliseconds(ms)) << ms;
}

// Issue 23, defect 3: a blocked call whose caller went away gives its thread
// back at once; a barrier is not failed for the others by it.
TEST(CoordinationServiceTest, BlockedCallsReturnWhenTheirCallerIsGone) {
  auto s = MakeService();
  std::atomic<bool> gone{false};
  CallerGone caller_gone = [&] { return gone.load(); };
  absl::StatusOr<std::string> got;
  absl::Status barrier;
  std::thread get([&] { got = s->GetKeyValue("never", absl::Hours(1), caller_gone); });
  std::thread wait([&] {
    barrier = s->WaitForBarrier("b", kChief, absl::Hours(1), {kChief, kW0}, caller_gone);
  });
  while (s->blocked_calls() < 2) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time t0 = absl::Now();
  gone = true;
  get.join();
  wait.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_EQ(s->blocked_calls(), 0);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_EQ(barrier.code(), absl::StatusCode::kCancelled) << barrier;
  // The chief had arrived: the barrier passes when kW0 comes.
  EXPECT_TRUE(s->WaitForBarrier("b", kW0, absl::Seconds(5), {kChief, kW0}).ok());
}

TEST(CoordinationServiceTest, ReportedErrorAbortsBlockedCallsAndReachesPolls) {
  auto s = MakeService();
  std::thread getter([&] {
    absl::StatusOr<std::string> v = s->GetKeyValue("never", absl::Seconds(20));
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(v.status().message(), HasSubstr("disk on fire"));
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(s->ReportError(kW1, absl::InternalError("disk on fire")).ok());
  getter.join();
  for (const char* t : {kChief, kW0}) {
    absl::Status polled = Poll(s.get(), t, absl::Seconds(1));
    EXPECT_EQ(polled.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(polled.message(), absl::StrCat("task ", kW1, " failed: disk on fire"));
  }
  // The first error stays the cluster's error.
  EXPECT_TRUE(s->ReportError(kW0, absl::AbortedError("later")).ok());
  EXPECT_THAT(s->cluster_error().message(), HasSubstr("disk on fire"));
  EXPECT_EQ(s->ReportError(kW0, absl::OkStatus()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoordinationServiceTest, PollWithoutErrorReturnsOkAfterItsTimeout) {
  auto s = MakeService();
  absl::Status polled = Poll(s.get(), kW0, absl::Milliseconds(50));
  EXPECT_TRUE(polled.ok());
}

TEST(CoordinationServiceTest, ShutdownBarrierPassesAndNamesMissingTasks) {
  auto s = MakeService();
  std::thread a([&] { EXPECT_TRUE(s->ShutdownTask(kW0, absl::Seconds(20)).ok()); });
  std::thread b([&] { EXPECT_TRUE(s->ShutdownTask(kW1, absl::Seconds(20)).ok()); });
  EXPECT_TRUE(s->ShutdownTask(kChief, absl::Seconds(20)).ok());
  a.join();
  b.join();

  auto s2 = MakeService();
  absl::Status st = s2->ShutdownTask(kW0, absl::Milliseconds(100));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr(kChief));
  EXPECT_THAT(st.message(), HasSubstr(kW1));
}

// A heartbeat the task sent before its ShutdownTask's answer reached it
// arrives after the barrier passed: the task is leaving, not failing.
TEST(CoordinationServiceTest, HeartbeatCrossingThePassedShutdownBarrierIsNoError) {
  auto s = MakeService();
  std::vector<absl::Status> registered;
  std::vector<std::thread> threads = RegisterOthers(s.get(), kChief, &registered);
  ASSERT_TRUE(s->RegisterTask(kChief, 1, Devices(kChief), "abc", absl::Seconds(20)).ok());
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : registered) ASSERT_TRUE(st.ok()) << st;
  std::thread a([&] { EXPECT_TRUE(s->ShutdownTask(kW0, absl::Seconds(20)).ok()); });
  std::thread b([&] { EXPECT_TRUE(s->ShutdownTask(kW1, absl::Seconds(20)).ok()); });
  EXPECT_TRUE(s->ShutdownTask(kChief, absl::Seconds(20)).ok());
  a.join();
  b.join();
  EXPECT_TRUE(s->Heartbeat(kChief, 1).ok());
  EXPECT_TRUE(Poll(s.get(), kW0, absl::Milliseconds(1)).ok());
  // Another process under the task's name is still refused.
  absl::Status other = s->Heartbeat(kChief, 99);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr("shut down"));
}

TEST(CoordinationServiceTest, StopWakesBlockedCalls) {
  auto s = MakeService();
  std::thread getter([&] {
    EXPECT_EQ(s->GetKeyValue("k", absl::Seconds(60)).status().code(),
              absl::StatusCode::kUnavailable);
  });
  std::thread poller([&] {
    absl::Status error;
    EXPECT_EQ(s->PollForError(kW0, absl::Seconds(60), &error).code(),
              absl::StatusCode::kUnavailable);
    EXPECT_TRUE(error.ok()) << "stopping is not a cluster error: " << error;
  });
  absl::SleepFor(absl::Milliseconds(50));
  s->Stop();
  getter.join();
  poller.join();
}

}  // namespace
}  // namespace strata
