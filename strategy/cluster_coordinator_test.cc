// ClusterCoordinator against workers serving functions on loopback (worker
// services in this process; tests/ kills real worker processes).
#include "strategy/cluster_coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/coordination/grpc_server.h"
#include "runtime/rpc/worker_service.h"

namespace strata {
namespace distribute {
namespace {

std::string Task(int i) { return absl::StrCat("/job:worker/replica:0/task:", i); }

// A worker process's serving half: a "step" that sleeps `step_time` and
// returns {its index, the argument + 1}, and a "bad" that fails.
struct FakeWorker {
  int index = 0;
  absl::Duration step_time;
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<WorkerServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
  std::atomic<int> steps{0};

  absl::Status Serve(const std::string& address) {
    if (devices == nullptr) {
      DeviceOptions d;
      d.job = "worker";
      d.task = index;
      STRATA_ASSIGN_OR_RETURN(devices, CreateCpuDeviceMgr(d));
      WorkerServiceOptions o;
      o.task = Task(index);
      o.devices = devices.get();
      STRATA_ASSIGN_OR_RETURN(service, WorkerServiceImpl::Create(o));
      service->RegisterFunction(
          "step", [this](const std::vector<Tensor>& args) -> absl::StatusOr<std::vector<Tensor>> {
            absl::SleepFor(step_time);
            steps.fetch_add(1);
            const int32_t x = args.empty() ? 0 : *args[0].data<int32_t>();
            return std::vector<Tensor>{Tensor::Scalar<int32_t>(index),
                                       Tensor::Scalar<int32_t>(x + 1)};
          });
      service->RegisterFunction(
          "bad", [](const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
            return absl::InvalidArgumentError("the batch is malformed");
          });
    }
    GrpcServerOptions so;
    so.address = address;
    so.services = {service.get()};
    STRATA_ASSIGN_OR_RETURN(server, GrpcServer::Start(so));
    return absl::OkStatus();
  }
};

std::vector<std::unique_ptr<FakeWorker>> StartWorkers(const std::vector<absl::Duration>& times) {
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (size_t i = 0; i < times.size(); ++i) {
    auto w = std::make_unique<FakeWorker>();
    w->index = static_cast<int>(i);
    w->step_time = times[i];
    absl::Status s = w->Serve("127.0.0.1:0");
    EXPECT_TRUE(s.ok()) << s;
    workers.push_back(std::move(w));
  }
  return workers;
}

std::unique_ptr<ClusterCoordinator> Coordinate(
    const std::vector<std::unique_ptr<FakeWorker>>& workers, int max_staleness = -1) {
  ClusterCoordinatorOptions o;
  for (const auto& w : workers) o.workers.push_back({Task(w->index), w->server->address()});
  o.probe_interval = absl::Milliseconds(50);
  o.max_staleness = max_staleness;
  auto c = ClusterCoordinator::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

TEST(ClusterCoordinatorTest, ScheduleReturnsAtOnceAndJoinWaitsForEveryClosure) {
  auto workers = StartWorkers({absl::Milliseconds(5), absl::Milliseconds(5)});
  auto coordinator = Coordinate(workers);
  std::vector<std::shared_ptr<RemoteValue>> values;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 40; ++i)
    values.push_back(coordinator->Schedule("step", {Tensor::Scalar<int32_t>(i)}));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100)) << "Schedule waited for the closures";
  ASSERT_TRUE(coordinator->Join().ok());
  EXPECT_TRUE(coordinator->Done());
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<std::vector<Tensor>> v = values[i]->Fetch();
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*(*v)[1].data<int32_t>(), i + 1);
    EXPECT_EQ(values[i]->worker(), Task(*(*v)[0].data<int32_t>()));
  }
  // Both workers took closures.
  EXPECT_GT(workers[0]->steps.load(), 5);
  EXPECT_GT(workers[1]->steps.load(), 5);
  EXPECT_EQ(workers[0]->steps.load() + workers[1]->steps.load(), 40);
}

TEST(ClusterCoordinatorTest, ALostWorkersClosuresRunElsewhereAndItRejoinsWhenBack) {
  auto workers = StartWorkers({absl::Milliseconds(10), absl::Milliseconds(10)});
  auto coordinator = Coordinate(workers);
  std::vector<std::shared_ptr<RemoteValue>> values;
  for (int i = 0; i < 60; ++i)
    values.push_back(coordinator->Schedule("step", {Tensor::Scalar<int32_t>(i)}));
  while (workers[1]->steps.load() < 3) absl::SleepFor(absl::Milliseconds(1));
  const std::string address = workers[1]->server->address();
  workers[1]->server.reset();  // worker 1 goes away mid-run
  ASSERT_TRUE(coordinator->Join().ok());
  for (int i = 0; i < 60; ++i) {
    absl::StatusOr<std::vector<Tensor>> v = values[i]->Fetch();
    ASSERT_TRUE(v.ok()) << i << ": " << v.status();
    EXPECT_EQ(*(*v)[1].data<int32_t>(), i + 1);
  }
  EXPECT_GE(coordinator->num_rescheduled(), 1);
  EXPECT_EQ(coordinator->num_available_workers(), 1);
  // At least once: every closure ran, some possibly twice.
  EXPECT_GE(workers[0]->steps.load() + workers[1]->steps.load(), 60);
  // Worker 1 comes back at its address and takes closures again.
  ASSERT_TRUE(workers[1]->Serve(address).ok());
  const absl::Time back = absl::Now();
  while (coordinator->num_available_workers() < 2 && absl::Now() - back < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(coordinator->num_available_workers(), 2) << "not re-admitted within 10 s";
  const int before = workers[1]->steps.load();
  for (int i = 0; i < 40; ++i) coordinator->Schedule("step");
  ASSERT_TRUE(coordinator->Join().ok());
  EXPECT_GT(workers[1]->steps.load(), before);
  EXPECT_EQ(coordinator->num_available_workers(), 2);
}

TEST(ClusterCoordinatorTest, AFailingClosureFailsJoinNamingItsWorkerAndCancelsTheQueue) {
  auto workers = StartWorkers({absl::Milliseconds(2)});
  auto coordinator = Coordinate(workers);
  auto bad = coordinator->Schedule("bad");
  std::vector<std::shared_ptr<RemoteValue>> after;
  for (int i = 0; i < 10; ++i) after.push_back(coordinator->Schedule("step"));
  absl::Status s = coordinator->Join();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), Task(0))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the batch is malformed")) << s;
  EXPECT_EQ(bad->Fetch().status().code(), absl::StatusCode::kInvalidArgument);
  for (const auto& v : after) EXPECT_TRUE(v->ready());
  EXPECT_EQ(after.back()->Fetch().status().code(), absl::StatusCode::kCancelled);
  // An unknown function is the function's error too.
  auto unknown = coordinator->Schedule("no_such_function");
  EXPECT_TRUE(absl::StrContains(coordinator->Join().message(), "no function 'no_such_function'"));
  // The coordinator goes on.
  auto good = coordinator->Schedule("step");
  EXPECT_TRUE(coordinator->Join().ok());
  EXPECT_TRUE(good->Fetch().ok());
}

TEST(ClusterCoordinatorTest, AStalenessBoundKeepsAFastWorkerNearTheSlowOne) {
  for (int bound : {-1, 0, 2}) {
    // The slow worker's step is long against a step's RPC overhead, which under TSan is
    // itself some 10-20 ms (15 ms once let the unbounded case come out 19 vs 21).
    auto workers = StartWorkers({absl::Milliseconds(1), absl::Milliseconds(80)});
    auto coordinator = Coordinate(workers, bound);
    for (int i = 0; i < 30; ++i) coordinator->Schedule("step");
    ASSERT_TRUE(coordinator->Join().ok());
    const std::vector<int64_t> f = coordinator->finished_per_worker();
    if (bound < 0) {
      EXPECT_GT(f[0], f[1] + 10) << "unbounded: the fast worker should do most";
    } else {
      EXPECT_LE(f[0] - f[1], bound + 1) << "bound " << bound;
    }
  }
}

TEST(ClusterCoordinatorTest, BadOptionsAreNamed) {
  ClusterCoordinatorOptions o;
  EXPECT_TRUE(absl::StrContains(ClusterCoordinator::Create(o).status().message(), "workers: none"));
  o.workers = {{Task(0), "127.0.0.1:1"}, {Task(0), "127.0.0.1:2"}};
  EXPECT_TRUE(absl::StrContains(ClusterCoordinator::Create(o).status().message(), "named twice"));
  o.workers = {{Task(0), ""}};
  EXPECT_TRUE(absl::StrContains(ClusterCoordinator::Create(o).status().message(), "no address"));
  o.workers = {{Task(0), "127.0.0.1:1"}};
  o.max_staleness = -2;
  EXPECT_TRUE(absl::StrContains(ClusterCoordinator::Create(o).status().message(), "max_staleness"));
}

}  // namespace
}  // namespace distribute
}  // namespace strata
