// The coordination service over mutual TLS: tasks holding a certificate of
// the job's CA (and the job token) register and use the store; a client
// with no TLS, with a certificate of another CA, or reaching the service at
// a host its certificate does not name gets nowhere.
#include <grpcpp/create_channel.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordination.grpc.pb.h"
#include "runtime/coordination/coordination_client.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/job_token.h"
#include "runtime/security/test_certs.h"
#include "runtime/security/tls.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

const char kW0[] = "/job:worker/replica:0/task:0";
const char kW1[] = "/job:worker/replica:0/task:1";
const char kFingerprint[] = "f1f2f3f4f5f6f7f8";

JobToken Token() { return *JobToken::FromSecret("the-job-token-of-this-test-0123456789"); }

class TlsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = io::MakeTempDir("tls_rpc_test");
    ASSERT_TRUE(dir.ok());
    auto ca = MakeTestCa(*dir, "job");
    ASSERT_TRUE(ca.ok()) << ca.status();
    auto other = MakeTestCa(*dir, "other");
    ASSERT_TRUE(other.ok()) << other.status();
    tls_ = Load(MakeTestCert(*ca, "server", "DNS:localhost,IP:127.0.0.1"));
    worker_tls_ = Load(MakeTestCert(*ca, "worker", "DNS:localhost,IP:127.0.0.1"));
    foreign_tls_ = Load(MakeTestCert(*other, "foreign", "DNS:localhost,IP:127.0.0.1"));
    localhost_only_ = Load(MakeTestCert(*ca, "named", "DNS:localhost"));

    GrpcServerOptions opts;
    opts.address = "127.0.0.1:0";
    opts.host_coordination_service = true;
    opts.coordination.tasks = {kW0, kW1};
    opts.coordination.cluster_fingerprint = kFingerprint;
    opts.job_token = Token();
    opts.tls = tls_;
    auto server = GrpcServer::Start(std::move(opts));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  static TlsConfig Load(const absl::StatusOr<TlsFiles>& files) {
    EXPECT_TRUE(files.ok()) << files.status();
    auto c = LoadTlsConfig(*files);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  std::unique_ptr<CoordinationClient> Client(const std::string& task, std::optional<TlsConfig> tls,
                                             const std::string& address = "",
                                             absl::Duration timeout = absl::Seconds(20)) {
    CoordinationClientOptions o;
    o.service_address = address.empty() ? server_->address() : address;
    o.task = task;
    o.devices = {absl::StrCat(task, "/device:CPU:0")};
    o.cluster_fingerprint = kFingerprint;
    o.register_timeout = timeout;
    o.job_token = Token();
    o.tls = std::move(tls);
    return *CoordinationClient::Connect(o);
  }

  // A raw call to the store over `creds`: its gRPC status.
  grpc::Status RawInsert(const std::shared_ptr<grpc::ChannelCredentials>& creds) {
    auto stub = CoordinationService::NewStub(grpc::CreateChannel(server_->address(), creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    InsertKeyValueRequest req;
    req.set_key("outsider");
    req.set_value("x");
    InsertKeyValueResponse resp;
    return stub->InsertKeyValue(&ctx, req, &resp);
  }

  TlsConfig tls_, worker_tls_, foreign_tls_, localhost_only_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(TlsRpcTest, TasksOfTheJobsCaRegisterAndShareTheStore) {
  auto w0 = Client(kW0, tls_);
  auto w1 = Client(kW1, worker_tls_);
  std::thread t([&] { EXPECT_TRUE(w1->Register().ok()); });
  auto devices = w0->Register();
  t.join();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->size(), 2u);
  ASSERT_TRUE(w1->Insert("k", "v").ok());
  auto got = w0->Get("k", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
}

TEST_F(TlsRpcTest, ClientsWithoutAJobCertificateGetNowhere) {
  // Plaintext to a TLS port: the connection never comes up.
  grpc::Status plain = RawInsert(grpc::InsecureChannelCredentials());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  // A certificate of another CA: the server refuses it.
  grpc::Status foreign = RawInsert(ChannelCredentialsFor(foreign_tls_));
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAVAILABLE) << foreign.error_message();
  // TLS without a client certificate (the CA alone): refused too.
  grpc::SslCredentialsOptions anonymous;
  anonymous.pem_root_certs = tls_.ca_pem;
  grpc::Status anon = RawInsert(grpc::SslCredentials(anonymous));
  EXPECT_EQ(anon.error_code(), grpc::StatusCode::UNAVAILABLE) << anon.error_message();
  // The job's certificate does get through (then the token is checked: the
  // raw call carries none).
  grpc::Status own = RawInsert(ChannelCredentialsFor(worker_tls_));
  EXPECT_EQ(own.error_code(), grpc::StatusCode::UNAUTHENTICATED) << own.error_message();

  // A task with a foreign certificate cannot register; the timeout's error
  // says why the chief was unreachable.
  auto w1 = Client(kW1, foreign_tls_, "", absl::Seconds(2));
  absl::Status s = w1->Register().status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(server_->address()));
  EXPECT_THAT(s.message(), HasSubstr("andshake failed"));
  EXPECT_FALSE(w1->Insert("k", "v").ok());
}

TEST_F(TlsRpcTest, TheServersCertificateMustNameTheHostDialled) {
  // `named` is for localhost only: served on 127.0.0.1 and dialled by
  // address, the client refuses it.
  GrpcServerOptions opts;
  opts.address = "127.0.0.1:0";
  opts.host_coordination_service = true;
  opts.coordination.tasks = {kW0};
  opts.coordination.cluster_fingerprint = kFingerprint;
  opts.job_token = Token();
  opts.tls = localhost_only_;
  auto server = GrpcServer::Start(std::move(opts));
  ASSERT_TRUE(server.ok()) << server.status();
  auto by_ip = Client(kW0, worker_tls_, (*server)->address(), absl::Seconds(2));
  EXPECT_FALSE(by_ip->Register().ok());
  auto by_name = Client(kW0, worker_tls_, absl::StrCat("localhost:", (*server)->port()));
  auto devices = by_name->Register();
  EXPECT_TRUE(devices.ok()) << devices.status();
}

}  // namespace
}  // namespace strata
