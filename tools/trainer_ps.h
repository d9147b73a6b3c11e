// The trainer's parameter-server roles (--strategy=parameter_server): the
// same binary on every task of a cluster of a chief, workers and ps tasks
// (TF_CONFIG, or tools/launch --num_ps), as TensorFlow's
// ParameterServerStrategy with a ClusterCoordinator runs:
//
//   ps      serves its variables (ParameterServerTask) until the chief ends
//           the job;
//   worker  builds the model under ParameterServerStrategy (its variables
//           on the ps tasks), its own input pipeline (the training split
//           in its own shuffled order), and serves the function
//           "train_step" (one step: the next batch, the loss back) until
//           the chief ends the job;
//   chief   builds the same model (a client of the ps tasks too),
//           initializes the variables, schedules total_steps closures of
//           "train_step" on the workers through a ClusterCoordinator (an
//           epoch of them at a time, then Join and the test set evaluated
//           on the chief), writes the metrics and the final checkpoint, and
//           ends every task's part of the job.
//
// Each step applies one worker's gradients to the ps tasks' variables as
// they come (asynchronous; --max_staleness bounds how far workers drift
// apart in steps). --max_staleness=0 trains in rounds instead: each worker
// takes its share of every global batch (as a synchronous worker does), a
// step adds its gradients into accumulators beside the variables, and after
// every worker's step of the round the chief applies their mean once: the
// run ends on the weights synchronous workers train (within float
// rounding), as long as no worker is lost (a rescheduled step reads another
// worker's next share). A worker that dies mid-run costs its step, which runs
// again elsewhere; the run goes on and the worker takes steps again when
// it is back (restarted at its address). A ps task that dies fails the
// chief's Join with Unavailable naming it; the chief then ends every
// task's run with that error, so every task exits non-zero naming it. A
// task that fails to start (its input, its port) reports its error to the
// chief, which ends the job with it at once. A task that loses the chief
// for --heartbeat_timeout seconds (or never reaches it within
// --startup_timeout) exits with an error naming it.
//
// Errors: InvalidArgument naming the cluster for one without a ps task,
// without a chief or without a worker.
//
// Thread-safety: one role per process. Ownership: plain values.
#ifndef STRATA_TOOLS_TRAINER_PS_H_
#define STRATA_TOOLS_TRAINER_PS_H_

#include <cstdio>

#include "absl/status/statusor.h"
#include "tools/trainer_lib.h"

namespace strata {
namespace trainer {

// This process's role, as the file comment says. The result is the chief's
// (workers and ps tasks return an empty one).
absl::StatusOr<TrainerResult> RunParameterServerRole(const TrainerConfig& config, FILE* log);

}  // namespace trainer
}  // namespace strata

#endif  // STRATA_TOOLS_TRAINER_PS_H_
