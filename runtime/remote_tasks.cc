#include "runtime/remote_tasks.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

class RequestedStep::Sink : public RemoteStepSink {
 public:
  Sink(RequestedStep* step, std::string task, std::function<void(absl::Status)> done)
      : step_(step), task_(std::move(task)), done_(std::move(done)) {}

  absl::StatusOr<Tensor> Accept(const std::string& key, int32_t dtype,
                                absl::Span<const int64_t> dims, uint64_t bytes) override {
    RemoteRecvSpec relay;
    const RemoteRecvSpec* spec = Expected(key);
    if (spec == nullptr) {
      // For another remote task: any dtype and shape, bounded.
      STRATA_ASSIGN_OR_RETURN(std::string dst, RemoteRendezvous::DestinationTask(key));
      if (dst == step_->tasks_->local_task()) {
        return absl::InvalidArgumentError(
            absl::StrCat("task ", task_, " sent ", key, ", which no _Recv of this step expects"));
      }
      relay.dtype = static_cast<DataType>(dtype);
      relay.allocator = step_->relay_allocator_;
      spec = &relay;
    }
    TensorShape shape;
    const std::string bad = CheckRemoteTensor(dtype, dims, bytes, *spec, step_->max_bytes_, &shape);
    if (!bad.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", key, " from task ", task_, " refused: ", bad));
    }
    return Tensor::Allocate(spec->allocator, spec->dtype, shape);
  }

  void Deliver(const std::string& key, const Tensor& value) override {
    absl::Status s;
    if (Expected(key) != nullptr) {
      s = step_->local_->Send(key, value);
    } else {
      s = step_->Send(key, value);  // a relay
    }
    if (!s.ok())
      step_->StartAbort(AnnotateStatus(s, absl::StrCat("tensor from task ", task_, ": ")));
  }

  void Finished(const absl::Status& status) override {
    done_(status.ok() ? status : AnnotateStatus(status, absl::StrCat("task ", task_, ": ")));
  }

 private:
  const RemoteRecvSpec* Expected(const std::string& key) const {
    auto it = step_->expected_->find(key);
    return it == step_->expected_->end() ? nullptr : &it->second;
  }

  RequestedStep* const step_;
  const std::string task_;
  const std::function<void(absl::Status)> done_;
};

RequestedStep::RequestedStep(Rendezvous* local, RemoteTasks* tasks, const RemoteRecvSpecs* expected,
                             Allocator* relay_allocator, uint64_t max_bytes)
    : local_(local),
      tasks_(tasks),
      expected_(expected),
      relay_allocator_(relay_allocator),
      max_bytes_(max_bytes) {}

RequestedStep::~RequestedStep() {
  absl::flat_hash_map<std::string, std::unique_ptr<RemoteStep>> steps;
  {
    MutexLock l(&mu_);
    steps.swap(steps_);
  }
  steps.clear();  // each waits for its sink's Finished
}

void RequestedStep::Start(const std::vector<std::pair<std::string, std::vector<uint64_t>>>& handles,
                          absl::Duration timeout, std::function<void(absl::Status)> done) {
  for (const auto& [task, h] : handles) sinks_.push_back(std::make_unique<Sink>(this, task, done));
  for (size_t i = 0; i < handles.size(); ++i) {
    std::unique_ptr<RemoteStep> step =
        tasks_->StartStep(handles[i].first, handles[i].second, sinks_[i].get(), timeout);
    RemoteStep* raw = step.get();
    absl::Status aborted;
    {
      MutexLock l(&mu_);
      steps_[handles[i].first] = std::move(step);
      aborted = aborted_;
    }
    if (!aborted.ok()) raw->Abort(aborted);
  }
  MutexLock l(&mu_);
  started_ = true;
}

absl::StatusOr<RemoteStep*> RequestedStep::StepFor(const std::string& task) const {
  MutexLock l(&mu_);
  mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_; });
  auto it = steps_.find(task);
  if (it == steps_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task, " runs no partition of this step"));
  }
  return it->second.get();
}

absl::Status RequestedStep::Send(const std::string& key, const Tensor& value) {
  STRATA_ASSIGN_OR_RETURN(std::string dst, RemoteRendezvous::DestinationTask(key));
  if (dst == tasks_->local_task()) return local_->Send(key, value);
  STRATA_ASSIGN_OR_RETURN(RemoteStep * step, StepFor(dst));
  return step->Send(key, value);
}

void RequestedStep::RecvAsync(const std::string& key, DoneCallback done) {
  // Tensors from remote tasks are delivered into `local_` by the sinks.
  local_->RecvAsync(key, std::move(done));
}

void RequestedStep::StartAbort(const absl::Status& status) {
  local_->StartAbort(status);
  std::vector<RemoteStep*> steps;
  {
    MutexLock l(&mu_);
    if (aborted_.ok()) aborted_ = status.ok() ? absl::CancelledError("step aborted") : status;
    for (auto& [task, step] : steps_) steps.push_back(step.get());
  }
  for (RemoteStep* s : steps) s->Abort(status);
}

}  // namespace strata
