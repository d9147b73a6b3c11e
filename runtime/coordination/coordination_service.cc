#include "runtime/coordination/coordination_service.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/quote.h"
#include "base/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace strata {
namespace {

std::string TaskName(const std::string& job, int index) {
  return absl::StrCat("/job:", job, "/replica:0/task:", index);
}

std::string Join(const std::vector<std::string>& v) { return absl::StrJoin(v, ", "); }

// A list of task names for an error message, at most kMaxNamed of them:
// errors travel as gRPC status messages, which must fit in the response's
// metadata (a few KiB) whatever the cluster's size.
std::string JoinAtMost(const std::vector<std::string>& v) {
  constexpr size_t kMaxNamed = 16;
  if (v.size() <= kMaxNamed) return Join(v);
  return absl::StrCat(absl::StrJoin(v.begin(), v.begin() + kMaxNamed, ", "), " and ",
                      v.size() - kMaxNamed, " more");
}

}  // namespace

std::vector<std::string> CoordinatedTasks(const tensorflow::ClusterDef& cluster) {
  std::vector<std::string> chief, workers;
  for (const tensorflow::JobDef& job : cluster.job()) {
    if (job.name() != "chief" && job.name() != "worker") continue;
    std::vector<int> indices;
    for (const auto& [index, address] : job.tasks()) indices.push_back(index);
    std::sort(indices.begin(), indices.end());
    for (int i : indices)
      (job.name() == "chief" ? chief : workers).push_back(TaskName(job.name(), i));
  }
  chief.insert(chief.end(), workers.begin(), workers.end());
  return chief;
}

std::string ClusterFingerprint(const tensorflow::ClusterDef& cluster) {
  // Jobs sorted by name so that two specs listing the same jobs in another
  // order agree; maps serialized deterministically (sorted by key).
  tensorflow::ClusterDef sorted = cluster;
  std::sort(
      sorted.mutable_job()->begin(), sorted.mutable_job()->end(),
      [](const tensorflow::JobDef& a, const tensorflow::JobDef& b) { return a.name() < b.name(); });
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    sorted.SerializeToCodedStream(&coded);
  }
  // FNV-1a: stable across processes and builds, unlike absl::Hash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::StatusOr<std::unique_ptr<CoordinationServiceImpl>> CoordinationServiceImpl::Create(
    CoordinationServiceOptions options) {
  if (options.tasks.empty()) {
    return absl::InvalidArgumentError("coordination service: no tasks to coordinate");
  }
  std::set<std::string> seen;
  for (const std::string& t : options.tasks) {
    if (t.empty()) return absl::InvalidArgumentError("coordination service: empty task name");
    if (!seen.insert(t).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordination service: task ", t, " listed twice"));
    }
  }
  if (options.service_task.empty()) options.service_task = options.tasks.front();
  if (options.heartbeat_timeout <= absl::ZeroDuration() ||
      options.register_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordination service: timeouts must be positive (heartbeat_timeout ",
                     absl::FormatDuration(options.heartbeat_timeout), ", register_timeout ",
                     absl::FormatDuration(options.register_timeout), ")"));
  }
  return std::unique_ptr<CoordinationServiceImpl>(new CoordinationServiceImpl(std::move(options)));
}

CoordinationServiceImpl::CoordinationServiceImpl(CoordinationServiceOptions options)
    : options_(std::move(options)) {
  {
    MutexLock l(&mu_);
    for (const std::string& t : options_.tasks) tasks_[t];
  }
  heartbeat_checker_ = std::thread([this] { CheckHeartbeats(); });
}

CoordinationServiceImpl::~CoordinationServiceImpl() { Stop(); }

void CoordinationServiceImpl::Stop() {
  {
    MutexLock l(&mu_);
    stopped_ = true;
  }
  if (heartbeat_checker_.joinable()) heartbeat_checker_.join();
}

absl::Status CoordinationServiceImpl::CheckTask(const std::string& task) const {
  if (std::find(options_.tasks.begin(), options_.tasks.end(), task) == options_.tasks.end()) {
    return absl::InvalidArgumentError(absl::StrCat("coordination service: unknown task '", task,
                                                   "'; the cluster's tasks are ",
                                                   JoinAtMost(options_.tasks)));
  }
  return absl::OkStatus();
}

void CoordinationServiceImpl::SetErrorLocked(absl::Status error) {
  if (error_.ok()) error_ = std::move(error);
}

absl::Status CoordinationServiceImpl::cluster_error() const {
  MutexLock l(&mu_);
  return error_;
}

bool CoordinationServiceImpl::AwaitLocked(const std::function<bool()>& done, absl::Time deadline,
                                          const CallerGone& caller_gone) {
  // Every state change happens under mu_, whose Unlock wakes Await waiters,
  // so a predicate over guarded state needs no condition variable. The
  // caller's connection is not guarded state: it is looked at between
  // slices of the wait.
  ++blocked_calls_;
  auto woken = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done() || !error_.ok() || stopped_; };
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const absl::Duration slice = caller_gone ? std::min(left, kCallerCheckPeriod) : left;
    if (mu_.AwaitWithTimeout(woken, slice) || left <= slice) break;
    if (caller_gone()) break;
  }
  --blocked_calls_;
  return done();
}

absl::Status CoordinationServiceImpl::CallerGoneError(const std::string& what) {
  return absl::CancelledError(absl::StrCat(what, ": the caller went away"));
}

int CoordinationServiceImpl::blocked_calls() const {
  MutexLock l(&mu_);
  return blocked_calls_;
}

absl::Status CoordinationServiceImpl::AbortedCallLocked(const std::string& what) const {
  if (stopped_) {
    return absl::UnavailableError(
        absl::StrCat(what, ": the coordination service on ", options_.service_task, " stopped"));
  }
  return absl::Status(error_.code(), absl::StrCat(what, " aborted: ", error_.message()));
}

bool CoordinationServiceImpl::AllRegisteredLocked() const {
  for (const auto& [name, t] : tasks_) {
    if (t.state == TaskState::kUnregistered) return false;
  }
  return true;
}

absl::StatusOr<RegisterResult> CoordinationServiceImpl::RegisterTask(
    const std::string& task, uint64_t incarnation, const std::vector<std::string>& devices,
    const std::string& cluster_fingerprint, absl::Duration timeout, const CallerGone& caller_gone) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  if (timeout <= absl::ZeroDuration()) timeout = options_.register_timeout;
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock l(&mu_);
  if (!options_.cluster_fingerprint.empty() &&
      cluster_fingerprint != options_.cluster_fingerprint) {
    // Put out as the cluster's error too: tasks whose specs disagree must all
    // fail fast, not wait for a registration that cannot complete.
    absl::Status err = absl::InvalidArgumentError(absl::StrCat(
        "task ", task, " has a different cluster spec than ", options_.service_task,
        ": cluster fingerprint ", cluster_fingerprint.empty() ? "(none)" : cluster_fingerprint,
        " vs ", options_.cluster_fingerprint));
    SetErrorLocked(err);
    return err;
  }
  if (!error_.ok()) return AbortedCallLocked(absl::StrCat("registration of ", task));
  Task& t = tasks_[task];
  if (t.state != TaskState::kUnregistered && t.incarnation != incarnation) {
    if (started_) {
      absl::Status err = absl::AbortedError(absl::StrCat("task ", task, " restarted (incarnation ",
                                                         t.incarnation, " -> ", incarnation, ")"));
      t.state = TaskState::kFailed;
      SetErrorLocked(err);
      return err;
    }
    // Before the cluster started nothing depends on the old process: the new
    // one simply takes its place.
  }
  if (t.state == TaskState::kFailed || t.state == TaskState::kShutdown) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task, " registered after it ",
                     t.state == TaskState::kFailed ? "failed" : "shut down"));
  }
  t.state = TaskState::kRegistered;
  t.incarnation = incarnation;
  t.devices = devices;
  t.last_heartbeat = absl::Now();
  if (AllRegisteredLocked()) {
    // Heartbeats are judged from the start on: a task blocked here sends
    // none (its client starts beating when registration returns), so a
    // clock started at its own registration would call an early task lost
    // while it waits for a late one.
    started_ = true;
    const absl::Time now = absl::Now();
    for (auto& [name, other] : tasks_) other.last_heartbeat = now;
  }

  if (!AwaitLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return started_; }, deadline,
                   caller_gone)) {
    if (!error_.ok() || stopped_) return AbortedCallLocked(absl::StrCat("registration of ", task));
    if (absl::Now() < deadline) return CallerGoneError(absl::StrCat("registration of ", task));
    std::vector<std::string> missing;
    for (const std::string& name : options_.tasks) {
      if (tasks_[name].state == TaskState::kUnregistered) missing.push_back(name);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("registration of ", task, " timed out after ", absl::FormatDuration(timeout),
                     ": ", missing.size(), " of ", options_.tasks.size(),
                     " tasks never registered: ", JoinAtMost(missing)));
  }
  RegisterResult result;
  for (const std::string& name : options_.tasks) {
    const Task& other = tasks_[name];
    result.devices.insert(result.devices.end(), other.devices.begin(), other.devices.end());
  }
  result.tasks = options_.tasks;
  result.service_task = options_.service_task;
  result.heartbeat_timeout = options_.heartbeat_timeout;
  return result;
}

absl::Status CoordinationServiceImpl::Heartbeat(const std::string& task, uint64_t incarnation) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  MutexLock l(&mu_);
  Task& t = tasks_[task];
  switch (t.state) {
    case TaskState::kUnregistered:
      return absl::FailedPreconditionError(
          absl::StrCat("heartbeat from task ", task, ", which has not registered"));
    case TaskState::kFailed:
      return absl::FailedPreconditionError(absl::StrCat(
          "heartbeat from task ", task, ", which has already failed: ", error_.message()));
    case TaskState::kShutdown:
      // Sent before the task had the shutdown barrier's answer (it stops its
      // heartbeats once it has): on its way out, not in error. Failing it
      // made the task's client abort its own passing ShutdownTask.
      if (t.incarnation == incarnation) return absl::OkStatus();
      return absl::FailedPreconditionError(
          absl::StrCat("heartbeat from task ", task, ", which has shut down"));
    case TaskState::kRegistered:
      break;
  }
  if (t.incarnation != incarnation) {
    absl::Status err = absl::AbortedError(absl::StrCat("task ", task, " restarted (incarnation ",
                                                       t.incarnation, " -> ", incarnation, ")"));
    if (started_) {
      t.state = TaskState::kFailed;
      SetErrorLocked(err);
    }
    return err;
  }
  t.last_heartbeat = absl::Now();
  return absl::OkStatus();
}

void CoordinationServiceImpl::CheckHeartbeats() {
  const absl::Duration period =
      std::min(absl::Seconds(1), std::max(absl::Milliseconds(10), options_.heartbeat_timeout / 10));
  MutexLock l(&mu_);
  while (!stopped_) {
    mu_.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopped_; }, period);
    if (stopped_) break;
    const absl::Time now = absl::Now();
    for (const std::string& name : options_.tasks) {
      Task& t = tasks_[name];
      if (!started_ || t.state != TaskState::kRegistered ||
          now - t.last_heartbeat <= options_.heartbeat_timeout) {
        continue;
      }
      t.state = TaskState::kFailed;
      SetErrorLocked(
          absl::UnavailableError(absl::StrCat("task ", name, " lost: no heartbeat for ",
                                              absl::FormatDuration(options_.heartbeat_timeout))));
    }
  }
}

absl::Status CoordinationServiceImpl::WaitForBarrier(const std::string& barrier_id,
                                                     const std::string& task,
                                                     absl::Duration timeout,
                                                     std::vector<std::string> participants,
                                                     const CallerGone& caller_gone) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  if (participants.empty()) participants = options_.tasks;
  for (const std::string& p : participants) STRATA_RETURN_IF_ERROR(CheckTask(p));
  const std::set<std::string> wanted(participants.begin(), participants.end());
  const std::string what = absl::StrCat("barrier '", barrier_id, "'");
  if (wanted.count(task) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": task ", task, " is not one of its tasks (", JoinAtMost(participants), ")"));
  }
  MutexLock l(&mu_);
  if (!error_.ok() || stopped_) return AbortedCallLocked(what);
  auto [it, created] = barriers_.try_emplace(barrier_id);
  Barrier& b = it->second;
  if (created) {
    b.participants = wanted;
    b.deadline = absl::InfiniteFuture();
  } else if (b.participants != wanted) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": task ", task, " expects tasks {", JoinAtMost(participants),
                     "} but it was started with {",
                     JoinAtMost({b.participants.begin(), b.participants.end()}), "}"));
  }
  if (b.done) return b.result;
  // The earliest deadline of the arrivals: a task that gives up fails the
  // barrier for all, so that every task sees the same outcome.
  b.deadline = std::min(b.deadline, absl::Now() + timeout);
  b.arrived.insert(task);
  if (b.arrived.size() == b.participants.size()) b.done = true;

  if (!AwaitLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return b.done; }, b.deadline,
                   caller_gone)) {
    if (!error_.ok() || stopped_) return AbortedCallLocked(what);
    // Gone before the deadline: the others still wait (the task arrived).
    if (absl::Now() < b.deadline) return CallerGoneError(what);
    std::vector<std::string> missing;
    for (const std::string& p : b.participants) {
      if (b.arrived.count(p) == 0) missing.push_back(p);
    }
    b.done = true;
    b.result = absl::DeadlineExceededError(
        absl::StrCat(what, " timed out: ", missing.size(), " of ", b.participants.size(),
                     " tasks did not arrive: ", JoinAtMost(missing)));
  }
  return b.result;
}

absl::Status CoordinationServiceImpl::InsertKeyValue(const std::string& key,
                                                     const std::string& value) {
  if (value.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "key-value store: the value of key ", QuoteForMessage(key), " has ", value.size(),
        " bytes, more than the ", options_.max_value_bytes, " a value may have"));
  }
  MutexLock l(&mu_);
  if (values_.count(key) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("key-value store: key ", QuoteForMessage(key), " already exists"));
  }
  if (values_.size() >= options_.max_keys ||
      store_bytes_ + key.size() + value.size() > options_.max_store_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "key-value store: inserting key ", QuoteForMessage(key), " would exceed the store's ",
        options_.max_keys, " keys or ", options_.max_store_bytes, " bytes (it holds ",
        values_.size(), " keys, ", store_bytes_, " bytes)"));
  }
  store_bytes_ += key.size() + value.size();
  values_.emplace(key, value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CoordinationServiceImpl::GetKeyValue(const std::string& key,
                                                                 absl::Duration timeout,
                                                                 const CallerGone& caller_gone) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock l(&mu_);
  if (AwaitLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return values_.count(key) > 0; }, deadline,
                  caller_gone)) {
    return values_.at(key);
  }
  const std::string what = absl::StrCat("get of key ", QuoteForMessage(key));
  if (!error_.ok() || stopped_) return AbortedCallLocked(what);
  if (absl::Now() < deadline) return CallerGoneError(what);
  return absl::DeadlineExceededError(absl::StrCat("key-value store: key ", QuoteForMessage(key),
                                                  " not inserted within ",
                                                  absl::FormatDuration(timeout)));
}

absl::Status CoordinationServiceImpl::ReportError(const std::string& task,
                                                  const absl::Status& error) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  if (error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task, " reported an OK status as an error"));
  }
  MutexLock l(&mu_);
  Task& t = tasks_[task];
  if (t.state == TaskState::kRegistered) t.state = TaskState::kFailed;
  SetErrorLocked(
      absl::Status(error.code(), absl::StrCat("task ", task, " failed: ", error.message())));
  return absl::OkStatus();
}

absl::Status CoordinationServiceImpl::PollForError(const std::string& task, absl::Duration timeout,
                                                   absl::Status* cluster_error,
                                                   const CallerGone& caller_gone) {
  *cluster_error = absl::OkStatus();
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock l(&mu_);
  AwaitLocked([] { return false; }, deadline, caller_gone);
  if (!error_.ok()) {
    *cluster_error = error_;
    return absl::OkStatus();
  }
  if (stopped_) return AbortedCallLocked("error poll");
  return absl::OkStatus();
}

absl::Status CoordinationServiceImpl::ShutdownTask(const std::string& task, absl::Duration timeout,
                                                   const CallerGone& caller_gone) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock l(&mu_);
  shutting_down_.insert(task);
  // Tasks that failed will never arrive; with the cluster in error the
  // barrier gives the error instead of waiting for them.
  auto all_arrived = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const std::string& name : options_.tasks) {
      if (shutting_down_.count(name) == 0 && tasks_[name].state != TaskState::kFailed) return false;
    }
    return true;
  };
  const bool passed = AwaitLocked(all_arrived, deadline, caller_gone);
  Task& t = tasks_[task];
  if (t.state != TaskState::kFailed) t.state = TaskState::kShutdown;
  if (passed) return absl::OkStatus();
  if (!error_.ok() || stopped_) return AbortedCallLocked(absl::StrCat("shutdown of ", task));
  if (absl::Now() < deadline) return CallerGoneError(absl::StrCat("shutdown of ", task));
  std::vector<std::string> missing;
  for (const std::string& name : options_.tasks) {
    if (shutting_down_.count(name) == 0) missing.push_back(name);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("shutdown barrier of ", task, " timed out after ", absl::FormatDuration(timeout),
                   ": ", missing.size(), " of ", options_.tasks.size(),
                   " tasks did not shut down: ", JoinAtMost(missing)));
}

// ---- gRPC handlers ----

namespace {

// A handler never blocks past its caller's deadline: the answer would be lost.
absl::Duration BoundedTimeout(const grpc::ServerContext* ctx, int64_t timeout_ms) {
  absl::Duration t = absl::Milliseconds(std::max<int64_t>(timeout_ms, 0));
  // No deadline reads as time_point::max(), a few centuries away.
  t = std::min(t, absl::FromChrono(ctx->deadline()) - absl::Now());
  return std::max(t, absl::ZeroDuration());
}

// A blocked handler gives its thread back once its caller is gone.
CallerGone CallerOf(grpc::ServerContext* ctx) {
  return [ctx] { return ctx->IsCancelled(); };
}

}  // namespace

grpc::Status CoordinationGrpcService::Authorize(const grpc::ServerContext& ctx,
                                                absl::string_view method,
                                                const google::protobuf::Message& request) {
  const absl::Status s = verifier_.Check(method, request, ctx);
  if (s.ok()) return grpc::Status::OK;
  // Logged where the server runs (the caller may be an outsider that never
  // reads its answer), at a bounded rate: a flood of refused calls must not
  // become a flood of log lines.
  constexpr int kLinesPerMinute = 20;
  MutexLock l(&log_mu_);
  const absl::Time now = absl::Now();
  if (now - log_window_start_ >= absl::Minutes(1)) {
    if (unlogged_ > 0) {
      std::fprintf(stderr,
                   "strata: coordination service on %s: %lld more refused calls not logged\n",
                   address_.c_str(), static_cast<long long>(unlogged_));
    }
    log_window_start_ = now;
    logged_in_window_ = 0;
    unlogged_ = 0;
  }
  if (logged_in_window_ < kLinesPerMinute) {
    ++logged_in_window_;
    // The task the call claims to come from, unverified but telling when a
    // task of the job was started with another token.
    std::string claimed;
    const google::protobuf::FieldDescriptor* task =
        request.GetDescriptor()->FindFieldByName("task");
    if (task != nullptr && task->type() == google::protobuf::FieldDescriptor::TYPE_STRING &&
        !task->is_repeated()) {
      claimed = absl::StrCat(" claiming to be task ",
                             QuoteForMessage(request.GetReflection()->GetString(request, task)));
    }
    std::fprintf(stderr, "strata: coordination service on %s: refused a call from %s%s: %s\n",
                 address_.c_str(), QuoteForMessage(ctx.peer()).c_str(), claimed.c_str(),
                 std::string(s.message()).c_str());
  } else {
    ++unlogged_;
  }
  return ToGrpcStatus(s);
}

grpc::Status CoordinationGrpcService::NotHosted() const {
  return ToGrpcStatus(absl::FailedPreconditionError(
      absl::StrCat("the server at ", address_,
                   " does not host the coordination service (the chief's server does)")));
}

grpc::Status CoordinationGrpcService::RegisterTask(grpc::ServerContext* ctx,
                                                   const RegisterTaskRequest* req,
                                                   RegisterTaskResponse* resp) {
  if (grpc::Status a = Authorize(*ctx, "RegisterTask", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  absl::Duration timeout = absl::ZeroDuration();
  if (req->timeout_ms() > 0) {
    timeout = std::max(BoundedTimeout(ctx, req->timeout_ms()), absl::Milliseconds(1));
  }
  absl::StatusOr<RegisterResult> r = impl_->RegisterTask(
      req->task(), req->incarnation(), {req->devices().begin(), req->devices().end()},
      req->cluster_fingerprint(), timeout, CallerOf(ctx));
  if (!r.ok()) return ToGrpcStatus(r.status());
  for (std::string& d : r->devices) resp->add_devices(std::move(d));
  for (std::string& t : r->tasks) resp->add_tasks(std::move(t));
  resp->set_service_task(r->service_task);
  resp->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(r->heartbeat_timeout));
  return grpc::Status::OK;
}

grpc::Status CoordinationGrpcService::Heartbeat(grpc::ServerContext* ctx,
                                                const HeartbeatRequest* req, HeartbeatResponse*) {
  if (grpc::Status a = Authorize(*ctx, "Heartbeat", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  return ToGrpcStatus(impl_->Heartbeat(req->task(), req->incarnation()));
}

grpc::Status CoordinationGrpcService::WaitForBarrier(grpc::ServerContext* ctx,
                                                     const WaitForBarrierRequest* req,
                                                     WaitForBarrierResponse*) {
  if (grpc::Status a = Authorize(*ctx, "WaitForBarrier", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  return ToGrpcStatus(
      impl_->WaitForBarrier(req->barrier_id(), req->task(), BoundedTimeout(ctx, req->timeout_ms()),
                            {req->tasks().begin(), req->tasks().end()}, CallerOf(ctx)));
}

grpc::Status CoordinationGrpcService::InsertKeyValue(grpc::ServerContext* ctx,
                                                     const InsertKeyValueRequest* req,
                                                     InsertKeyValueResponse*) {
  if (grpc::Status a = Authorize(*ctx, "InsertKeyValue", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  return ToGrpcStatus(impl_->InsertKeyValue(req->key(), req->value()));
}

grpc::Status CoordinationGrpcService::GetKeyValue(grpc::ServerContext* ctx,
                                                  const GetKeyValueRequest* req,
                                                  GetKeyValueResponse* resp) {
  if (grpc::Status a = Authorize(*ctx, "GetKeyValue", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  absl::StatusOr<std::string> v =
      impl_->GetKeyValue(req->key(), BoundedTimeout(ctx, req->timeout_ms()), CallerOf(ctx));
  if (!v.ok()) return ToGrpcStatus(v.status());
  resp->set_value(std::move(*v));
  return grpc::Status::OK;
}

grpc::Status CoordinationGrpcService::ReportError(grpc::ServerContext* ctx,
                                                  const ReportErrorRequest* req,
                                                  ReportErrorResponse*) {
  if (grpc::Status a = Authorize(*ctx, "ReportError", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  if (req->code() <= 0 || req->code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("task ", req->task(), " reported an error with invalid code ", req->code())));
  }
  return ToGrpcStatus(impl_->ReportError(
      req->task(), absl::Status(static_cast<absl::StatusCode>(req->code()), req->message())));
}

grpc::Status CoordinationGrpcService::PollForError(grpc::ServerContext* ctx,
                                                   const PollForErrorRequest* req,
                                                   PollForErrorResponse* resp) {
  if (grpc::Status a = Authorize(*ctx, "PollForError", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  absl::Status e;
  const absl::Status s =
      impl_->PollForError(req->task(), BoundedTimeout(ctx, req->timeout_ms()), &e, CallerOf(ctx));
  if (!s.ok()) return ToGrpcStatus(s);
  if (!e.ok()) {
    resp->set_has_error(true);
    resp->set_code(static_cast<int>(e.code()));
    resp->set_message(std::string(e.message()));
  }
  return grpc::Status::OK;
}

grpc::Status CoordinationGrpcService::ShutdownTask(grpc::ServerContext* ctx,
                                                   const ShutdownTaskRequest* req,
                                                   ShutdownTaskResponse*) {
  if (grpc::Status a = Authorize(*ctx, "ShutdownTask", *req); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  return ToGrpcStatus(
      impl_->ShutdownTask(req->task(), BoundedTimeout(ctx, req->timeout_ms()), CallerOf(ctx)));
}

}  // namespace strata
