// RemoteTasks: other tasks that run a session's partitions on request, as
// TensorFlow's parameter servers run the variable reads and updates of every
// worker's step. Unlike a session spanning tasks (SessionOptions::task_links,
// where every task runs the same steps), only the calling task (the client)
// runs steps: it places nodes on the other tasks' devices, registers their
// partitions with them once per step plan, and at each step asks each of
// them to run its partitions; the tensors between the client's partitions
// and theirs travel in that step's exchange with each task, so a client
// that fails or goes away ends only its own steps there, and a task that
// fails ends the client's step with its error.
//
//   // client side (the session does this; runtime/rpc/ has the gRPC one)
//   uint64_t h = *tasks->RegisterPartition(ps0, "/job:ps/replica:0/task:0/device:CPU:0", def);
//   RequestedStep step(&local, tasks, &expected, relay_allocator);
//   step.Start({{ps0, {h}}}, timeout, done_per_task);   // then run local partitions
//
// Thread-safety: RemoteTasks methods may be called concurrently; a
// RemoteStep's Send and Abort too.
#ifndef STRATA_RUNTIME_REMOTE_TASKS_H_
#define STRATA_RUNTIME_REMOTE_TASKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "graph/tensor.h"
#include "kernels/rendezvous.h"
#include "proto/graph.pb.h"
#include "runtime/remote_rendezvous.h"

namespace strata {

// What one task's side of a step reports to the client's step.
class RemoteStepSink {
 public:
  virtual ~RemoteStepSink() = default;
  // A tensor for `key` is arriving with this dtype and dims (`bytes` of
  // data): the tensor to receive it into, or why it is refused (the step
  // then fails). Called before anything is allocated for it.
  virtual absl::StatusOr<Tensor> Accept(const std::string& key, int32_t dtype,
                                        absl::Span<const int64_t> dims, uint64_t bytes) = 0;
  // The value of `key` (uninitialized: a dead value) arrived.
  virtual void Deliver(const std::string& key, const Tensor& value) = 0;
  // The task's partitions of the step finished with `status`; called once,
  // last.
  virtual void Finished(const absl::Status& status) = 0;
};

// One step's exchange with one task.
class RemoteStep {
 public:
  // Waits until the sink's Finished has returned.
  virtual ~RemoteStep() = default;
  // A tensor for a partition of that task. An error is this tensor's
  // (e.g. a dtype that cannot cross); a tensor the task can no longer take
  // (its side of the step ended) is dropped: the sink's Finished says why.
  virtual absl::Status Send(const std::string& key, const Tensor& value) = 0;
  // Ends the step there (the client's step failed with `status`); the sink
  // still gets Finished.
  virtual void Abort(const absl::Status& status) = 0;
};

class RemoteTasks {
 public:
  virtual ~RemoteTasks() = default;
  // The client's own task, "/job:worker/replica:0/task:0".
  virtual const std::string& local_task() const = 0;
  // The tasks that run partitions on request, and their devices (full names).
  virtual std::vector<std::string> tasks() const = 0;
  virtual std::vector<std::string> devices() const = 0;
  // Registers a partition for `device` of `task`; the handle names it in
  // StartStep. Errors name the task.
  virtual absl::StatusOr<uint64_t> RegisterPartition(const std::string& task,
                                                     const std::string& device,
                                                     const ::tensorflow::GraphDef& graph) = 0;
  // Runs the registered partitions `handles` of `task` once; `sink` (which
  // must outlive the result) gets the tensors for the client and, once,
  // the outcome. A step still running after `timeout` fails there.
  virtual std::unique_ptr<RemoteStep> StartStep(const std::string& task,
                                                std::vector<uint64_t> handles, RemoteStepSink* sink,
                                                absl::Duration timeout) = 0;
};

// The rendezvous of a client's step with partitions on RemoteTasks: a key
// between two of the client's devices goes to `local`; a key whose
// receiver is on a remote task is sent to that task's step; a tensor from
// a remote task is checked against `expected` (by key) before it is
// allocated, then delivered to `local`, or, when it is for another remote
// task, relayed to it (allocated from `relay_allocator`).
class RequestedStep : public Rendezvous {
 public:
  RequestedStep(Rendezvous* local, RemoteTasks* tasks, const RemoteRecvSpecs* expected,
                Allocator* relay_allocator,
                uint64_t max_bytes = RemoteRendezvous::kDefaultMaxBytes);
  // Waits for every remote step it started.
  ~RequestedStep() override;

  // Starts `handles` on each task; `done` runs once per task, with the
  // task's status prefixed "task <task>: ".
  void Start(const std::vector<std::pair<std::string, std::vector<uint64_t>>>& handles,
             absl::Duration timeout, std::function<void(absl::Status)> done);

  absl::Status Send(const std::string& key, const Tensor& value) override;
  void RecvAsync(const std::string& key, DoneCallback done) override;
  // Aborts `local` and every remote step.
  void StartAbort(const absl::Status& status) override;

 private:
  class Sink;
  absl::StatusOr<RemoteStep*> StepFor(const std::string& task) const;

  Rendezvous* const local_;
  RemoteTasks* const tasks_;
  const RemoteRecvSpecs* const expected_;
  Allocator* const relay_allocator_;
  const uint64_t max_bytes_;
  // Made by Start before any step starts, read-only afterwards.
  std::vector<std::unique_ptr<Sink>> sinks_;
  mutable Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<RemoteStep>> steps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_REMOTE_TASKS_H_
