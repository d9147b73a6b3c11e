// A tensor's round trip between two tasks of a session spanning tasks
// (runtime/remote_rendezvous.h): two sessions of this process (tasks 0 and
// 1) joined by a TcpTransport on loopback; the
// step feeds x [n floats] on task 0, copies it on task 1 (Identity) and
// back to task 0 (Identity there, a target: fetching it would send it to
// task 1 once more, as every task gets every fetch). One step is both
// tasks' Session::Run. tools/bench/remote_tensor_peers.py sets it beside
// TensorFlow's gRPC runtime doing the same.
//
//   bazel run -c opt //runtime:remote_rendezvous_bench -- --sizes=4096,1048576 --out=/tmp/r.json
//
// Prints one line per size (median microseconds per round trip) and
// writes them as JSON to --out.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/remote_rendezvous.h"
#include "runtime/session.h"

ABSL_FLAG(std::string, sizes, "4096,65536,1048576,16777216", "tensor sizes in bytes");
ABSL_FLAG(int, iters, 0, "round trips per size (0: about 0.5 s worth)");
ABSL_FLAG(std::string, out, "", "JSON results file");

namespace strata {
namespace {

const std::vector<std::string> kTasks = {"/job:worker/replica:0/task:0",
                                         "/job:worker/replica:0/task:1"};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status Main() {
  InMemoryKeyValueStore kv;
  std::vector<std::unique_ptr<Transport>> steps(2);
  std::vector<absl::Status> st(2);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        TcpTransportOptions o;
        o.host = "127.0.0.1";
        o.key_prefix = "steps";
        auto t = ConnectTcpTransport(r, 2, kv, o);
        st[r] = t.status();
        if (t.ok()) steps[r] = *std::move(t);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (const absl::Status& s : st) STRATA_RETURN_IF_ERROR(s);

  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x").WithDevice(kTasks[0] + "/device:CPU:0"),
                              DT_FLOAT, PartialTensorShape({-1}));
  Output y = ops::Identity(root.WithOpName("y").WithDevice(kTasks[1] + "/device:CPU:0"), x);
  ops::Identity(root.WithOpName("z").WithDevice(kTasks[0] + "/device:CPU:0"), y);
  std::vector<std::unique_ptr<TaskLinks>> links;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int task = 0; task < 2; ++task) {
    STRATA_ASSIGN_OR_RETURN(TaskLinks l, TaskLinks::Create(steps[task].get(), kTasks));
    links.push_back(std::make_unique<TaskLinks>(std::move(l)));
    SessionOptions o;
    o.devices.job = "worker";
    o.devices.task = task;
    o.devices.intra_op_threads_per_device = 1;
    o.inter_op_threads = 1;
    o.remote_devices = {kTasks[1 - task] + "/device:CPU:0"};
    o.task_links = links.back().get();
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Create(root, o));
    sessions.push_back(std::move(s));
  }

  std::string json = "[";
  for (absl::string_view size_text : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(size_text, &bytes) || bytes < 4 || bytes % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--sizes: bad size '", size_text, "'"));
    }
    Tensor value(DT_FLOAT, TensorShape{bytes / 4});
    std::fill_n(value.data<float>(), bytes / 4, 1.5f);
    const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", value}};
    auto step = [&]() -> absl::Status {
      absl::Status other;
      std::thread peer([&] { other = sessions[1]->Run(feeds, {}, {"z"}, nullptr); });
      absl::Status s = sessions[0]->Run(feeds, {}, {"z"}, nullptr);
      peer.join();
      STRATA_RETURN_IF_ERROR(s);
      return other;
    };
    for (int i = 0; i < 3; ++i) STRATA_RETURN_IF_ERROR(step());
    int iters = absl::GetFlag(FLAGS_iters);
    if (iters <= 0) {
      const absl::Time start = absl::Now();
      STRATA_RETURN_IF_ERROR(step());
      const double us = std::max(1.0, absl::ToDoubleMicroseconds(absl::Now() - start));
      iters = std::clamp(static_cast<int>(5e5 / us), 5, 2000);
    }
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      const absl::Time start = absl::Now();
      STRATA_RETURN_IF_ERROR(step());
      times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    const double session_us = Median(times);
    std::printf("%10lld bytes: %9.1f us per round trip (median of %d)\n",
                static_cast<long long>(bytes), session_us, iters);
    std::fflush(stdout);
    absl::StrAppend(&json, json.size() > 1 ? "," : "", "{\"bytes\":", bytes,
                    ",\"strata_us\":", session_us, ",\"iters\":", iters, "}");
  }
  json += "]\n";
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) std::ofstream(out) << json;
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = strata::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "remote_rendezvous_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
