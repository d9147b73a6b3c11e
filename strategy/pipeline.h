// Pipeline model parallelism: a model split into stages (a Sequential's
// layer spans, or one function per stage), each stage on its own device,
// the batch cut into micro-batches that flow through the stages, scheduled as GPipe (every
// forward, then every backward) or 1F1B (one forward, one backward: a stage
// holds the activations of at most as many micro-batches as there are
// stages after it, whatever the micro-batch count), as in DeepSpeed's
// PipelineModule and torch.distributed.pipelining.
//
//   auto model = *train::MakeMlp({512, 512, 512}, 10, /*seed=*/1);
//   distribute::PipelineOptions o;
//   o.stage_devices = {"/device:CPU:0", "/device:CPU:1"};
//   o.stage_starts = {0, 2};        // layers 0-1 on stage 0, layers 2-3 on stage 1
//   o.micro_batches = 8;
//   o.schedule = distribute::PipelineSchedule::kOneForwardOneBackward;
//   train::Adam adam(1e-3);
//   STRATA_ASSIGN_OR_RETURN(distribute::PipelineStep step,
//       distribute::BuildPipelineTrainStep(root, model.get(), x, y, loss_fn, &adam, o));
//   // session->Run({{x, xs}, {y, ys}}, {step.loss}, {step.train_op}, &out);
//
// One Session::Run is one training step: the dataflow executor runs each
// stage's micro-batches on its device as their inputs arrive, and the
// schedule is imposed by control edges between consecutive work items of a
// stage (a forward or backward of one micro-batch), so a stage never starts
// an item before the one it follows in the schedule is done. Each
// variable's gradient is the sum of its micro-batches' (accumulated on its
// stage's device), and the loss is the mean of the micro-batches' means:
// with equal micro-batches the update is the full batch's (to rounding).
// The weights are created by the first micro-batch, named as without a
// pipeline ("dense/kernel"), on their stage's device: checkpoints of a
// pipelined model and of the same model unsplit are interchangeable.
//
// A model that is not a Sequential (skip connections, several inputs,
// anything written as code) is split by giving one function per stage
// (PipelineStageFn): each builds its stage from the tensors the stage
// before it returned, and returns the tensors the next stage gets. Only
// those cross: a stage that reads another stage's tensor it was not
// passed, another stage's weight, or the whole batch instead of its
// micro-batch fails naming the tensor and the stages, as does a stage that
// makes new weights for each micro-batch.
//
// Errors (InvalidArgument):
// no stage, a stage without a device, stage starts that are not increasing
// from 0 within the model's layers (naming them), a micro-batch count
// below 1 or that does not divide a batch of known size (naming the option),
// a replica whose device count is not the stage count, or a batch of known
// size that replicas x micro-batches do not divide.
// A batch whose size is known only when run and is not a multiple of the
// micro-batch count fails that run naming the split.
//
// Thread-safety: build with one thread (as for Scope).
#ifndef STRATA_STRATEGY_PIPELINE_H_
#define STRATA_STRATEGY_PIPELINE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "runtime/trace.h"
#include "train/models.h"
#include "train/optimizers.h"

namespace strata {
namespace distribute {

enum class PipelineSchedule {
  kGPipe,                  // every forward of a stage, then every backward
  kOneForwardOneBackward,  // 1F1B (PipeDream-Flush): warm-up, alternate, drain
};

struct PipelineOptions {
  // Stage s runs on stage_devices[s] (full or partial device names).
  std::vector<std::string> stage_devices;
  // The model's index of each stage's first layer: stage_starts[0] == 0, increasing, one per stage.
  std::vector<int> stage_starts;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  // Data parallelism across pipelines (a pipeline x data mesh): replica r
  // >= 1 of the pipeline runs its stages on replica_stage_devices[r - 1],
  // one device per stage. The batch is split over the replicas in order,
  // each replica's part into micro_batches; the weights stay on the first
  // replica's stage devices (in-graph replication, as TF1's between-device
  // replicas: one copy of the weights and the optimizer's slots). Per step
  // each other replica reads each weight once (the value crosses to its
  // stage device once, whatever the micro-batch count), sums its
  // micro-batches' gradients on its own devices, and sends that sum once
  // to the weight, where the replicas' sums are added: the update is the
  // whole batch's (a reduce to the first replica and a broadcast of the
  // weights, not an all-reduce).
  std::vector<std::vector<std::string>> replica_stage_devices;
};

// The mean loss of one micro-batch from its labels and the model's output,
// built in `scope` (on the last stage's device).
using PipelineLossFn = std::function<Output(const Scope& scope, Output labels, Output outputs)>;

struct PipelineStep {
  Node* train_op = nullptr;
  Output loss;  // the batch's mean loss: the mean of the micro-batches'
  // The schedule per stage of each replica (replica r's stage s at
  // r * stages + s), as it is imposed: "F3" / "B3" is the forward /
  // backward of the replica's micro-batch 3.
  std::vector<std::vector<std::string>> schedule;
  // The work item of every node in one ("F3", "B3"), and the device of each
  // stage of each replica (indexed as `schedule`).
  absl::flat_hash_map<std::string, std::string> item_of_node;
  std::vector<std::string> stage_devices;
};

// Adds to `tracer`, for each work item of `step` that has kernels among
// its events from `first_event` on (one traced step), an event on its
// stage's device spanning them, named "F3" / "B3" (op "PipelineItem"): in
// the Chrome trace each stage's track then shows the micro-batches'
// forwards and backwards in a row of their own, and the bubble between.
void RecordPipelineItems(const PipelineStep& step, StepTracer* tracer, size_t first_event = 0);

// Builds the pipelined forward and backward of `model` on `inputs` (the
// batch, cut into micro-batches along dimension 0, as `labels` is) and
// `optimizer`'s update of every trainable weight. The model must not have
// been built yet.
absl::StatusOr<PipelineStep> BuildPipelineTrainStep(const Scope& scope, train::Sequential* model,
                                                    Output inputs, Output labels,
                                                    const PipelineLossFn& loss,
                                                    train::Optimizer* optimizer,
                                                    const PipelineOptions& options);

// One stage of a model written as code: builds the stage in `scope` (its
// device) from the tensors the stage before it returned (the micro-batch's
// inputs for stage 0) and returns the tensors the next stage gets (the
// model's output, one tensor, for the last stage). Called once per
// micro-batch and replica, in order; the weights are made by the first
// call and reused by the later ones (as train::Layer objects the function
// holds do: a layer builds its weights on its first Apply).
using PipelineStageFn =
    std::function<absl::StatusOr<OutputList>(const Scope& scope, const OutputList& inputs)>;

// The same for a model given as one function per stage (options.stage_starts
// empty; one stage function per stage device): `inputs` (one or more
// tensors with the batch along dimension 0) are cut into micro-batches and
// given to stage 0. Every trainable variable the forward reads is trained.
absl::StatusOr<PipelineStep> BuildPipelineTrainStep(const Scope& scope,
                                                    const std::vector<PipelineStageFn>& stages,
                                                    const OutputList& inputs, Output labels,
                                                    const PipelineLossFn& loss,
                                                    train::Optimizer* optimizer,
                                                    const PipelineOptions& options);

// The order of work items of stage `stage` of `num_stages` for `schedule`
// with `micro_batches`: pairs (backward?, micro-batch).
std::vector<std::pair<bool, int>> StageSchedule(PipelineSchedule schedule, int stage,
                                                int num_stages, int micro_batches);

}  // namespace distribute
}  // namespace strata

#endif  // STRATA_STRATEGY_PIPELINE_H_
