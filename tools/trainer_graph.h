// The trainer's graph (tools/trainer_lib.h): the step under any strategy
// (model, loss, the optimizer's update on every replica), the evaluation of
// the test set and the checkpoint of every variable; shared by the
// synchronous trainer and the parameter-server roles (trainer_ps.h).
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TrainGraph> g,
//                           BuildGraph(config, data, total_steps, strategy, batches, false,
//                           false));
//   auto session = *Session::Create(g->root, strategy->session_options());
//   std::vector<double> sums = *EvaluateSums(session.get(), *g, data);  // loss, accuracy, n
//
// Thread-safety: build on one thread, as for Scope. Ownership: the graph
// owns its model, optimizer and checkpoint; the strategy outlives it.
#ifndef STRATA_TOOLS_TRAINER_GRAPH_H_
#define STRATA_TOOLS_TRAINER_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fit/checkpoint.h"
#include "graph/scope.h"
#include "runtime/session.h"
#include "strategy/distributed_dataset.h"
#include "strategy/pipeline.h"
#include "strategy/strategy.h"
#include "tools/trainer_data.h"
#include "tools/trainer_lib.h"
#include "train/models.h"
#include "train/optimizers.h"

namespace strata {
namespace trainer {

// Test examples evaluated per Session::Run.
inline constexpr int64_t kEvalChunk = 4096;
// The most parameters a model may have here.
inline constexpr int64_t kMaxParameters = int64_t{1} << 30;

// The graph of one run: the step (model, loss, update on every replica),
// the evaluation of the test set, and the ops to save and restore every
// variable.
struct TrainGraph {
  distribute::Strategy* strategy = nullptr;  // not owned; outlives the graph
  Scope root = Scope::NewRootScope();
  std::unique_ptr<distribute::DistributedDataset> input;
  // The step's [loss, preempted], means over the replicas (fit/loop.h).
  Output loss_and_flag;
  std::vector<std::string> preempt_feeds;
  Node* train_op = nullptr;
  Output eval_x, eval_y, eval_loss, eval_accuracy;
  Node* init = nullptr;
  // Every variable (weights, optimizer slots, the step counter), saved once
  // under its one-device name whatever the replica count (fit/checkpoint.h).
  std::unique_ptr<fit::Checkpoint> checkpoint;
  std::unique_ptr<train::Sequential> model;
  std::unique_ptr<train::Optimizer> optimizer;
  // Rounds (BuildGraph's accumulate_over > 0): the step adds the gradients,
  // divided by the round's steps, into an accumulator beside each variable
  // instead of applying them (train_op), and apply_op applies the
  // accumulated sum with `optimizer` once and zeroes the accumulators.
  std::unique_ptr<train::Optimizer> accumulate;
  Node* apply_op = nullptr;
  // A pipeline's shape, for the log ("pipeline: 2 stages (layers 0-1 on
  // /device:CPU:0, ...), 4 micro-batches, 1f1b"); empty without one.
  std::string pipeline;
  distribute::PipelineStep pipeline_step;  // its step (train_op null without one)
};

// Whether `c` asks for a pipeline (--pipeline_stages or --micro_batches > 1).
bool Pipelined(const TrainerConfig& c);

// `batches`: global batches, or with `per_worker_batches` this worker's
// (FILE sharding: the pipeline over its own files; DATA: its part of each
// global batch). `weighted`: batches may not split evenly over the
// replicas (partial batches, uneven shards), each replica's loss weighted
// by its share (DistributedDataset's PartialBatches::kWeighted).
// `accumulate_over` > 0: rounds of that many steps, each step's gradients
// accumulated and applied once per round (TrainGraph::apply_op): the
// synchronous update of that many workers' mean gradient, made by a
// parameter-server cluster (trainer_ps.h).
absl::StatusOr<std::unique_ptr<TrainGraph>> BuildGraph(const TrainerConfig& c, const TrainerData& d,
                                                       int64_t total_steps,
                                                       distribute::Strategy* strategy,
                                                       data::DatasetPtr batches,
                                                       bool per_worker_batches, bool weighted,
                                                       int accumulate_over = 0);

// Copies rows [begin, end) of a [n, ...] tensor.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end);

// Sums of the loss and of the accuracy over the test set, in chunks, and
// the count: {loss_sum, accuracy_sum, n}.
absl::StatusOr<std::vector<double>> EvaluateSums(Session* session, const TrainGraph& g,
                                                 const TrainerData& d);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_GRAPH_H_
