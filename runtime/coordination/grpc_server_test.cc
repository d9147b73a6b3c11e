#include "runtime/coordination/grpc_server.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/coordination/coordination_client.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

GrpcServerOptions ChiefOptions(const std::string& address) {
  GrpcServerOptions opts;
  opts.address = address;
  opts.host_coordination_service = true;
  opts.coordination.tasks = {"/job:worker/replica:0/task:0"};
  return opts;
}

TEST(GrpcServerTest, BindsTheGivenAddressAndServesTheCoordinationService) {
  auto server = GrpcServer::Start(ChiefOptions("127.0.0.1:0"));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->address(), absl::StrCat("127.0.0.1:", (*server)->port()));
  ASSERT_NE((*server)->coordination_service(), nullptr);

  CoordinationClientOptions opts;
  opts.service_address = (*server)->address();
  opts.task = "/job:worker/replica:0/task:0";
  opts.devices = {"/job:worker/replica:0/task:0/device:CPU:0"};
  auto client = CoordinationClient::Connect(opts);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::vector<std::string>> devices = (*client)->Register();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(*devices, opts.devices);
  EXPECT_TRUE((*client)->Shutdown(absl::Seconds(10)).ok());
}

TEST(GrpcServerTest, PortInUseIsAClearError) {
  auto first = GrpcServer::Start(ChiefOptions("127.0.0.1:0"));
  ASSERT_TRUE(first.ok()) << first.status();
  GrpcServerOptions opts;
  opts.address = (*first)->address();
  ::testing::internal::CaptureStderr();
  auto second = GrpcServer::Start(opts);
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->address()));
  // Issue 23: gRPC's own page of nested causes does not precede Strata's
  // error (it is printed only when GRPC_VERBOSITY is set).
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    EXPECT_EQ(logged, "");
  }
}

TEST(GrpcServerTest, AddressNotOfThisMachineIsAClearError) {
  GrpcServerOptions opts;
  opts.address = "192.0.2.1:2222";  // TEST-NET-1: never a local address
  auto server = GrpcServer::Start(opts);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(), HasSubstr("192.0.2.1:2222"));
}

TEST(GrpcServerTest, BadAddressOrOptionsRefused) {
  for (const char* bad : {"nohost", ":2222", "h:port", "h:70000"}) {
    GrpcServerOptions opts;
    opts.address = bad;
    auto server = GrpcServer::Start(opts);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(server.status().message(), HasSubstr(bad));
  }
  GrpcServerOptions no_tasks = ChiefOptions("127.0.0.1:0");
  no_tasks.coordination.tasks.clear();
  EXPECT_EQ(GrpcServer::Start(no_tasks).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrpcServerTest, WorkerServerHasNoCoordinationService) {
  GrpcServerOptions opts;
  opts.address = "127.0.0.1:0";
  auto server = GrpcServer::Start(opts);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->coordination_service(), nullptr);
  CoordinationClientOptions copts;
  copts.service_address = (*server)->address();
  copts.task = "/job:worker/replica:0/task:0";
  copts.register_timeout = absl::Seconds(5);
  auto client = CoordinationClient::Connect(copts);
  ASSERT_TRUE(client.ok());
  absl::Status st = (*client)->Register().status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("does not host the coordination service"));
}

}  // namespace
}  // namespace strata
