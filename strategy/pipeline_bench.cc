// The pipeline's bubble, measured (issue 25's target P1): each stage's idle
// fraction of a traced step against the schedule's theoretical bubble
// (S-1)/(M+S-1), for GPipe and 1F1B, on a model of equal stages: an MLP of
// `layers_per_stage` Dense layers of `width` units per stage (ReLU), the
// last stage ending in a Dense of 10 logits. A stage's busy time is the
// union of its device's kernels (asynchronous ones, _Recv waiting for the
// previous stage, excluded); its idle fraction is 1 - busy / the step's
// span, the median over the traced steps. Each stage's device has one
// intra-op thread.
//
//   bazel run -c opt //strategy:pipeline_bench -- --stages=2 --micro_batches=4,8 --out=/tmp/p.json
//
// Prints one line per configuration and writes them as JSON to --out.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "strategy/pipeline.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/variable.h"

ABSL_FLAG(int, stages, 2, "pipeline stages (one CPU device each)");
ABSL_FLAG(std::string, micro_batches, "4,8", "micro-batch counts, comma-separated");
ABSL_FLAG(int, micro_batch_size, 64, "examples per micro-batch");
ABSL_FLAG(int, width, 512, "units of every Dense layer but the logits");
ABSL_FLAG(int, layers_per_stage, 2, "Dense layers per stage");
ABSL_FLAG(int, steps, 10, "traced steps per configuration (after 3 untraced)");
ABSL_FLAG(std::string, out, "", "JSON results file");
ABSL_FLAG(
    std::string, trace_out, "",
    "Chrome trace of each configuration's last step (the stages' items named), to this path with "
    "\"_<schedule>_m<M>\" before the extension");
ABSL_FLAG(bool, timeline, false,
          "print each stage's kernels of 0.1 ms or more of the last traced step");

namespace strata {
namespace {

struct Result {
  std::string schedule;
  int micro_batches = 0;
  double theory = 0;
  std::vector<double> idle;  // per stage, the median over the steps
  double step_ms = 0;
};

absl::StatusOr<Result> Measure(distribute::PipelineSchedule schedule, int stages, int m) {
  const int width = absl::GetFlag(FLAGS_width);
  const int per = absl::GetFlag(FLAGS_layers_per_stage);
  const int batch = m * absl::GetFlag(FLAGS_micro_batch_size);
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({batch, width}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({batch}));
  train::Sequential model(/*seed=*/1);
  for (int i = 0; i < stages * per; ++i) model.Add<train::Dense>(width, train::Activation::kRelu);
  model.Add<train::Dense>(10);
  distribute::PipelineOptions o;
  std::vector<std::string> devices;
  for (int s = 0; s < stages; ++s) {
    devices.push_back(absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", s));
    o.stage_starts.push_back(s * per);
  }
  o.stage_devices = devices;
  o.micro_batches = m;
  o.schedule = schedule;
  train::SGD sgd(0.01);
  STRATA_ASSIGN_OR_RETURN(distribute::PipelineStep step,
                          distribute::BuildPipelineTrainStep(
                              root, &model, x, y,
                              [](const Scope& s, Output labels, Output logits) {
                                return train::SparseSoftmaxCrossEntropy(s, labels, logits);
                              },
                              &sgd, o));
  Node* init = train::GlobalVariablesInitializer(root);
  SessionOptions so;
  so.devices.num_cpu_devices = stages;
  so.devices.intra_op_threads_per_device = 1;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, so));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  Tensor xs(DT_FLOAT, TensorShape{batch, width});
  Tensor ys(DT_INT32, TensorShape{batch});
  for (int i = 0; i < batch; ++i) {
    ys.data<int32_t>()[i] = i % 10;
    for (int f = 0; f < width; ++f) xs.data<float>()[i * width + f] = 0.001f * ((i * 7 + f) % 31);
  }
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", xs}, {"y", ys}};
  for (int i = 0; i < 3; ++i)
    STRATA_RETURN_IF_ERROR(session->Run(feeds, {}, {step.train_op->name()}, nullptr));
  Result r;
  r.schedule = schedule == distribute::PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
  r.micro_batches = m;
  r.theory = static_cast<double>(stages - 1) / (m + stages - 1);
  r.idle.assign(stages, 0);
  const int steps = absl::GetFlag(FLAGS_steps);
  std::vector<std::vector<double>> idle(stages);  // per stage, per step
  for (int i = 0; i < steps; ++i) {
    StepTracer tracer;
    RunOptions ro;
    ro.tracer = &tracer;
    STRATA_RETURN_IF_ERROR(session->Run(ro, feeds, {}, {step.train_op->name()}, nullptr, nullptr));
    const std::vector<TraceEvent> events = tracer.events();
    int64_t begin = INT64_MAX, end = 0;
    for (const TraceEvent& e : events) {
      begin = std::min(begin, e.start_ns);
      end = std::max(end, e.end_ns);
    }
    r.step_ms += (end - begin) / 1e6 / steps;
    if (const std::string path = absl::GetFlag(FLAGS_trace_out); !path.empty() && i + 1 == steps) {
      distribute::RecordPipelineItems(step, &tracer);
      const size_t dot = path.rfind('.');
      const std::string tag = absl::StrCat("_", r.schedule, "_m", m);
      STRATA_RETURN_IF_ERROR(tracer.WriteChromeTrace(
          dot == std::string::npos ? path + tag
                                   : absl::StrCat(path.substr(0, dot), tag, path.substr(dot))));
    }
    for (int s = 0; s < stages; ++s) {
      std::vector<std::pair<int64_t, int64_t>> spans;
      for (const TraceEvent& e : events) {
        if (e.device == devices[s] && !e.async) spans.push_back({e.start_ns, e.end_ns});
      }
      std::sort(spans.begin(), spans.end());
      int64_t busy = 0, reach = begin;
      for (const auto& [a, b] : spans) {
        if (b > reach) {
          busy += b - std::max(a, reach);
          reach = b;
        }
      }
      idle[s].push_back(1.0 - static_cast<double>(busy) / (end - begin));
      if (absl::GetFlag(FLAGS_timeline) && i + 1 == steps) {
        std::printf("%s M=%d stage %d:\n", r.schedule.c_str(), m, s);
        for (const TraceEvent& e : events) {
          if (e.device == devices[s] && e.end_ns - e.start_ns >= 100000) {
            std::printf("  %7.2f-%7.2f ms %s%s\n", (e.start_ns - begin) / 1e6,
                        (e.end_ns - begin) / 1e6, e.name.c_str(), e.async ? " (async)" : "");
          }
        }
      }
    }
  }
  // The median: a step that the machine interrupted (2 cores shared by
  // the stages, the executor and the OS) does not move it.
  for (int s = 0; s < stages; ++s) {
    std::sort(idle[s].begin(), idle[s].end());
    const size_t n = idle[s].size();
    r.idle[s] = n % 2 == 1 ? idle[s][n / 2] : (idle[s][n / 2 - 1] + idle[s][n / 2]) / 2;
  }
  return r;
}

int Main() {
  const int stages = absl::GetFlag(FLAGS_stages);
  std::vector<std::string> json;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_micro_batches), ',')) {
    int m = 0;
    if (!absl::SimpleAtoi(text, &m) || m < 1) {
      std::fprintf(stderr, "pipeline_bench: bad --micro_batches entry '%s'\n",
                   std::string(text).c_str());
      return 2;
    }
    for (auto schedule : {distribute::PipelineSchedule::kGPipe,
                          distribute::PipelineSchedule::kOneForwardOneBackward}) {
      absl::StatusOr<Result> r = Measure(schedule, stages, m);
      if (!r.ok()) {
        std::fprintf(stderr, "pipeline_bench: %s\n", r.status().ToString().c_str());
        return 1;
      }
      std::vector<std::string> idle;
      for (double v : r->idle) idle.push_back(absl::StrCat(v));
      std::printf("%-5s S=%d M=%2d: step %.1f ms, idle per stage %s, theoretical bubble %.3f\n",
                  r->schedule.c_str(), stages, m, r->step_ms, absl::StrJoin(idle, " ").c_str(),
                  r->theory);
      json.push_back(absl::StrCat("{\"schedule\":\"", r->schedule, "\",\"stages\":", stages,
                                  ",\"micro_batches\":", m, ",\"theory\":", r->theory,
                                  ",\"idle\":[", absl::StrJoin(idle, ","),
                                  "],\"step_ms\":", r->step_ms, "}"));
    }
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\"width\":" << absl::GetFlag(FLAGS_width)
      << ",\"layers_per_stage\":" << absl::GetFlag(FLAGS_layers_per_stage)
      << ",\"micro_batch_size\":" << absl::GetFlag(FLAGS_micro_batch_size) << ",\"results\":["
      << absl::StrJoin(json, ",") << "]}\n";
  }
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return strata::Main();
}
