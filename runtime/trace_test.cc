// StepTracer through Session::Run: every kernel of a traced step on every
// device, collectives from start to done, nothing for untraced steps, and
// the Chrome trace's tracks and rows.
#include "runtime/trace.h"

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace {

constexpr int kDevices = 2;

struct TwoReplicas {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> fetches;
};

// Replica r: Const -> Identity -> CollectiveReduce (sum) on CPU:r.
void Build(TwoReplicas* g) {
  for (int r = 0; r < kDevices; ++r) {
    Scope d = g->root.WithDevice(absl::StrCat("/device:CPU:", r));
    Output x = ops::Const<float>(d.WithOpName(absl::StrCat("x", r)), {float(r), 1});
    Output v = ops::Identity(d.WithOpName(absl::StrCat("v", r)), x);
    g->fetches.push_back(
        ops::CollectiveReduce(d.WithOpName(absl::StrCat("sum", r)), v, kDevices, 1, 1).name());
  }
}

std::unique_ptr<Session> MakeSession(const Scope& root) {
  SessionOptions opts;
  opts.devices.num_cpu_devices = kDevices;
  auto s = Session::Create(root, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(StepTracerTest, RecordsEveryKernelOfTracedStepsOnEveryDevice) {
  TwoReplicas g;
  Build(&g);
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  std::unique_ptr<Session> session = MakeSession(g.root);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, g.fetches, {}, &out).ok());  // untraced warm-up

  StepTracer tracer;
  RunOptions ro;
  ro.tracer = &tracer;
  const int64_t before = StepTracer::NowNanos();
  ASSERT_TRUE(session->Run(ro, {}, g.fetches, {}, &out, nullptr).ok());
  const int64_t after = StepTracer::NowNanos();
  EXPECT_EQ(out[1].data<float>()[0], 1.0f);  // 0 + 1: tracing changes no result

  std::map<std::string, TraceEvent> by_node;
  for (const TraceEvent& e : tracer.events()) {
    EXPECT_LE(before, e.start_ns) << e.name;
    EXPECT_LE(e.start_ns, e.end_ns) << e.name;
    EXPECT_LE(e.end_ns, after) << e.name;
    by_node[e.name] = e;
  }
  for (int r = 0; r < kDevices; ++r) {
    const std::string device = absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", r);
    for (const std::string node : {"x", "v", "sum"}) {
      const std::string name = absl::StrCat(node, r);
      ASSERT_EQ(by_node.count(name), 1u) << name;
      EXPECT_EQ(by_node[name].device, device) << name;
    }
    EXPECT_EQ(by_node[absl::StrCat("v", r)].op, "Identity");
    EXPECT_FALSE(by_node[absl::StrCat("v", r)].async);
    EXPECT_EQ(by_node[absl::StrCat("sum", r)].op, "CollectiveReduceV2");
    EXPECT_TRUE(by_node[absl::StrCat("sum", r)].async);
    // The collective starts after its input is computed.
    EXPECT_GE(by_node[absl::StrCat("sum", r)].start_ns, by_node[absl::StrCat("v", r)].end_ns);
  }
  // Both replicas' all-reduce end once both arrived: each ends after the
  // other started.
  EXPECT_GE(by_node["sum0"].end_ns, by_node["sum1"].start_ns);
  EXPECT_GE(by_node["sum1"].end_ns, by_node["sum0"].start_ns);

  // A step without the tracer adds nothing.
  const size_t n = tracer.num_events();
  ASSERT_TRUE(session->Run({}, g.fetches, {}, &out).ok());
  EXPECT_EQ(tracer.num_events(), n);
}

TEST(StepTracerTest, ChromeTraceHasATrackPerDeviceAndOneForCollectives) {
  TwoReplicas g;
  Build(&g);
  std::unique_ptr<Session> session = MakeSession(g.root);
  ASSERT_NE(session, nullptr);
  StepTracer tracer;
  RunOptions ro;
  ro.tracer = &tracer;
  std::vector<Tensor> out;
  const int64_t t0 = StepTracer::NowNanos();
  ASSERT_TRUE(session->Run(ro, {}, g.fetches, {}, &out, nullptr).ok());
  tracer.RecordSpan("step 1", t0, StepTracer::NowNanos());
  const std::string json = tracer.ToChromeTraceJson();
  EXPECT_TRUE(absl::StartsWith(json, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[")) << json;
  // pid 0 steps, 1 and 2 the devices in order, 3 the collectives.
  EXPECT_TRUE(absl::StrContains(json, "\"pid\":0,\"tid\":0,\"args\":{\"name\":\"steps\"}"));
  EXPECT_TRUE(absl::StrContains(
      json, "\"pid\":1,\"tid\":0,\"args\":{\"name\":\"/job:localhost/replica:0/task:0/device:CPU:0\"}"));
  EXPECT_TRUE(absl::StrContains(
      json, "\"pid\":2,\"tid\":0,\"args\":{\"name\":\"/job:localhost/replica:0/task:0/device:CPU:1\"}"));
  EXPECT_TRUE(absl::StrContains(json, "\"pid\":3,\"tid\":0,\"args\":{\"name\":\"collectives\"}"));
  EXPECT_TRUE(absl::StrContains(json, "{\"name\":\"step 1\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":"));
  EXPECT_TRUE(absl::StrContains(json, "{\"name\":\"v1\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":"));
  EXPECT_TRUE(absl::StrContains(json, "{\"name\":\"sum0\",\"cat\":\"collective\",\"ph\":\"X\""));
  // The two all-reduces overlap in time, so they take two rows.
  EXPECT_TRUE(absl::StrContains(json, "\"pid\":3,\"tid\":1,\"args\":{\"name\":\"in flight 2\"}"))
      << json;
  // ts 0 on the steady clock, to line up several processes' traces.
  const std::string origin = "],\"otherData\":{\"steady_clock_origin_ns\":";
  const size_t at = json.rfind(origin);
  ASSERT_NE(at, std::string::npos) << json;
  const int64_t origin_ns = std::atoll(json.c_str() + at + origin.size());
  EXPECT_GE(origin_ns, t0);
  EXPECT_LE(origin_ns, StepTracer::NowNanos());
  EXPECT_TRUE(absl::EndsWith(json, "}}\n"));
}

TEST(StepTracerTest, RowsNeverOverlapAndNamesAreEscaped) {
  StepTracer t;
  const std::string dev = "/job:localhost/replica:0/task:0/device:CPU:10";
  const std::string dev2 = "/job:localhost/replica:0/task:0/device:CPU:2";
  t.Record("a", "MatMul", dev, 1000, 5000, false);
  t.Record("b\"q\\", "MatMul", dev, 2000, 3000, false);  // inside a: second row
  t.Record("c", "MatMul", dev, 5000, 6000, false);       // after a: first row again
  t.Record("d", "Add", dev2, 0, 10, false);
  const std::string json = t.ToChromeTraceJson();
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"b\\\"q\\\\\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"a\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":1.000,\"dur\":4.000,\"pid\":2,\"tid\":0")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"ts\":2.000,\"dur\":1.000,\"pid\":2,\"tid\":1")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"c\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":5.000,\"dur\":1.000,\"pid\":2,\"tid\":0")) << json;
  // CPU:2 sorts before CPU:10.
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"d\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":0.000,\"dur\":0.010,\"pid\":1,\"tid\":0")) << json;
  EXPECT_FALSE(t.WriteChromeTrace("/no/such/dir/trace.json").ok());
}

}  // namespace
}  // namespace strata
