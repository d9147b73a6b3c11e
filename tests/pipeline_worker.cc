// A pipeline trained across the workers of a cluster, for
// multi_worker_pipeline_test and the pipeline-memory benchmark: an MLP
// 12-16-16-16-5 (--hidden, --hidden_layers) in 4 stages (--stage_starts:
// each stage's first layer), 2 on each of 2 virtual CPU devices of every
// worker (TF_CONFIG, MultiWorkerMirroredStrategy with steps_span_workers:
// each worker runs its own stages), or without TF_CONFIG all 4 stages on 4
// virtual CPU devices of this process. Plain SGD on synthetic data that
// depends only on the step. --data_parallel trains the same model with
// data parallelism instead (MultiWorkerMirroredStrategy, both devices of
// every worker a replica holding the whole model; TF_CONFIG needed).
//
//   pipeline_worker --steps=100 --micro_batches=4 --schedule=1f1b
//       --weights_out=FILE [--step_sleep_ms=N] [--transport=auto|shm|tcp]
//       [--hidden=16 --hidden_layers=3 --stage_starts=0,1,2,3]
//       [--memory_limit_mb=M] [--data_parallel]
//
// --memory_limit_mb limits what this process's devices may allocate (split
// evenly over them: the allocators' ResourceExhausted past it).
// Prints "step N loss L" per step and at the end each local device's peak
// allocation ("peak DEVICE MB"); the first worker (or the one process)
// writes every weight to FILE, one "name value..." line each, at 9
// significant digits. On an error it prints it and exits 1.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "runtime/session.h"
#include "strategy/cluster_resolver.h"
#include "strategy/distributed_optimizer.h"
#include "strategy/multi_worker_mirrored_strategy.h"
#include "strategy/pipeline.h"
#include "strategy/replica_context.h"
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
  int64_t hidden = 16;
  int hidden_layers = 3;
  std::vector<int> stage_starts = {0, 1, 2, 3};
  int64_t memory_limit_mb = 0;
  bool data_parallel = false;
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
    } else if (k == "--hidden") {
      ok = absl::SimpleAtoi(v, &f->hidden) && f->hidden > 0;
    } else if (k == "--hidden_layers") {
      ok = absl::SimpleAtoi(v, &f->hidden_layers) && f->hidden_layers > 0;
    } else if (k == "--stage_starts") {
      f->stage_starts.clear();
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        int start = 0;
        ok = ok && absl::SimpleAtoi(part, &start);
        f->stage_starts.push_back(start);
      }
      ok = ok && f->stage_starts.size() == 4;
    } else if (k == "--memory_limit_mb") {
      ok = absl::SimpleAtoi(v, &f->memory_limit_mb) && f->memory_limit_mb >= 0;
    } else if (k == "--data_parallel") {
      f->data_parallel = true;
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

// Each local device's peak allocation, "peak DEVICE MB" lines.
void PrintPeaks(const Session& session) {
  for (Device* d : session.device_mgr().devices()) {
    std::printf("peak %s %.2f MB\n", d->name().c_str(),
                d->allocator()->GetStats().peak_bytes_in_use / 1e6);
  }
  std::fflush(stdout);
}

// The examples of replica `replica` (of `replicas`) of the batch.
Tensor Rows(const Tensor& t, int replica, int replicas) {
  const int64_t rows = t.dim_size(0) / replicas, row_elems = t.NumElements() / t.dim_size(0);
  std::vector<int64_t> dims(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
  dims[0] = rows;
  Tensor out(t.dtype(), TensorShape::FromDims(dims).value());  // a part of a valid shape
  const size_t bytes = static_cast<size_t>(rows * row_elems) * DataTypeSize(t.dtype());
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + replica * bytes, bytes);
  return out;
}

// Data parallelism: every device of every worker a replica with the whole model.
absl::Status TrainDataParallel(const Flags& flags, const DeviceOptions& machine) {
  STRATA_ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpecFromEnvironment());
  distribute::MultiWorkerOptions mw;
  mw.transport = flags.transport;
  mw.heartbeat_timeout = absl::Seconds(3);
  STRATA_ASSIGN_OR_RETURN(auto strategy, distribute::MultiWorkerMirroredStrategy::Create(
                                             cluster, {"/cpu:0", "/cpu:1"}, machine, {}, mw));
  const int replicas = strategy->num_replicas_in_sync(), local = 2;
  Scope root = Scope::NewRootScope();
  distribute::StrategyScope in_scope = strategy->Scope();
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<train::Sequential> model,
      train::MakeMlp(std::vector<int64_t>(flags.hidden_layers, flags.hidden), kClasses, 3));
  distribute::DistributedOptimizer<train::SGD> sgd(0.3);
  std::vector<Output> xs, ys;
  for (int r = 0; r < local; ++r) {
    xs.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("x", r)), DT_FLOAT,
                                  PartialTensorShape({kBatch / replicas, kFeatures})));
    ys.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("y", r)), DT_INT32,
                                  PartialTensorShape({kBatch / replicas})));
  }
  auto step_fn = [&](distribute::ReplicaContext& ctx,
                     const std::vector<Output>& in) -> absl::StatusOr<distribute::ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output logits, model->Build(ctx.scope(), in[0]));
    Output loss = train::SparseSoftmaxCrossEntropy(ctx.scope(), in[1], logits);
    STRATA_ASSIGN_OR_RETURN(Node * train_op,
                            train::Minimize(ctx.scope(), loss, model->reads(), &sgd));
    return distribute::ReplicaResult{{loss}, {train_op}};
  };
  STRATA_ASSIGN_OR_RETURN(
      distribute::RunResult step,
      strategy->Run(root, step_fn, {distribute::PerReplica(xs), distribute::PerReplica(ys)}));
  STRATA_ASSIGN_OR_RETURN(Output loss,
                          strategy->Reduce(root, distribute::ReduceOp::kMean, step.values[0]));
  Node* init = train::GlobalVariablesInitializer(root);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                          Session::Create(root, strategy->session_options()));
  absl::Status s = session->Run({}, {}, {init->name()}, nullptr);
  for (int i = 0; i < flags.steps && s.ok(); ++i) {
    Tensor x, y;
    MakeBatch(i, &x, &y);
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (int r = 0; r < local; ++r) {
      const int global = strategy->worker_index() * local + r;
      feeds.push_back({xs[r].name(), Rows(x, global, replicas)});
      feeds.push_back({ys[r].name(), Rows(y, global, replicas)});
    }
    std::vector<Tensor> out;
    s = session->Run(feeds, {loss.name()}, {step.op->name()}, &out);
    if (s.ok()) std::printf("step %d loss %.6f\n", i, out[0].data<float>()[0]);
    std::fflush(stdout);
  }
  PrintPeaks(*session);
  STRATA_RETURN_IF_ERROR(s);
  return strategy->Shutdown();
}

absl::Status Train(const Flags& flags) {
  if (flags.data_parallel && std::getenv("TF_CONFIG") == nullptr) {
    return absl::InvalidArgumentError("--data_parallel needs a cluster (TF_CONFIG)");
  }
  // The stages' devices: every worker's two CPUs, or this process's.
  std::unique_ptr<distribute::MultiWorkerMirroredStrategy> strategy;
  std::vector<std::string> tasks = {"/job:localhost/replica:0/task:0"};
  SessionOptions options;
  options.devices.num_cpu_devices = 4;
  options.devices.intra_op_threads_per_device = 1;
  options.devices.cpu_memory_limit_bytes = (flags.memory_limit_mb << 20) / 4;
  bool writes = true;
  if (std::getenv("TF_CONFIG") != nullptr) {
    STRATA_ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpecFromEnvironment());
    DeviceOptions machine = options.devices;
    machine.num_cpu_devices = 2;
    machine.cpu_memory_limit_bytes = (flags.memory_limit_mb << 20) / 2;
    if (flags.data_parallel) return TrainDataParallel(flags, machine);
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
  po.stage_starts = flags.stage_starts;
  po.micro_batches = flags.micro_batches;
  po.schedule = flags.schedule == "gpipe" ? distribute::PipelineSchedule::kGPipe
                                          : distribute::PipelineSchedule::kOneForwardOneBackward;

  Scope root = Scope::NewRootScope();
  Output x =
      ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({kBatch, kFeatures}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialTensorShape({kBatch}));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<train::Sequential> model,
                          train::MakeMlp(std::vector<int64_t>(flags.hidden_layers, flags.hidden),
                                         kClasses, /*seed=*/3));
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
  PrintPeaks(*session);
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
