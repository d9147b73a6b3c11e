// The coordination client and service over real gRPC on 127.0.0.1: three
// tasks (chief, worker 0, worker 1), each a CoordinationClient in this
// process, the chief's GrpcServer hosting the service.
#include "runtime/coordination/coordination_client.h"

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/ip_address.h"
#include "base/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/coordination/grpc_server.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

const char kChief[] = "/job:chief/replica:0/task:0";
const char kW0[] = "/job:worker/replica:0/task:0";
const char kW1[] = "/job:worker/replica:0/task:1";
const std::vector<std::string> kTasks = {kChief, kW0, kW1};
// Generous: failures must arrive, however slowly a loaded machine runs.
constexpr absl::Duration kWaitForError = absl::Seconds(20);

int FreePort() {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts("127.0.0.1", 1);
  EXPECT_TRUE(ports.ok()) << ports.status();
  return ports.ok() ? (*ports)[0] : 0;
}

std::unique_ptr<GrpcServer> StartChief(const std::string& address,
                                       absl::Duration heartbeat_timeout) {
  GrpcServerOptions opts;
  opts.address = address;
  opts.host_coordination_service = true;
  opts.coordination.tasks = kTasks;
  opts.coordination.cluster_fingerprint = "fp";
  opts.coordination.heartbeat_timeout = heartbeat_timeout;
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(opts);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<CoordinationClient> MakeClient(const std::string& address, const std::string& task,
                                               const std::string& fingerprint = "fp") {
  CoordinationClientOptions opts;
  opts.service_address = address;
  opts.task = task;
  opts.devices = {absl::StrCat(task, "/device:CPU:0")};
  opts.cluster_fingerprint = fingerprint;
  opts.register_timeout = absl::Seconds(20);
  auto client = CoordinationClient::Connect(opts);
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(client).value();
}

// Collects what a client's error callback receives.
class ErrorSink {
 public:
  std::function<void(absl::Status)> Callback() {
    return [this](absl::Status s) {
      MutexLock l(&mu_);
      errors_.push_back(std::move(s));
      got_.Notify();
    };
  }
  // The first error, or a DeadlineExceeded saying none came.
  absl::Status Wait() {
    if (!got_.WaitForNotificationWithTimeout(kWaitForError)) {
      return absl::DeadlineExceededError("test: no error callback");
    }
    MutexLock l(&mu_);
    return errors_.front();
  }
  int count() {
    MutexLock l(&mu_);
    return static_cast<int>(errors_.size());
  }

 private:
  Mutex mu_;
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  Notification got_;
};

class CoordinationClientTest : public ::testing::Test {
 protected:
  // Starts the chief's server on a port of its choosing and registers the
  // three tasks concurrently.
  void StartCluster(absl::Duration heartbeat_timeout = absl::Seconds(3)) {
    server_ = StartChief("127.0.0.1:0", heartbeat_timeout);
    ASSERT_NE(server_, nullptr);
    address_ = server_->address();
    std::vector<std::thread> threads;
    for (const std::string& t : kTasks) {
      clients_.push_back(MakeClient(address_, t));
      sinks_.push_back(std::make_unique<ErrorSink>());
      clients_.back()->SetErrorCallback(sinks_.back()->Callback());
    }
    for (auto& c : clients_) {
      threads.emplace_back([&c] {
        absl::StatusOr<std::vector<std::string>> d = c->Register();
        EXPECT_TRUE(d.ok()) << d.status();
      });
    }
    for (auto& t : threads) t.join();
  }

  void TearDown() override {
    clients_.clear();
    server_.reset();
  }

  std::unique_ptr<GrpcServer> server_;
  std::string address_;
  std::vector<std::unique_ptr<CoordinationClient>> clients_;
  std::vector<std::unique_ptr<ErrorSink>> sinks_;
};

TEST_F(CoordinationClientTest, TasksAndChiefStartInRandomOrder) {
  const int port = FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const unsigned seed = std::random_device()();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 600);
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::vector<std::string>>> results(kTasks.size());
  std::vector<std::unique_ptr<CoordinationClient>> clients;
  for (const std::string& t : kTasks) clients.push_back(MakeClient(address, t));
  for (size_t i = 0; i < kTasks.size(); ++i) {
    const int d = delay_ms(rng);
    threads.emplace_back([&, i, d] {
      absl::SleepFor(absl::Milliseconds(d));
      results[i] = clients[i]->Register();
    });
  }
  absl::SleepFor(absl::Milliseconds(delay_ms(rng)));
  std::unique_ptr<GrpcServer> server = StartChief(address, absl::Seconds(3));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->address(), address);
  for (auto& t : threads) t.join();
  const std::vector<std::string> expected = {absl::StrCat(kChief, "/device:CPU:0"),
                                             absl::StrCat(kW0, "/device:CPU:0"),
                                             absl::StrCat(kW1, "/device:CPU:0")};
  for (size_t i = 0; i < kTasks.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << kTasks[i] << ": " << results[i].status();
    EXPECT_EQ(*results[i], expected);
  }
  std::vector<std::thread> shutdowns;
  for (auto& c : clients) {
    shutdowns.emplace_back([&c] { EXPECT_TRUE(c->Shutdown(absl::Seconds(20)).ok()); });
  }
  for (auto& t : shutdowns) t.join();
  for (auto& c : clients) EXPECT_TRUE(c->error().ok()) << c->error();
}

TEST_F(CoordinationClientTest, RegisterTimesOutWhenTheChiefNeverComes) {
  CoordinationClientOptions opts;
  opts.service_address = absl::StrCat("127.0.0.1:", FreePort());
  opts.task = kW0;
  opts.register_timeout = absl::Milliseconds(500);
  auto client = CoordinationClient::Connect(opts);
  ASSERT_TRUE(client.ok());
  absl::Status st = (*client)->Register().status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr(kW0));
  EXPECT_THAT(st.message(), HasSubstr("not reachable"));
}

TEST_F(CoordinationClientTest, BarrierPassesAndTimesOutNamingTheMissingTask) {
  StartCluster();
  std::vector<std::thread> threads;
  for (auto& c : clients_) {
    threads.emplace_back([&c] { EXPECT_TRUE(c->WaitForBarrier("init", absl::Seconds(20)).ok()); });
  }
  for (auto& t : threads) t.join();

  std::thread w0([&] {
    EXPECT_EQ(clients_[1]->WaitForBarrier("step", absl::Seconds(20)).code(),
              absl::StatusCode::kDeadlineExceeded);
  });
  absl::Status st = clients_[0]->WaitForBarrier("step", absl::Milliseconds(300));
  w0.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("'step'"));
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("did not arrive: ")));
  EXPECT_THAT(st.message(), HasSubstr(kW1));
}

TEST_F(CoordinationClientTest, KeyValueInsertOnceAndBlockingGetAcrossClients) {
  StartCluster();
  std::thread getter([&] {
    absl::StatusOr<std::string> v = clients_[2]->Get("tcp/addr/0", absl::Seconds(20));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, "127.0.0.1:40123");
  });
  absl::SleepFor(absl::Milliseconds(100));
  KeyValueStore& kv = *clients_[1];
  EXPECT_TRUE(kv.Insert("tcp/addr/0", "127.0.0.1:40123").ok());
  getter.join();
  absl::Status again = clients_[0]->Insert("tcp/addr/0", "other");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("'tcp/addr/0'"));
  EXPECT_EQ(*clients_[0]->Get("tcp/addr/0", absl::Seconds(1)), "127.0.0.1:40123");
  absl::StatusOr<std::string> missing = clients_[0]->Get("nope", absl::Milliseconds(100));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nope'"));
  // Binary values survive.
  const std::string bytes("\0\x01\xff", 3);
  EXPECT_TRUE(clients_[2]->Insert("nccl/id", bytes).ok());
  EXPECT_EQ(*clients_[1]->Get("nccl/id", absl::Seconds(1)), bytes);
}

TEST_F(CoordinationClientTest, FrozenHeartbeatIsReportedToEveryTask) {
  StartCluster(absl::Milliseconds(500));
  clients_[2]->PauseHeartbeatsForTest();
  for (int i = 0; i < 2; ++i) {
    absl::Status st = sinks_[i]->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
    EXPECT_THAT(st.message(),
                HasSubstr(absl::StrCat("task ", kW1, " lost: no heartbeat for 500ms")));
  }
  // Blocked and later calls give the error instead of waiting.
  absl::StatusOr<std::string> v = clients_[0]->Get("never", absl::Seconds(20));
  EXPECT_THAT(v.status().message(), HasSubstr(absl::StrCat(kW1, " lost")));
  clients_.clear();  // joins the threads: no callback can run after this
  for (int i = 0; i < 2; ++i) EXPECT_EQ(sinks_[i]->count(), 1);
}

TEST_F(CoordinationClientTest, DestroyedClientIsLost) {
  StartCluster(absl::Milliseconds(500));
  clients_[1].reset();  // worker 0 dies without Shutdown
  for (int i : {0, 2}) {
    absl::Status st = sinks_[i]->Wait();
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("task ", kW0, " lost")));
  }
}

TEST_F(CoordinationClientTest, ReportedErrorReachesEveryTaskAndAbortsBlockedCalls) {
  StartCluster();
  std::thread getter([&] {
    absl::StatusOr<std::string> v = clients_[0]->Get("never", absl::Seconds(20));
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(v.status().message(), HasSubstr("loss is NaN"));
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(clients_[1]->ReportError(absl::InternalError("loss is NaN at step 7")).ok());
  for (int i = 0; i < 3; ++i) {
    absl::Status st = sinks_[i]->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(st.message(), absl::StrCat("task ", kW0, " failed: loss is NaN at step 7"));
  }
  getter.join();
  // A callback set after the error runs at once, once.
  ErrorSink late;
  clients_[2]->SetErrorCallback(late.Callback());
  EXPECT_EQ(late.count(), 0);  // already delivered to the first callback
  EXPECT_EQ(clients_[2]->WaitForBarrier("b", absl::Seconds(5)).code(), absl::StatusCode::kInternal);
}

// What an owner relies on to tear down what its callback uses (the
// strategy's collective executor): once Stop() returns, the callback has
// returned and never runs again. Stop() from inside the callback returns
// too.
TEST_F(CoordinationClientTest, StopWaitsForTheCallbackInFlight) {
  StartCluster();
  Notification entered;
  std::atomic<bool> returned{false};
  std::atomic<int> calls{0};
  clients_[0]->SetErrorCallback([&](absl::Status) {
    ++calls;
    entered.Notify();
    // Long enough that a Stop() which did not wait would see it unfinished.
    absl::SleepFor(absl::Milliseconds(300));
    returned = true;
  });
  CoordinationClient* self_stopping = clients_[1].get();
  clients_[1]->SetErrorCallback([&, self_stopping](absl::Status s) {
    self_stopping->Stop();
    sinks_[1]->Callback()(std::move(s));
  });
  EXPECT_TRUE(clients_[2]->ReportError(absl::InternalError("disk full")).ok());
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(kWaitForError));
  clients_[0]->Stop();
  EXPECT_TRUE(returned.load());
  EXPECT_THAT(sinks_[1]->Wait().message(), HasSubstr("disk full"));
  // Stopped: calls end at once, and the callback never runs again.
  EXPECT_EQ(clients_[0]->Get("k", absl::Seconds(20)).status().code(),
            absl::StatusCode::kInternal);  // the error it already knows
  EXPECT_EQ(clients_[0]->Insert("k", "v").code(), absl::StatusCode::kCancelled);
  clients_[0]->Stop();  // idempotent
  clients_.clear();
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(CoordinationClientTest, RestartedTaskIsDetected) {
  StartCluster();
  std::unique_ptr<CoordinationClient> reborn = MakeClient(address_, kW1);
  ASSERT_NE(reborn->incarnation(), clients_[2]->incarnation());
  absl::Status st = reborn->Register().status();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted);
  const std::string expected =
      absl::StrCat("task ", kW1, " restarted (incarnation ", clients_[2]->incarnation(), " -> ",
                   reborn->incarnation(), ")");
  EXPECT_THAT(st.message(), HasSubstr(expected));
  for (int i = 0; i < 2; ++i) EXPECT_THAT(sinks_[i]->Wait().message(), HasSubstr(expected));
}

TEST_F(CoordinationClientTest, DifferentClusterFingerprintFailsEveryTaskFast) {
  server_ = StartChief("127.0.0.1:0", absl::Seconds(3));
  ASSERT_NE(server_, nullptr);
  auto chief = MakeClient(server_->address(), kChief);
  auto w0 = MakeClient(server_->address(), kW0);
  auto w1 = MakeClient(server_->address(), kW1, "other-fp");
  absl::Status chief_status, w0_status;
  std::thread a([&] { chief_status = chief->Register().status(); });
  std::thread b([&] { w0_status = w0->Register().status(); });
  absl::SleepFor(absl::Milliseconds(100));
  absl::Status st = w1->Register().status();
  a.join();  // well before their 20 s register timeout
  b.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(kW1));
  EXPECT_THAT(st.message(), HasSubstr("other-fp vs fp"));
  for (const absl::Status& s : {chief_status, w0_status}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(kW1));
  }
}

TEST_F(CoordinationClientTest, MessagesOverTheCapAreRejected) {
  StartCluster();
  const std::string big(5 << 20, 'x');
  absl::Status st = clients_[0]->Insert("big", big);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("'big'"));
  // A client allowing more is stopped by the server's cap.
  CoordinationClientOptions opts;
  opts.service_address = address_;
  opts.task = kW0;
  opts.max_message_bytes = 64 << 20;
  auto loose = CoordinationClient::Connect(opts);
  ASSERT_TRUE(loose.ok());
  st = (*loose)->Insert("big", big);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  // Nothing was stored and the service still works.
  EXPECT_TRUE(clients_[1]->Insert("big", "small").ok());
  EXPECT_EQ(*clients_[2]->Get("big", absl::Seconds(1)), "small");
}

TEST_F(CoordinationClientTest, LostChiefIsReportedByTheWorkers) {
  StartCluster(absl::Milliseconds(500));
  server_.reset();  // the chief's process dies
  for (int i : {1, 2}) {
    absl::Status st = sinks_[i]->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("chief task ", kChief, " lost")));
  }
}

TEST_F(CoordinationClientTest, ShutdownBarrierNamesTheMissingTask) {
  StartCluster();
  std::thread w0([&] {
    EXPECT_EQ(clients_[1]->Shutdown(absl::Milliseconds(300)).code(),
              absl::StatusCode::kDeadlineExceeded);
  });
  absl::Status st = clients_[0]->Shutdown(absl::Milliseconds(300));
  w0.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("did not shut down: "));
  EXPECT_THAT(st.message(), HasSubstr(kW1));
}

}  // namespace
}  // namespace strata
