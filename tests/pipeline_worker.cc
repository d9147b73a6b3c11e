// A pipeline trained across the workers of a cluster, for
// multi_worker_pipeline_test: an MLP 12-16-16-16-5 in 4 stages, 2 on each
// of 2 virtual CPU devices of every worker (TF_CONFIG, MultiWorkerMirrored-
// Strategy with steps_span_workers: each worker runs its own stages), or
// without TF_CONFIG all 4 stages on 4 virtual CPU devices of this process. Plain SGD on synthetic
// data that depends only on the step.
//
//   pipeline_worker --steps=100 --micro_batches=4 --schedule=1f1b
//       --weights_out=FILE [--step_sleep_ms=N] [--transport=auto|shm|tcp]
//
// Prints "step N loss L" per step; the first worker (or the one process)
// writes every weight to FILE, one "name value..." line each, at 9
// significant digits. On an error it prints it and exits 1.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "runtime/session.h"
#include "strategy/cluster_resolver.h"
#include "strategy/multi_worker_mirrored_strategy.h"
#include "strategy/pipeline.h"
#include "train/initializers.h"
#include "train/losses.h"
#include "train/models.h"
#include "train/optimizers.h"
#include "train/variable.h"

namespace strata {
namespace {

constexpr int kBatch = 16, kFeatures = 12, kClasses = 5;

struct Flags {
  int steps = 100;
  int micro_batches = 4;
  std::string schedule = "1f1b";
  std::string weights_out;
  int step_sleep_ms = 0;
  std::string transport = "auto";
};

absl::Status ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string k = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool ok = true;
    if (k == "--steps") {
      ok = absl::SimpleAtoi(v, &f->steps);
    } else if (k == "--micro_batches") {
      ok = absl::SimpleAtoi(v, &f->micro_batches);
    } else if (k == "--schedule") {
      f->schedule = v;
      ok = v == "gpipe" || v == "1f1b";
    } else if (k == "--weights_out") {
      f->weights_out = v;
    } else if (k == "--transport") {
      f->transport = v;
    } else if (k == "--step_sleep_ms") {
      ok = absl::SimpleAtoi(v, &f->step_sleep_ms);
    } else {
      ok = false;
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad flag '", a, "'"));
  }
  return absl::OkStatus();
}

void MakeBatch(int step, Tensor* x, Tensor* y) {
  *x = Tensor(DT_FLOAT, TensorShape{kBatch, kFeatures});
  *y = Tensor(DT_INT32, TensorShape{kBatch});
  for (int i = 0; i < kBatch; ++i) {
    const int label = (i * 7 + step) % kClasses;
    y->data<int32_t>()[i] = label;
    for (int f = 0; f < kFeatures; ++f) {
      x->data<float>()[i * kFeatures + f] =
          0.1f * std::sin(0.7f * (i + 3 * step) + 1.3f * f) + (f % kClasses == label ? 0.5f : 0.f);
    }
  }
}

absl::Status WriteWeights(const std::string& path, const std::vector<std::string>& names,
                          const std::vector<Tensor>& values) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&text, names[i]);
    for (int64_t k = 0; k < values[i].NumElements(); ++k) {
      absl::StrAppendFormat(&text, " %.9g", values[i].data<float>()[k]);
    }
    text += "\n";
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return absl::OkStatus();
}

absl::Status Train(const Flags& flags) {
  // The stages' devices: every worker's two CPUs, or this process's.
  std::unique_ptr<distribute::MultiWorkerMirroredStrategy> strategy;
  std::vector<std::string> tasks = {"/job:localhost/replica:0/task:0"};
  SessionOptions options;
  options.devices.num_cpu_devices = 4;
  options.devices.intra_op_threads_per_device = 1;
  bool writes = true;
  if (std::getenv("TF_CONFIG") != nullptr) {
    STRATA_ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpecFromEnvironment());
    DeviceOptions machine = options.devices;
    machine.num_cpu_devices = 2;
    distribute::MultiWorkerOptions mw;
    mw.steps_span_workers = true;
    mw.transport = flags.transport;
    mw.heartbeat_timeout = absl::Seconds(3);
    STRATA_ASSIGN_OR_RETURN(strategy, distribute::MultiWorkerMirroredStrategy::Create(
                                          cluster, {"/cpu:0", "/cpu:1"}, machine, {}, mw));
    tasks = strategy->worker_task_names();
    STRATA_ASSIGN_OR_RETURN(options, strategy->session_options_across_workers());
    writes = strategy->is_chief();
  }
  distribute::PipelineOptions po;
  for (const std::string& t : tasks) {
    for (int d = 0; d < 4 / static_cast<int>(tasks.size()); ++d) {
      po.stage_devices.push_back(absl::StrCat(t, "/device:CPU:", d));
    }
  }
  po.stage_starts = {0, 1, 2, 3};
  po.micro_batches = flags.micro_batches;
  po.schedule = flags.schedule == "gpipe" ? distribute::PipelineSchedule::kGPipe
                                          : distribute::PipelineSchedule::kOneForwardOneBackward;

  Scope root = Scope::NewRootScope();
  Output x =
      ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({kBatch, kFeatures}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({kBatch}));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> model,
                          train::MakeMlp({16, 16, 16}, kClasses, /*seed=*/3));
  train::SGD sgd(0.3);
  auto loss_fn = [](const Scope& s, Output labels, Output logits) {
    return train::SparseSoftmaxCrossEntropy(s, labels, logits);
  };
  STRATA_ASSIGN_OR_RETURN(
      distribute::PipelineStep step,
      distribute::BuildPipelineTrainStep(root, model.get(), x, y, loss_fn, &sgd, po));
  Node* init = train::GlobalVariablesInitializer(root);
  std::vector<std::string> reads, names;
  for (train::Variable* v : model->variables()) {
    reads.push_back(v->Read(root.WithDevice(po.stage_devices[0])).name());
    names.push_back(v->name());
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root, options));
  STRATA_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}, nullptr));
  for (int i = 0; i < flags.steps; ++i) {
    Tensor xs, ys;
    MakeBatch(i, &xs, &ys);
    std::vector<Tensor> out;
    STRATA_RETURN_IF_ERROR(
        session->Run({{"x", xs}, {"y", ys}}, {step.loss.name()}, {step.train_op->name()}, &out));
    std::printf("step %d loss %.6f\n", i, out[0].data<float>()[0]);
    std::fflush(stdout);
    if (flags.step_sleep_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(flags.step_sleep_ms));
    }
  }
  std::vector<Tensor> values;
  STRATA_RETURN_IF_ERROR(session->Run({}, reads, {}, &values));
  if (writes && !flags.weights_out.empty()) {
    STRATA_RETURN_IF_ERROR(WriteWeights(flags.weights_out, names, values));
  }
  if (strategy != nullptr) STRATA_RETURN_IF_ERROR(strategy->Shutdown());
  return absl::OkStatus();
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  strata::Flags flags;
  absl::Status s = strata::ParseFlags(argc, argv, &flags);
  if (s.ok()) s = strata::Train(flags);
  if (!s.ok()) {
    std::fprintf(stderr, "pipeline_worker: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
