// The coordination service with a job token, attacked by an outsider that can
// reach its port (issue 23, defects 1 and 2): every call without a valid
// proof is refused before it changes anything, and the refusals reveal
// nothing of the token, the incarnations or the cluster's fingerprint.
#include <dirent.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordination.grpc.pb.h"
#include "runtime/coordination/coordination_client.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/security/job_token.h"
#include "runtime/security/rpc_auth.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kW0[] = "/job:worker/replica:0/task:0";
const char kW1[] = "/job:worker/replica:0/task:1";
const char kSecret[] = "the-job-token-of-this-test-0123456789";
const char kFingerprint[] = "f1f2f3f4f5f6f7f8";

JobToken Token(const std::string& secret = kSecret) { return *JobToken::FromSecret(secret); }

class JobTokenRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcServerOptions opts;
    opts.address = "127.0.0.1:0";
    opts.host_coordination_service = true;
    opts.coordination.tasks = {kW0, kW1};
    opts.coordination.cluster_fingerprint = kFingerprint;
    opts.job_token = Token();
    auto server = GrpcServer::Start(std::move(opts));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = CoordinationService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }

  std::unique_ptr<CoordinationClient> Client(const std::string& task, std::optional<JobToken> token,
                                             uint64_t incarnation) {
    CoordinationClientOptions o;
    o.service_address = server_->address();
    o.task = task;
    o.devices = {absl::StrCat(task, "/device:CPU:0")};
    o.cluster_fingerprint = kFingerprint;
    o.incarnation = incarnation;
    o.register_timeout = absl::Seconds(20);
    o.job_token = std::move(token);
    return *CoordinationClient::Connect(o);
  }

  // Registers both tasks with the right token: a running cluster.
  void StartCluster() {
    w0_ = Client(kW0, Token(), 1111);
    w1_ = Client(kW1, Token(), 2222);
    std::thread t([&] { EXPECT_TRUE(w1_->Register().ok()); });
    ASSERT_TRUE(w0_->Register().ok());
    t.join();
  }

  // Every status an outsider's call (no proof, or `proof`) got must be a
  // refusal that names nothing secret.
  void ExpectRefused(const grpc::Status& s, const std::string& why) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(why));
    for (const std::string& secret : {std::string(kSecret), std::string(kFingerprint),
                                      std::string("1111"), std::string("2222")}) {
      EXPECT_THAT(s.error_message(), Not(HasSubstr(secret)));
    }
  }

  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<CoordinationService::Stub> stub_;
  std::unique_ptr<CoordinationClient> w0_, w1_;
};

TEST_F(JobTokenRpcTest, OutsiderCallsWithoutProofChangeNothing) {
  CoordinationServiceImpl* service = server_->coordination_service();
  {  // Before start: hijacking a transport address, a wrong fingerprint.
    grpc::ClientContext ctx;
    InsertKeyValueRequest req;
    req.set_key("mwms-transport-address-1");
    req.set_value("127.0.0.1:1");
    InsertKeyValueResponse resp;
    ExpectRefused(stub_->InsertKeyValue(&ctx, req, &resp), "carries no job-token proof");
  }
  {
    grpc::ClientContext ctx;
    RegisterTaskRequest req;
    req.set_task(kW1);
    req.set_incarnation(9);
    req.set_cluster_fingerprint("0000");
    RegisterTaskResponse resp;
    ExpectRefused(stub_->RegisterTask(&ctx, req, &resp), "carries no job-token proof");
  }
  StartCluster();
  {
    grpc::ClientContext ctx;
    ReportErrorRequest req;
    req.set_task(kW1);
    req.set_code(13);
    req.set_message("outsider says stop");
    ReportErrorResponse resp;
    ExpectRefused(stub_->ReportError(&ctx, req, &resp), "ReportError refused");
  }
  {
    grpc::ClientContext ctx;
    HeartbeatRequest req;
    req.set_task(kW1);
    req.set_incarnation(12345);
    HeartbeatResponse resp;
    ExpectRefused(stub_->Heartbeat(&ctx, req, &resp), "Heartbeat refused");
  }
  {
    grpc::ClientContext ctx;
    ShutdownTaskRequest req;
    req.set_task(kW1);
    req.set_timeout_ms(1);
    ShutdownTaskResponse resp;
    ExpectRefused(stub_->ShutdownTask(&ctx, req, &resp), "ShutdownTask refused");
  }
  {
    grpc::ClientContext ctx;
    GetKeyValueRequest req;
    req.set_key("mwms-transport-address-1");
    req.set_timeout_ms(3600000);
    GetKeyValueResponse resp;
    ExpectRefused(stub_->GetKeyValue(&ctx, req, &resp), "GetKeyValue refused");
  }
  {
    grpc::ClientContext ctx;
    WaitForBarrierRequest req;
    req.set_barrier_id("b");
    req.set_task(kW0);
    req.set_timeout_ms(1);
    WaitForBarrierResponse resp;
    ExpectRefused(stub_->WaitForBarrier(&ctx, req, &resp), "WaitForBarrier refused");
  }
  {
    grpc::ClientContext ctx;
    PollForErrorRequest req;
    req.set_task(kW0);
    PollForErrorResponse resp;
    ExpectRefused(stub_->PollForError(&ctx, req, &resp), "PollForError refused");
  }
  // Nothing changed: no error, no key, both tasks still in (their own
  // heartbeats and key-value calls work).
  EXPECT_TRUE(service->cluster_error().ok()) << service->cluster_error();
  EXPECT_EQ(service->GetKeyValue("mwms-transport-address-1", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(w0_->Insert("k", "v").ok());
  EXPECT_EQ(*w1_->Get("k", absl::Seconds(5)), "v");
  EXPECT_TRUE(service->Heartbeat(kW1, 2222).ok());
  EXPECT_TRUE(service->cluster_error().ok());
}

TEST_F(JobTokenRpcTest, ATaskWithAnotherTokenIsRefusedAtRegistration) {
  std::unique_ptr<CoordinationClient> intruder =
      Client(kW1, Token("another-token-0123456789abcdef"), 3333);
  absl::StatusOr<std::vector<std::string>> r = intruder->Register();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("does not match this job's token"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("another-token")));
  std::unique_ptr<CoordinationClient> tokenless = Client(kW1, std::nullopt, 4444);
  r = tokenless->Register();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated) << r.status();
  EXPECT_TRUE(server_->coordination_service()->cluster_error().ok());
}

TEST_F(JobTokenRpcTest, AProofServesOnceForItsOwnMethodAndRequestWithinItsWindow) {
  const JobToken token = Token();
  auto insert = [&](const std::string& key, const std::string& proof) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kRpcProofKey, proof);
    InsertKeyValueRequest req;
    req.set_key(key);
    req.set_value("v");
    InsertKeyValueResponse resp;
    return stub_->InsertKeyValue(&ctx, req, &resp);
  };
  InsertKeyValueRequest k1;
  k1.set_key("k1");
  k1.set_value("v");
  const std::string proof = MakeRpcProof(token, "InsertKeyValue", k1, absl::Now());
  EXPECT_TRUE(insert("k1", proof).ok());
  ExpectRefused(insert("k1", proof), "used before (a replay)");
  // Moved to another request or another method: no longer matches.
  ExpectRefused(insert("k2", MakeRpcProof(token, "InsertKeyValue", k1, absl::Now())),
                "does not match");
  ExpectRefused(insert("k1", MakeRpcProof(token, "GetKeyValue", k1, absl::Now())),
                "does not match");
  // Signed long ago or far ahead (a replay of an old capture, or a forged time).
  ExpectRefused(
      insert("k1", MakeRpcProof(token, "InsertKeyValue", k1, absl::Now() - absl::Minutes(10))),
      "outside the 5m window");
  ExpectRefused(
      insert("k1", MakeRpcProof(token, "InsertKeyValue", k1, absl::Now() + absl::Minutes(10))),
      "outside the 5m window");
  for (const std::string& bad :
       {std::string("v1.1.2.3"), std::string(4096, 'a'), std::string("v2.") + proof.substr(3),
        proof.substr(0, proof.size() - 1) + "G"}) {
    ExpectRefused(insert("k1", bad), "malformed");
  }
}

// Issue 23, defect 3: blocking calls whose callers disconnect hold no
// thread until their timeout.
TEST_F(JobTokenRpcTest, BlockingCallsOfCallersThatLeaveAreReleased) {
  const JobToken token = Token();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> calls;
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* ctx = contexts.back().get();
    calls.emplace_back([this, ctx, &token] {
      GetKeyValueRequest req;
      req.set_key("never-inserted");
      req.set_timeout_ms(3600 * 1000);
      SignRpc(token, "GetKeyValue", req, ctx);
      GetKeyValueResponse resp;
      (void)stub_->GetKeyValue(ctx, req, &resp);
    });
  }
  CoordinationServiceImpl* service = server_->coordination_service();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (service->blocked_calls() < kCalls && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(service->blocked_calls(), kCalls);
  for (auto& ctx : contexts) ctx->TryCancel();
  for (auto& t : calls) t.join();
  const absl::Time released_by = absl::Now() + absl::Seconds(10);
  while (service->blocked_calls() > 0 && absl::Now() < released_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(service->blocked_calls(), 0);
}

int ThreadsOfThisProcess() {
  DIR* d = opendir("/proc/self/task");
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// Issue 23: waiting calls are served without a thread each. 300 gets of a
// key nobody inserted yet, from one client thread (the async stub), leave
// the process's thread count as it was; inserting the key answers them all.
TEST_F(JobTokenRpcTest, WaitingCallsHoldNoThreads) {
  const JobToken token = Token();
  constexpr int kCalls = 300;
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    GetKeyValueResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<GetKeyValueResponse>> reader;
  };
  const int threads_before = ThreadsOfThisProcess();
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::make_unique<Call>());
    Call& c = *calls.back();
    GetKeyValueRequest req;
    req.set_key("later");
    req.set_timeout_ms(600 * 1000);
    SignRpc(token, "GetKeyValue", req, &c.ctx);
    c.reader = stub_->AsyncGetKeyValue(&c.ctx, req, &cq);
    c.reader->Finish(&c.resp, &c.status, &c);
  }
  CoordinationServiceImpl* service = server_->coordination_service();
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (service->blocked_calls() < kCalls && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(service->blocked_calls(), kCalls);
  const int threads_waiting = ThreadsOfThisProcess();
  std::fprintf(stderr, "threads: %d before the calls, %d with %d calls waiting\n", threads_before,
               threads_waiting, kCalls);
  EXPECT_LT(threads_waiting - threads_before, 16);

  auto w0 = Client(kW0, Token(), 1111);
  ASSERT_TRUE(w0->Insert("later", "now").ok());
  for (int i = 0; i < kCalls; ++i) {
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    Call* c = static_cast<Call*>(tag);
    EXPECT_TRUE(c->status.ok()) << c->status.error_message();
    EXPECT_EQ(c->resp.value(), "now");
  }
  cq.Shutdown();
  EXPECT_EQ(service->blocked_calls(), 0);
}

}  // namespace
}  // namespace strata
