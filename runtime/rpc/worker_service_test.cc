// Partitions run on request over gRPC: a parameter-server task hosting the
// worker service on loopback, client sessions (worker tasks) placing
// variables there.
#include "runtime/rpc/worker_service.h"

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/state_ops.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/rpc/grpc_remote_tasks.h"
#include "runtime/security/rpc_auth.h"
#include "runtime/session.h"

namespace strata {
namespace {

constexpr char kPs[] = "/job:ps/replica:0/task:0";
constexpr char kPsCpu[] = "/job:ps/replica:0/task:0/device:CPU:0";

std::string Worker(int i) { return absl::StrCat("/job:worker/replica:0/task:", i); }
std::string WorkerCpu(int i) { return Worker(i) + "/device:CPU:0"; }

// A ps task: its devices, the worker service and the gRPC server hosting it.
struct PsTask {
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<WorkerServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
};

PsTask StartPs(std::optional<JobToken> token = std::nullopt,
               uint64_t max_tensor_bytes = uint64_t{1} << 30) {
  PsTask ps;
  DeviceOptions d;
  d.job = "ps";
  d.intra_op_threads_per_device = 1;
  ps.devices = *CreateCpuDeviceMgr(d);
  WorkerServiceOptions o;
  o.task = kPs;
  o.devices = ps.devices.get();
  o.job_token = token;
  o.max_tensor_bytes = max_tensor_bytes;
  auto service = WorkerServiceImpl::Create(o);
  EXPECT_TRUE(service.ok()) << service.status();
  ps.service = *std::move(service);
  GrpcServerOptions so;
  so.address = "127.0.0.1:0";
  so.services = {ps.service.get()};
  so.max_message_bytes = kWorkerMaxMessageBytes;
  so.job_token = token;
  auto server = GrpcServer::Start(so);
  EXPECT_TRUE(server.ok()) << server.status();
  ps.server = *std::move(server);
  return ps;
}

std::unique_ptr<GrpcRemoteTasks> Connect(int worker, const std::string& address,
                                         std::optional<JobToken> token = std::nullopt) {
  GrpcRemoteTasksOptions o;
  o.local_task = Worker(worker);
  o.tasks = {{kPs, address, {kPsCpu}}};
  o.job_token = token;
  auto r = GrpcRemoteTasks::Create(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

std::unique_ptr<Session> ClientSession(const Scope& root, int worker, RemoteTasks* remote) {
  SessionOptions o;
  o.devices.job = "worker";
  o.devices.task = worker;
  o.devices.intra_op_threads_per_device = 1;
  o.inter_op_threads = 2;
  o.remote_tasks = remote;
  o.cross_task_step_timeout = absl::Seconds(30);
  auto s = Session::Create(root, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// v (float [n], on the ps): "init" assigns the fed "v0"; "add" adds the fed
// "delta"; "v_read" reads it (after "add" when both run).
void BuildCounter(const Scope& root, int n) {
  Scope ps = root.WithDevice(kPsCpu);
  Output v = ops::VarHandleOp(ps.WithOpName("v"), DT_FLOAT, PartialTensorShape({n}));
  Output v0 = ops::Placeholder(root.WithOpName("v0"), DT_FLOAT, PartialTensorShape({n}));
  ops::AssignVariableOp(ps.WithOpName("init"), v, v0);
  Output delta = ops::Placeholder(root.WithOpName("delta"), DT_FLOAT, PartialTensorShape({n}));
  Node* add = ops::AssignAddVariableOp(ps.WithOpName("add"), v, delta);
  ops::ReadVariableOp(ps.WithOpName("v_read").WithControlDependencies({add}), v, DT_FLOAT);
}

Tensor Filled(int n, float x) { return Tensor::FromVector(std::vector<float>(n, x)); }

TEST(WorkerService, TwoClientsUpdateOneVariableOnThePsAtOnce) {
  PsTask ps = StartPs();
  const int n = 1000;
  Scope root = Scope::NewRootScope();
  BuildCounter(root, n);
  ASSERT_TRUE(root.status().ok()) << root.status();
  std::vector<std::unique_ptr<GrpcRemoteTasks>> remotes;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int w = 0; w < 2; ++w) {
    remotes.push_back(Connect(w, ps.server->address()));
    sessions.push_back(ClientSession(root, w, remotes.back().get()));
  }
  ASSERT_TRUE(sessions[0]->Run({{"v0", Filled(n, 0)}}, {}, {"init"}, nullptr).ok());
  // Each client adds 1 (and reads) 40 times, both at once: every update
  // lands on the one variable.
  const int steps = 40;
  std::vector<absl::Status> failed(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < steps && failed[w].ok(); ++i) {
        std::vector<Tensor> out;
        failed[w] = sessions[w]->Run({{"delta", Filled(n, 1)}}, {"v_read:0"}, {}, &out);
        if (failed[w].ok() &&
            (out[0].data<float>()[0] < i + 1 || out[0].data<float>()[0] > 2 * steps)) {
          failed[w] = absl::InternalError(absl::StrCat("read ", out[0].data<float>()[0]));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(failed[0].ok()) << failed[0];
  EXPECT_TRUE(failed[1].ok()) << failed[1];
  std::vector<Tensor> out;
  ASSERT_TRUE(sessions[1]->Run({{"delta", Filled(n, 0)}}, {"v_read:0"}, {}, &out).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[0].data<float>()[i], 2 * steps) << i;
  // A partition per signature and client (its _Recvs name the client's
  // device), each registered once.
  EXPECT_EQ(ps.service->num_graphs(), 3);
  EXPECT_EQ(ps.service->steps_started(), 1 + 2 * steps + 1);
  // The client's own partition only: the variable never lives here.
  RunOptions ro;
  ro.output_partition_graphs = true;
  RunMetadata md;
  ASSERT_TRUE(sessions[0]->Run(ro, {{"delta", Filled(n, 0)}}, {"v_read:0"}, {}, &out, &md).ok());
  EXPECT_EQ(md.partition_devices, std::vector<std::string>{WorkerCpu(0)});
}

TEST(WorkerService, TensorsCrossBothWaysWithinAStep) {
  PsTask ps = StartPs();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice(kPsCpu);
  Output v = ops::VarHandleOp(on_ps.WithOpName("v"), DT_FLOAT, PartialTensorShape({3}));
  ops::AssignVariableOp(on_ps.WithOpName("init"), v, ops::Const<float>(root, {1, 2, 3}));
  // Read on the ps, doubled on the client, written back on the ps.
  Output read = ops::ReadVariableOp(on_ps.WithOpName("read"), v, DT_FLOAT);
  Output twice =
      ops::Mul(root.WithOpName("twice").WithDevice(WorkerCpu(0)), read, ops::Const(root, 2.0f));
  ops::AssignVariableOp(on_ps.WithOpName("write"), v, twice);
  ASSERT_TRUE(root.status().ok()) << root.status();
  auto remote = Connect(0, ps.server->address());
  auto s = ClientSession(root, 0, remote.get());
  ASSERT_TRUE(s->Run({}, {}, {"init"}, nullptr).ok());
  for (int i = 0; i < 5; ++i) {
    std::vector<Tensor> out;
    absl::Status st = s->Run({}, {"twice:0"}, {"write"}, &out);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(out[0].data<float>()[2], 3 * (2 << i)) << i;
  }
}

TEST(WorkerService, AKernelFailingOnThePsFailsTheStepNamingTheTask) {
  PsTask ps = StartPs();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1}));
  Output bad =
      ops::Reshape(root.WithOpName("bad").WithDevice(kPsCpu), x, ops::Const<int32_t>(root, {2, 2}));
  ops::Identity(root.WithOpName("y"), bad);
  auto remote = Connect(0, ps.server->address());
  auto s = ClientSession(root, 0, remote.get());
  std::vector<Tensor> out;
  absl::Status st = s->Run({{"x", Filled(3, 1)}}, {"y:0"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), absl::StrCat("task ", kPs, ": "))) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "'bad'")) << st;
  // The same signature with a good value still works: the ps survived.
  st = s->Run({{"x", Filled(4, 1)}}, {"y:0"}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
}

TEST(WorkerService, AClientFailingMidStepEndsOnlyItsStepOnThePs) {
  PsTask ps = StartPs();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice(kPsCpu);
  Output v = ops::VarHandleOp(on_ps.WithOpName("v"), DT_FLOAT, PartialTensorShape({4}));
  ops::AssignVariableOp(on_ps.WithOpName("init"), v, ops::Const<float>(root, {1, 2, 3, 4}));
  // The ps reads v and waits for "shaped", which the client fails to make
  // when fed a bad size: the ps's half of the step must end with it.
  Output read = ops::ReadVariableOp(on_ps.WithOpName("read"), v, DT_FLOAT);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1}));
  Output shaped = ops::Reshape(root.WithOpName("shaped").WithDevice(WorkerCpu(0)),
                               ops::Add(root.WithDevice(WorkerCpu(0)), x, read),
                               ops::Const<int32_t>(root, {2, 2}));
  ops::AssignVariableOp(on_ps.WithOpName("write"), v,
                        ops::Reshape(on_ps, shaped, ops::Const<int32_t>(root, {4})));
  ASSERT_TRUE(root.status().ok()) << root.status();
  auto remote = Connect(0, ps.server->address());
  auto s = ClientSession(root, 0, remote.get());
  ASSERT_TRUE(s->Run({}, {}, {"init"}, nullptr).ok());
  const absl::Time start = absl::Now();
  absl::Status st = s->Run({{"x", Filled(4, 1)}}, {}, {"write"}, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  st = s->Run({{"x", Filled(3, 1)}}, {}, {"write"}, nullptr);  // x + read fails: [3] + [4]
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "the step waited for its timeout";
  // Another client's steps on the same ps go on.
  auto remote1 = Connect(1, ps.server->address());
  Scope root1 = Scope::NewRootScope();
  Output v1 =
      ops::VarHandleOp(root1.WithOpName("v").WithDevice(kPsCpu), DT_FLOAT, PartialTensorShape({4}));
  ops::ReadVariableOp(root1.WithOpName("r").WithDevice(kPsCpu), v1, DT_FLOAT);
  auto s1 = ClientSession(root1, 1, remote1.get());
  std::vector<Tensor> out;
  st = s1->Run({}, {"r:0"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].data<float>()[3], 5);  // 4 + 1 from the one good step
}

TEST(WorkerService, AnUnreachablePsFailsTheStepUnavailableNamingIt) {
  PsTask ps = StartPs();
  Scope root = Scope::NewRootScope();
  BuildCounter(root, 4);
  auto remote = Connect(0, ps.server->address());
  auto s = ClientSession(root, 0, remote.get());
  ASSERT_TRUE(s->Run({{"v0", Filled(4, 0)}}, {}, {"init"}, nullptr).ok());
  const std::string address = ps.server->address();
  ps.server.reset();
  absl::Status st = s->Run({{"delta", Filled(4, 1)}}, {"v_read:0"}, {}, nullptr);
  std::vector<Tensor> out;
  st = s->Run({{"delta", Filled(4, 1)}}, {"v_read:0"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), kPs)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), address)) << st;
}

// A raw client of the service: what a peer that is not a Strata session
// could send.
class RawClient {
 public:
  explicit RawClient(const std::string& address)
      : stub_(WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}
  grpc::Status Register(const RegisterGraphRequest& r, uint64_t* handle,
                        const std::optional<JobToken>& token = std::nullopt) {
    grpc::ClientContext ctx;
    if (token.has_value()) SignRpc(*token, "RegisterGraph", r, &ctx);
    RegisterGraphResponse resp;
    grpc::Status s = stub_->RegisterGraph(&ctx, r, &resp);
    *handle = resp.graph_handle();
    return s;
  }
  // Runs `handle` sending `tensors`; the service's last message.
  RunStepResponse Run(uint64_t handle, const std::vector<StepTensor>& tensors) {
    grpc::ClientContext ctx;
    auto stream = stub_->RunStep(&ctx);
    RunStepRequest first;
    first.set_client_task(Worker(0));
    first.add_graph_handles(handle);
    for (const StepTensor& t : tensors) *first.add_tensors() = t;
    stream->Write(first);
    RunStepResponse in, last;
    while (stream->Read(&in)) {
      if (in.done()) {
        last = in;
        stream->WritesDone();
      }
    }
    grpc::Status end = stream->Finish();
    if (!end.ok()) last.set_message("rpc: " + end.error_message());
    return last;
  }

 private:
  std::unique_ptr<WorkerService::Stub> stub_;
};

// A ps partition receiving a float (of a shape it does not know) from
// worker 0's CPU and assigning it to v.
RegisterGraphRequest RecvPartition() {
  Scope root = Scope::NewRootScope().WithDevice(kPsCpu);
  ops::SendRecvAttrs a;
  a.tensor_name = "g:0";
  a.send_device = WorkerCpu(0);
  a.send_device_incarnation = 7;
  a.recv_device = kPsCpu;
  Output g = ops::Recv(root.WithOpName("recv_g"), DT_FLOAT, a);
  Output v = ops::VarHandleOp(root.WithOpName("v"), DT_FLOAT, PartialTensorShape({2}));
  ops::AssignVariableOp(root.WithOpName("set"), v, g);
  ::tensorflow::GraphDef def;
  root.graph()->ToGraphDef(&def);
  RegisterGraphRequest r;
  r.set_client_task(Worker(0));
  r.set_device(kPsCpu);
  def.SerializeToString(r.mutable_graph_def());
  return r;
}

StepTensor GTensor(int32_t dtype, std::vector<int64_t> dims, size_t bytes) {
  StepTensor t;
  t.set_key(Rendezvous::CreateKey(WorkerCpu(0), 7, kPsCpu, "g:0"));
  t.set_dtype(dtype);
  for (int64_t d : dims) t.add_dims(d);
  t.set_data(std::string(bytes, '\0'));
  return t;
}

TEST(WorkerService, RefusesTensorsThatDisagreeWithTheReceiverBeforeAllocating) {
  PsTask ps = StartPs(std::nullopt, /*max_tensor_bytes=*/64);
  RawClient c(ps.server->address());
  uint64_t h = 0;
  ASSERT_TRUE(c.Register(RecvPartition(), &h).ok());
  Device* cpu = ps.devices->devices().front();
  const int64_t allocs = cpu->allocator()->GetStats().num_allocs;
  struct Case {
    StepTensor t;
    std::string says;
  };
  const std::vector<Case> cases = {
      {GTensor(DT_INT32, {2}, 8), "dtype int32 is not the float"},
      {GTensor(DT_FLOAT, {100}, 400), "400 bytes exceed the bound of 64"},
      {GTensor(DT_FLOAT, {2}, 9), "9 bytes for a [2] float"},
      {GTensor(DT_FLOAT, {-2}, 0), "invalid"},
  };
  for (const Case& k : cases) {
    RunStepResponse last = c.Run(h, {k.t});
    EXPECT_EQ(last.code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << last.message();
    EXPECT_TRUE(absl::StrContains(last.message(), "refused")) << last.message();
    EXPECT_TRUE(absl::StrContains(last.message(), k.says)) << last.message();
  }
  // Each step allocated its VarHandleOp's handle, nothing for a refused tensor.
  EXPECT_EQ(cpu->allocator()->GetStats().num_allocs, allocs + static_cast<int64_t>(cases.size()));
  EXPECT_LT(cpu->allocator()->GetStats().largest_alloc_size, 400);
  // The right tensor is taken.
  RunStepResponse last = c.Run(h, {GTensor(DT_FLOAT, {2}, 8)});
  EXPECT_TRUE(last.done() && last.code() == 0) << last.message();
}

TEST(WorkerService, RefusesBadRegistrationsAndUnknownHandles) {
  PsTask ps = StartPs();
  RawClient c(ps.server->address());
  uint64_t h = 0;
  RegisterGraphRequest r = RecvPartition();
  r.set_graph_def("not a graph");
  grpc::Status s = c.Register(r, &h);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), kPs)) << s.error_message();
  r = RecvPartition();
  r.set_device(WorkerCpu(0));
  s = c.Register(r, &h);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "is not one of")) << s.error_message();
  // A partition that fetches.
  Scope root = Scope::NewRootScope().WithDevice(kPsCpu);
  ops::Retval(root.WithOpName("ret"), ops::Const(root, 1.0f), 0);
  ::tensorflow::GraphDef def;
  root.graph()->ToGraphDef(&def);
  r = RecvPartition();
  def.SerializeToString(r.mutable_graph_def());
  s = c.Register(r, &h);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "cannot feed or fetch")) << s.error_message();
  RunStepResponse last = c.Run(12345, {});
  EXPECT_TRUE(absl::StrContains(last.message(), "not registered here")) << last.message();
}

TEST(WorkerService, WithAJobTokenOnlyProvenCallsRun) {
  const JobToken token = JobToken::Generate();
  PsTask ps = StartPs(token);
  RawClient c(ps.server->address());
  uint64_t h = 0;
  grpc::Status s = c.Register(RecvPartition(), &h);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_EQ(ps.service->num_graphs(), 0);
  RunStepResponse last = c.Run(1, {});
  EXPECT_TRUE(absl::StrContains(last.message(), "rpc: ")) << last.message();
  // A session holding the token runs.
  Scope root = Scope::NewRootScope();
  BuildCounter(root, 2);
  auto remote = Connect(0, ps.server->address(), token);
  auto session = ClientSession(root, 0, remote.get());
  absl::Status st = session->Run({{"v0", Filled(2, 3)}}, {}, {"init"}, nullptr);
  EXPECT_TRUE(st.ok()) << st;
}

TEST(WorkerService, BadOptionsAreNamed) {
  GrpcRemoteTasksOptions o;
  o.local_task = Worker(0);
  o.tasks = {{Worker(0), "127.0.0.1:1", {WorkerCpu(0)}}};
  auto r = GrpcRemoteTasks::Create(o);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "this client's own task")) << r.status();
  o.tasks = {{kPs, "127.0.0.1:1", {WorkerCpu(0)}}};
  r = GrpcRemoteTasks::Create(o);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "is not its device")) << r.status();
  o.tasks = {{kPs, "127.0.0.1:1", {kPsCpu}}, {kPs, "127.0.0.1:2", {kPsCpu}}};
  r = GrpcRemoteTasks::Create(o);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "named twice")) << r.status();
  o.tasks = {{kPs, "127.0.0.1:1", {kPsCpu}}};
  auto remote = *GrpcRemoteTasks::Create(o);
  // The session's own devices must be the client task's.
  SessionOptions so;
  so.devices.job = "worker";
  so.devices.task = 3;
  so.remote_tasks = remote.get();
  auto s = Session::Create(Scope::NewRootScope(), so);
  EXPECT_TRUE(
      absl::StrContains(s.status().message(), "this process is /job:worker/replica:0/task:0"))
      << s.status();
  so.devices.task = 0;
  so.remote_devices = {kPsCpu};
  s = Session::Create(Scope::NewRootScope(), so);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "cannot be combined")) << s.status();
  WorkerServiceOptions wo;
  wo.task = "/job:ps/task:0";
  DeviceOptions d;
  d.job = "ps";
  auto devices = *CreateCpuDeviceMgr(d);
  wo.devices = devices.get();
  EXPECT_TRUE(absl::StrContains(WorkerServiceImpl::Create(wo).status().message(), "is not a task"));
  wo.task = "/job:ps/replica:0/task:1";
  EXPECT_TRUE(absl::StrContains(WorkerServiceImpl::Create(wo).status().message(),
                                "is not a device of /job:ps/replica:0/task:1"));
}

}  // namespace
}  // namespace strata
