// Issue 23's outsider attacks, replayed against a running 2-worker cluster
// of real trainer processes with the job token on (the default): each is
// refused and logged, the run ends on exactly the weights of an undisturbed
// run, and the resource attacks leave the chief's memory, threads and
// descriptors near their undisturbed values.
//
// The outsider reaches the chief's port on loopback and speaks the
// coordination service's protocol (proto/coordination.proto), without a
// proof of the token, or with a proof made with another token.
#include <dirent.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "fit/testing/cluster_runner.h"
#include "gtest/gtest.h"
#include "proto/coordination.grpc.pb.h"
#include "runtime/security/job_token.h"
#include "runtime/security/rpc_auth.h"
#include "tests/trainer_process.h"

namespace strata {
namespace testing {
namespace {

const char kW1[] = "/job:worker/replica:0/task:1";

std::vector<std::string> Flags(const std::string& ckpt) {
  return {"--optimizer=sgd",
          "--hidden=256,256",
          "--steps=12000",
          "--global_batch_size=48",
          "--prefetch=0",
          "--quiet",
          "--intra_op_threads=1",
          "--heartbeat_timeout=10",
          "--startup_timeout=60",
          "--strategy=multi_worker_mirrored",
          "--save_every_steps=2000",
          absl::StrCat("--checkpoint_dir=", ckpt),
          absl::StrCat("--digits_path=", Runfile("data/digits/digits.csv.gz"))};
}

std::unique_ptr<ClusterRunner> Start(const std::string& ckpt, absl::Duration worker1_delay) {
  ClusterOptions o;
  o.program = Runfile("tools/trainer");
  o.num_workers = 2;
  o.args = Flags(ckpt);
  o.start_delays[1] = worker1_delay;
  o.env = {JobTokenEnv()};
  auto c = ClusterRunner::Start(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

// The chief's (worker 0's) address from the cluster's JSON.
std::string ChiefAddress(const ClusterRunner& c) {
  std::smatch m;
  const std::string& cluster = c.cluster();
  EXPECT_TRUE(std::regex_search(cluster, m, std::regex("\"(127\\.0\\.0\\.1:[0-9]+)\""))) << cluster;
  return m.size() > 1 ? m[1].str() : "";
}

struct Usage {
  int64_t rss_kib = 0;
  int64_t threads = 0;
  int64_t fds = 0;
};

Usage UsageOf(int pid) {
  Usage u;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    auto value = [&](const char* key, int64_t* out) {
      if (absl::StartsWith(line, key)) {
        std::string v = line.substr(std::string(key).size());
        v.erase(0, v.find_first_not_of(" \t"));
        v = v.substr(0, v.find_first_of(" \t"));
        (void)absl::SimpleAtoi(v, out);
      }
    };
    value("VmRSS:", &u.rss_kib);
    value("Threads:", &u.threads);
  }
  if (DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (readdir(d) != nullptr) ++u.fds;
    closedir(d);
  }
  return u;
}

// One call of `rpc` with `req`, carrying a proof made with `sign_with` (null:
// none), recorded in `out` under `method`.
template <typename Request, typename Response>
void Attack(CoordinationService::Stub& stub, const char* method,
            grpc::Status (CoordinationService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                           Response*),
            const Request& req, const JobToken* sign_with,
            std::vector<std::pair<std::string, grpc::Status>>* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (sign_with != nullptr) SignRpc(*sign_with, method, req, &ctx);
  Response resp;
  out->emplace_back(method, (stub.*rpc)(&ctx, req, &resp));
}

// One outsider call of each kind; `sign_with` null: no proof at all.
std::vector<std::pair<std::string, grpc::Status>> ControlPlaneAttacks(
    CoordinationService::Stub& stub, const JobToken* sign_with) {
  using Stub = CoordinationService::Stub;
  std::vector<std::pair<std::string, grpc::Status>> out;
  ReportErrorRequest report;
  report.set_task(kW1);
  report.set_code(13);
  report.set_message("outsider: stop the job");
  Attack(stub, "ReportError", &Stub::ReportError, report, sign_with, &out);
  HeartbeatRequest beat;
  beat.set_task(kW1);
  beat.set_incarnation(424242);
  Attack(stub, "Heartbeat", &Stub::Heartbeat, beat, sign_with, &out);
  RegisterTaskRequest reg;
  reg.set_task(kW1);
  reg.set_incarnation(7);
  reg.set_cluster_fingerprint("0000000000000000");
  reg.set_timeout_ms(100);
  Attack(stub, "RegisterTask", &Stub::RegisterTask, reg, sign_with, &out);
  ShutdownTaskRequest shutdown;
  shutdown.set_task(kW1);
  shutdown.set_timeout_ms(1);
  Attack(stub, "ShutdownTask", &Stub::ShutdownTask, shutdown, sign_with, &out);
  InsertKeyValueRequest insert;
  insert.set_key("outsider/addr/1");
  insert.set_value("127.0.0.1:1");
  Attack(stub, "InsertKeyValue", &Stub::InsertKeyValue, insert, sign_with, &out);
  GetKeyValueRequest get;
  get.set_key("outsider/addr/1");
  get.set_timeout_ms(10);
  Attack(stub, "GetKeyValue", &Stub::GetKeyValue, get, sign_with, &out);
  return out;
}

// 150 inserts of 3 MB and 500 one-hour blocking gets whose callers then go
// away (defect 3 of issue 23). Returns how many calls ended with each code.
std::map<grpc::StatusCode, int> ResourceAttacks(CoordinationService::Stub& stub) {
  std::map<grpc::StatusCode, int> codes;
  const std::string big(3 << 20, 'x');
  for (int i = 0; i < 150; ++i) {
    InsertKeyValueRequest req;
    req.set_key(absl::StrCat("outsider/big/", i));
    req.set_value(big);
    InsertKeyValueResponse resp;
    grpc::ClientContext ctx;
    ++codes[stub.InsertKeyValue(&ctx, req, &resp).error_code()];
  }
  std::vector<std::thread> gets;
  Mutex mu;
  for (int i = 0; i < 500; ++i) {
    gets.emplace_back([&, i] {
      GetKeyValueRequest req;
      req.set_key(absl::StrCat("outsider/never/", i));
      req.set_timeout_ms(3600 * 1000);
      GetKeyValueResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      const grpc::StatusCode code = stub.GetKeyValue(&ctx, req, &resp).error_code();
      MutexLock l(&mu);
      ++codes[code];
    });
  }
  for (auto& t : gets) t.join();
  return codes;
}

TEST(ClusterAttackTest, OutsiderAttacksOnARunningClusterChangeNothing) {
  // Undisturbed.
  const std::string calm_ckpt = TempDir("calm_ckpt");
  std::unique_ptr<ClusterRunner> calm = Start(calm_ckpt, absl::Seconds(0));
  ASSERT_NE(calm, nullptr);
  for (const WorkerExit& e : calm->Join(absl::Minutes(5))) ASSERT_EQ(e.code, 0) << Describe(e);

  // Attacked: worker 1 starts 3 s late, so the first wave meets the chief
  // waiting for it (defect 2: the data plane's addresses are not published
  // yet); the second wave meets the running job.
  const std::string ckpt = TempDir("attacked_ckpt");
  std::unique_ptr<ClusterRunner> c = Start(ckpt, absl::Seconds(3));
  ASSERT_NE(c, nullptr);
  const std::string chief = ChiefAddress(*c);
  auto stub =
      CoordinationService::NewStub(grpc::CreateChannel(chief, grpc::InsecureChannelCredentials()));
  const JobToken other = *JobToken::FromSecret("the-outsiders-own-token-0123456789");
  // The chief's service is up once it answers at all.
  const absl::Time up_by = absl::Now() + absl::Seconds(30);
  while (absl::Now() < up_by) {
    PollForErrorRequest req;
    req.set_task("/job:worker/replica:0/task:0");
    PollForErrorResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    if (stub->PollForError(&ctx, req, &resp).error_code() == grpc::StatusCode::UNAUTHENTICATED)
      break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (const JobToken* sign_with : {static_cast<const JobToken*>(nullptr), &other}) {
    for (const auto& [name, s] : ControlPlaneAttacks(*stub, sign_with)) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << "first wave " << name << (sign_with ? " (another token)" : " (no proof)") << ": "
          << s.error_message();
    }
  }
  ASSERT_TRUE(c->WaitUntil(CheckpointReached(ckpt, 2000), absl::Minutes(2)).ok())
      << ReadFile(c->StderrPath(0));
  for (const JobToken* sign_with : {static_cast<const JobToken*>(nullptr), &other}) {
    for (const auto& [name, s] : ControlPlaneAttacks(*stub, sign_with)) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << "second wave " << name << ": " << s.error_message();
      EXPECT_FALSE(absl::StrContains(s.error_message(), "424242"));
    }
  }
  const Usage before = UsageOf(c->pid(0));
  // Refused unread (UNAUTHENTICATED), or, past the server's thread cap,
  // before a thread took them (RESOURCE_EXHAUSTED); never served.
  const std::map<grpc::StatusCode, int> codes = ResourceAttacks(*stub);
  for (const auto& [code, n] : codes) {
    std::fprintf(stderr, "resource attacks: %d calls ended with gRPC code %d\n", n,
                 static_cast<int>(code));
    EXPECT_TRUE(code == grpc::StatusCode::UNAUTHENTICATED ||
                code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << n << " calls ended with code " << code;
  }
  absl::SleepFor(absl::Milliseconds(500));
  const Usage after = UsageOf(c->pid(0));
  std::vector<WorkerExit> exits = c->Join(absl::Minutes(5));
  for (const WorkerExit& e : exits) EXPECT_EQ(e.code, 0) << Describe(e);
  if (HasFailure()) return;
  ExpectSameTensors(absl::StrCat(calm_ckpt, "/ckpt-12000"), absl::StrCat(ckpt, "/ckpt-12000"));
  EXPECT_TRUE(absl::StrContains(exits[0].err, "refused a call from")) << exits[0].err;
  std::fprintf(stderr,
               "chief before the resource attacks: RSS %lld KiB, %lld threads, %lld fds; after: "
               "%lld KiB, %lld threads, %lld fds\n",
               static_cast<long long>(before.rss_kib), static_cast<long long>(before.threads),
               static_cast<long long>(before.fds), static_cast<long long>(after.rss_kib),
               static_cast<long long>(after.threads), static_cast<long long>(after.fds));
  EXPECT_LT(after.rss_kib - before.rss_kib, 64 * 1024);
  EXPECT_LT(after.threads - before.threads, 32);
  EXPECT_LT(after.fds - before.fds, 32);
}

}  // namespace
}  // namespace testing
}  // namespace strata
