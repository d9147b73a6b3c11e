#include "strategy/cluster_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/allocator.h"
#include "runtime/rpc/worker_service.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/rpc_auth.h"

namespace strata {
namespace distribute {

absl::StatusOr<std::vector<Tensor>> RemoteValue::Fetch() const {
  MutexLock l(&mu_);
  mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_; });
  return value_;
}

bool RemoteValue::ready() const {
  MutexLock l(&mu_);
  return ready_;
}

std::string RemoteValue::worker() const {
  MutexLock l(&mu_);
  return worker_;
}

void RemoteValue::Set(absl::StatusOr<std::vector<Tensor>> value, std::string worker) {
  MutexLock l(&mu_);
  if (ready_) return;
  value_ = std::move(value);
  worker_ = std::move(worker);
  ready_ = true;
}

absl::StatusOr<std::unique_ptr<ClusterCoordinator>> ClusterCoordinator::Create(
    ClusterCoordinatorOptions options) {
  if (options.workers.empty()) {
    return absl::InvalidArgumentError("ClusterCoordinatorOptions.workers: none");
  }
  if (options.max_staleness < -1) {
    return absl::InvalidArgumentError(absl::StrCat("ClusterCoordinatorOptions.max_staleness is ",
                                                   options.max_staleness, ", must be >= -1"));
  }
  absl::flat_hash_set<std::string> seen;
  for (const CoordinatedWorker& w : options.workers) {
    if (w.task.empty() || w.address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ClusterCoordinatorOptions.workers: '", w.task,
                                                     "' has no task name or no address"));
    }
    if (!seen.insert(w.task).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClusterCoordinatorOptions.workers: '", w.task, "' is named twice"));
    }
  }
  std::unique_ptr<ClusterCoordinator> c(new ClusterCoordinator(std::move(options)));
  for (const CoordinatedWorker& w : c->options_.workers) {
    c->stubs_.push_back(WorkerService::NewStub(
        DialTask(w.address, c->options_.tls, c->options_.max_message_bytes)));
  }
  {
    MutexLock l(&c->mu_);
    c->workers_.resize(c->options_.workers.size());
  }
  for (size_t w = 0; w < c->options_.workers.size(); ++w) {
    c->threads_.emplace_back([raw = c.get(), w] { raw->WorkerLoop(static_cast<int>(w)); });
  }
  return c;
}

ClusterCoordinator::~ClusterCoordinator() {
  std::deque<Closure> left;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    left.swap(queue_);
  }
  for (std::thread& t : threads_) t.join();
  for (Closure& c : left) c.value->Set(absl::CancelledError("the coordinator was destroyed"), "");
}

std::shared_ptr<RemoteValue> ClusterCoordinator::Schedule(const std::string& function,
                                                          std::vector<Tensor> args) {
  Closure c;
  c.function = function;
  c.args = std::move(args);
  c.value = std::make_shared<RemoteValue>();
  std::shared_ptr<RemoteValue> value = c.value;
  MutexLock l(&mu_);
  c.id = next_id_++;
  if (stopping_) {
    value->Set(absl::CancelledError("the coordinator is stopping"), "");
  } else {
    queue_.push_back(std::move(c));
  }
  return value;
}

absl::Status ClusterCoordinator::Join() {
  MutexLock l(&mu_);
  mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_ == 0 && (queue_.empty() || stopping_);
  });
  absl::Status s = first_error_;
  first_error_ = absl::OkStatus();
  return s;
}

bool ClusterCoordinator::Done() const {
  MutexLock l(&mu_);
  return running_ == 0 && queue_.empty();
}

int ClusterCoordinator::num_available_workers() const {
  MutexLock l(&mu_);
  int n = 0;
  for (const Worker& w : workers_) n += w.available ? 1 : 0;
  return n;
}

int64_t ClusterCoordinator::num_rescheduled() const {
  MutexLock l(&mu_);
  return rescheduled_;
}

std::vector<int64_t> ClusterCoordinator::finished_per_worker() const {
  MutexLock l(&mu_);
  std::vector<int64_t> out;
  for (const Worker& w : workers_) out.push_back(w.finished);
  return out;
}

bool ClusterCoordinator::MayStart(int w) const {
  if (!workers_[w].available) return false;
  if (options_.max_staleness < 0) return true;
  int64_t slowest = workers_[w].finished;
  for (const Worker& v : workers_) {
    if (v.available) slowest = std::min(slowest, v.finished);
  }
  return workers_[w].finished - slowest <= options_.max_staleness;
}

namespace {

// Failures of the call itself (the worker unreachable or gone mid-call),
// as opposed to the worker refusing it.
bool WorkerLost(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::CANCELLED ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::UNKNOWN;
}

}  // namespace

bool ClusterCoordinator::RunOn(int w, const Closure& c,
                               absl::StatusOr<std::vector<Tensor>>* result) {
  const std::string& task = options_.workers[w].task;
  RunFunctionRequest request;
  request.set_function(c.function);
  request.set_closure_id(c.id);
  for (size_t i = 0; i < c.args.size(); ++i) {
    absl::Status s = EncodeStepTensor(absl::StrCat("arg ", i), c.args[i], request.add_args());
    if (!s.ok()) {
      *result = s;
      return true;
    }
  }
  grpc::ClientContext ctx;
  if (options_.job_token.has_value()) SignRpc(*options_.job_token, "RunFunction", request, &ctx);
  RunFunctionResponse response;
  const grpc::Status s = stubs_[w]->RunFunction(&ctx, request, &response);
  if (!s.ok()) {
    if (WorkerLost(s)) return false;
    *result = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                           absl::StrCat("worker ", task, " refused closure ", c.id, " (",
                                        c.function, "): ", s.error_message()));
    return true;
  }
  if (response.code() != 0) {
    *result = absl::Status(
        static_cast<absl::StatusCode>(response.code()),
        absl::StrCat("closure ", c.id, " (", c.function, ") on worker ", response.message()));
    return true;
  }
  std::vector<Tensor> values;
  for (const StepTensor& t : response.results()) {
    absl::StatusOr<Tensor> v = DecodeStepTensor(t, CpuAllocator(), uint64_t{1} << 40);
    if (!v.ok()) {
      *result = AnnotateStatus(v.status(),
                               absl::StrCat("result of closure ", c.id, " from ", task, ": "));
      return true;
    }
    values.push_back(*std::move(v));
  }
  *result = std::move(values);
  return true;
}

bool ClusterCoordinator::Probe(int w) {
  RunFunctionRequest request;  // no function: a liveness probe
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.probe_interval));
  ctx.set_wait_for_ready(true);  // the channel may be between reconnection attempts
  if (options_.job_token.has_value()) SignRpc(*options_.job_token, "RunFunction", request, &ctx);
  RunFunctionResponse response;
  return stubs_[w]->RunFunction(&ctx, request, &response).ok();
}

void ClusterCoordinator::WorkerLoop(int w) {
  const std::string& task = options_.workers[w].task;
  while (true) {
    Closure c;
    bool lost = false;
    {
      MutexLock l(&mu_);
      mu_.Await([this, w]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !workers_[w].available || (!queue_.empty() && MayStart(w));
      });
      if (stopping_) return;
      lost = !workers_[w].available;
      if (lost) {
        if (mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
                                 options_.probe_interval)) {
          return;
        }
      } else {
        c = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
      }
    }
    if (lost) {
      // Probed now and then until it answers again.
      if (Probe(w)) {
        MutexLock l(&mu_);
        workers_[w].available = true;
      }
      continue;
    }
    absl::StatusOr<std::vector<Tensor>> result;
    const bool reached = RunOn(w, c, &result);
    MutexLock l(&mu_);
    --running_;
    if (!reached) {
      // At least once: the closure runs again, on whichever worker is free.
      workers_[w].available = false;
      ++rescheduled_;
      queue_.push_front(std::move(c));
      continue;
    }
    if (result.ok()) {
      ++workers_[w].finished;
      c.value->Set(std::move(result), task);
      continue;
    }
    const absl::Status error = result.status();
    c.value->Set(error, task);
    if (first_error_.ok()) first_error_ = error;
    for (Closure& q : queue_) {
      q.value->Set(absl::CancelledError(
                       absl::StrCat("cancelled: closure ", c.id, " failed: ", error.message())),
                   "");
    }
    queue_.clear();
  }
}

}  // namespace distribute
}  // namespace strata
