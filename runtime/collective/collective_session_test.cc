// Collective ops in Session::Run: one op per virtual CPU device, the way a
// MirroredStrategy graph uses them.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/cancellation.h"
#include "runtime/session.h"

namespace strata {
namespace {

std::unique_ptr<Session> MakeSession(const Scope& root, int devices,
                                     absl::Duration timeout = absl::Seconds(60)) {
  SessionOptions opts;
  opts.devices.num_cpu_devices = devices;
  opts.collective_timeout = timeout;
  auto s = Session::Create(root, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(CollectiveSessionTest, FourReplicasAllReduceStepAfterStep) {
  constexpr int n = 4;
  Scope root = Scope::NewRootScope();
  std::vector<std::string> sums, means;
  for (int r = 0; r < n; ++r) {
    Scope d = root.WithDevice(absl::StrCat("/device:CPU:", r));
    // Replica r holds [r, 1, r].
    Output x = ops::Const<float>(d, {float(r), 1, float(r)});
    Output v = ops::Identity(d, x);
    sums.push_back(ops::CollectiveReduce(d.WithOpName(absl::StrCat("sum", r)), v, n, 1, 1).name());
    means.push_back(ops::CollectiveReduce(d.WithOpName(absl::StrCat("mean", r)), v, n, 1, 2,
                                          ops::CollectiveAttrs().FinalOp("Div"))
                        .name());
  }
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root, n);
  ASSERT_NE(session, nullptr);
  std::vector<std::string> fetches = sums;
  fetches.insert(fetches.end(), means.begin(), means.end());
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, fetches, {}, &out).ok()) << "step " << iter;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::vector<float>(out[r].data<float>(), out[r].data<float>() + 3),
                std::vector<float>({6, 4, 6}))
          << "replica " << r;
      ASSERT_EQ(std::vector<float>(out[n + r].data<float>(), out[n + r].data<float>() + 3),
                std::vector<float>({1.5f, 1, 1.5f}));
    }
  }
  EXPECT_EQ(session->num_plans_built(), 1);
}

TEST(CollectiveSessionTest, GatherAndBroadcastAcrossDevices) {
  constexpr int n = 3;
  Scope root = Scope::NewRootScope();
  std::vector<std::string> fetches;
  for (int r = 0; r < n; ++r) {
    Scope d = root.WithDevice(absl::StrCat("/device:CPU:", r));
    Output x = ops::Const<int64_t>(d, {r, 10 + r}, TensorShape{1, 2});
    fetches.push_back(ops::CollectiveGather(d, x, n, 2, 1).name());
    Output b = r == 1 ? ops::CollectiveBcastSend(d, ops::Const<float>(d, {3, 1, 4}), n, 2, 2)
                      : ops::CollectiveBcastRecv(d, DT_FLOAT, TensorShape{3}, n, 2, 2);
    fetches.push_back(b.name());
  }
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root, n);
  ASSERT_NE(session, nullptr);
  for (int iter = 0; iter < 10; ++iter) {
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, fetches, {}, &out).ok());
    for (int r = 0; r < n; ++r) {
      const Tensor& g = out[2 * r];
      ASSERT_EQ(g.shape(), TensorShape({3, 2}));
      EXPECT_EQ(std::vector<int64_t>(g.data<int64_t>(), g.data<int64_t>() + 6),
                std::vector<int64_t>({0, 10, 1, 11, 2, 12}));
      const Tensor& b = out[2 * r + 1];
      EXPECT_EQ(std::vector<float>(b.data<float>(), b.data<float>() + 3), std::vector<float>({3, 1, 4}));
    }
  }
}

TEST(CollectiveSessionTest, MissingReplicaTimesOutNamingIt) {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> fetches;
  for (int r = 0; r < 2; ++r) {  // group_size 3, only 2 ops
    Scope d = root.WithDevice(absl::StrCat("/device:CPU:", r));
    fetches.push_back(ops::CollectiveReduce(d, ops::Const<float>(d, {1}), 3, 7, 1,
                                            ops::CollectiveAttrs().TimeoutSeconds(0.2f))
                          .name());
  }
  auto session = MakeSession(root, 3);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, fetches, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("1 of 3 participants never arrived"), std::string::npos) << s;
  EXPECT_NE(s.message().find("CollectiveReduceV2"), std::string::npos) << s;  // the node
}

TEST(CollectiveSessionTest, SessionDefaultTimeoutApplies) {
  Scope root = Scope::NewRootScope();
  Output y = ops::CollectiveReduce(root.WithDevice("/device:CPU:0"), ops::Const<float>(root, {1}), 2, 1, 1);
  auto session = MakeSession(root, 2, absl::Milliseconds(200));
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  EXPECT_EQ(session->Run({}, {y.name()}, {}, &out).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(CollectiveSessionTest, CancellingTheRunAbortsWaitingCollectives) {
  Scope root = Scope::NewRootScope();
  Output y = ops::CollectiveReduce(root.WithDevice("/device:CPU:0"), ops::Const<float>(root, {1}), 2, 1, 1);
  auto session = MakeSession(root, 2);
  ASSERT_NE(session, nullptr);
  CancellationManager cm;
  RunOptions ro;
  ro.cancellation = &cm;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cm.StartCancel(absl::CancelledError("user pressed ^C"));
  });
  std::vector<Tensor> out;
  absl::Status s = session->Run(ro, {}, {y.name()}, {}, &out, nullptr);
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
}

TEST(CollectiveSessionTest, ZeroTimeoutIsRejected) {
  Scope root = Scope::NewRootScope();
  ops::Const(root, 1.0f);
  SessionOptions opts;
  opts.collective_timeout = absl::ZeroDuration();
  EXPECT_EQ(Session::Create(root, opts).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
