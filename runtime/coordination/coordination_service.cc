#include "runtime/coordination/coordination_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/quote.h"
#include "base/status.h"
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
    : options_(std::move(options)), env_(EnvOrDefault(options_.env)) {
  max_waiting_calls_ = options_.max_waiting_calls > 0 ? options_.max_waiting_calls
                                                      : 64 * options_.tasks.size() + 1024;
  {
    MutexLock l(&mu_);
    for (const std::string& t : options_.tasks) tasks_[t];
  }
  timer_ = std::thread([this] { TimerLoop(); });
}

CoordinationServiceImpl::~CoordinationServiceImpl() { Stop(); }

void CoordinationServiceImpl::Stop() {
  Runnables run;
  {
    MutexLock l(&mu_);
    stopped_ = true;
    WakeLocked(&run);
  }
  RunAll(run);
  if (timer_.joinable()) timer_.join();
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

// ---- Waits ----

WaitId CoordinationServiceImpl::StartWaitLocked(Waiter w, Runnables* run) {
  WaitEnd end;
  if (w.ready()) {
    end = WaitEnd::kReady;
  } else if (!error_.ok() || stopped_) {
    end = WaitEnd::kAborted;
  } else if (env_->Now() >= w.deadline) {
    end = WaitEnd::kDeadline;
  } else if (waiters_.size() >= max_waiting_calls_) {
    end = WaitEnd::kRefused;
  } else {
    const WaitId id = next_wait_id_++;
    waiters_.emplace(id, std::move(w));
    timer_changed_ = true;
    return id;
  }
  run->push_back(w.finish(end));
  return kNoWait;
}

void CoordinationServiceImpl::WakeLocked(Runnables* run) {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      WaitEnd end;
      if (it->second.ready()) {
        end = WaitEnd::kReady;
      } else if (!error_.ok() || stopped_) {
        end = WaitEnd::kAborted;
      } else {
        ++it;
        continue;
      }
      Waiter w = std::move(it->second);
      it = waiters_.erase(it);
      run->push_back(w.finish(end));
      changed = true;
    }
  }
}

void CoordinationServiceImpl::ExpireLocked(absl::Time now, Runnables* run) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    Waiter w = std::move(it->second);
    it = waiters_.erase(it);
    run->push_back(w.finish(WaitEnd::kDeadline));
  }
  // A barrier's timeout readies the barrier's other waiters.
  WakeLocked(run);
}

void CoordinationServiceImpl::RunAll(Runnables& run) {
  for (auto& r : run) r();
  run.clear();
}

void CoordinationServiceImpl::CancelWait(WaitId id) {
  Runnables run;
  {
    MutexLock l(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    Waiter w = std::move(it->second);
    waiters_.erase(it);
    run.push_back(w.finish(WaitEnd::kCancelled));
    WakeLocked(&run);
  }
  RunAll(run);
}

template <typename T>
T CoordinationServiceImpl::Block(const std::function<WaitId(std::function<void(T)>)>& start,
                                 const CallerGone& caller_gone) {
  // Shared with `done`, which may run on another thread after this returns
  // (it touches the state last, and the state outlives both).
  struct State {
    Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;
    std::optional<T> result ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>();
  const WaitId id = start([state](T r) {
    MutexLock l(&state->mu);
    state->result.emplace(std::move(r));
    state->finished = true;
  });
  MutexLock l(&state->mu);
  auto finished = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state->finished; };
  while (!finished()) {
    if (!caller_gone) {
      state->mu.Await(finished);
      break;
    }
    if (state->mu.AwaitWithTimeout(finished, kCallerCheckPeriod)) break;
    if (caller_gone()) {
      state->mu.Unlock();
      CancelWait(id);
      state->mu.Lock();
    }
  }
  return *std::move(state->result);
}

void CoordinationServiceImpl::TimerLoop() {
  const absl::Duration period =
      std::min(absl::Seconds(1), std::max(absl::Milliseconds(10), options_.heartbeat_timeout / 10));
  absl::Time next_check = env_->Now() + period;
  mu_.Lock();
  while (!stopped_) {
    absl::Time wake = next_check;
    for (const auto& [id, w] : waiters_) wake = std::min(wake, w.deadline);
    timer_changed_ = false;
    mu_.AwaitWithTimeout([&]()
                             ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopped_ || timer_changed_; },
                         std::max(wake - env_->Now(), absl::ZeroDuration()));
    if (stopped_) break;
    Runnables run;
    const absl::Time now = env_->Now();
    if (now >= next_check) {
      CheckHeartbeatsLocked(now);
      next_check = now + period;
    }
    ExpireLocked(now, &run);
    if (!run.empty()) {
      mu_.Unlock();
      RunAll(run);
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

void CoordinationServiceImpl::CheckHeartbeatsLocked(absl::Time now) {
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
  // (ExpireLocked, next, wakes the waits the error ends.)
}

absl::Status CoordinationServiceImpl::CallerGoneError(const std::string& what) {
  return absl::CancelledError(absl::StrCat(what, ": the caller went away"));
}

int CoordinationServiceImpl::blocked_calls() const {
  MutexLock l(&mu_);
  return static_cast<int>(waiters_.size());
}

absl::Status CoordinationServiceImpl::AbortedCallLocked(const std::string& what) const {
  if (stopped_) {
    return absl::UnavailableError(
        absl::StrCat(what, ": the coordination service on ", options_.service_task, " stopped"));
  }
  return absl::Status(error_.code(), absl::StrCat(what, " aborted: ", error_.message()));
}

absl::Status CoordinationServiceImpl::EndedLocked(WaitEnd end, const std::string& what) const {
  if (end == WaitEnd::kRefused) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": the coordination service on ", options_.service_task, " has ",
                     max_waiting_calls_, " calls waiting already, its limit"));
  }
  if (!error_.ok() || stopped_) return AbortedCallLocked(what);
  return CallerGoneError(what);
}

bool CoordinationServiceImpl::AllRegisteredLocked() const {
  for (const auto& [name, t] : tasks_) {
    if (t.state == TaskState::kUnregistered) return false;
  }
  return true;
}

// ---- The calls ----

absl::StatusOr<RegisterResult> CoordinationServiceImpl::RegisterTask(
    const std::string& task, uint64_t incarnation, const std::vector<std::string>& devices,
    const std::string& cluster_fingerprint, absl::Duration timeout, const CallerGone& caller_gone) {
  return Block<absl::StatusOr<RegisterResult>>(
      [&](std::function<void(absl::StatusOr<RegisterResult>)> done) {
        return RegisterTaskAsync(task, incarnation, devices, cluster_fingerprint, timeout,
                                 std::move(done));
      },
      caller_gone);
}

WaitId CoordinationServiceImpl::RegisterTaskAsync(
    const std::string& task, uint64_t incarnation, const std::vector<std::string>& devices,
    const std::string& cluster_fingerprint, absl::Duration timeout,
    std::function<void(absl::StatusOr<RegisterResult>)> done) {
  if (absl::Status s = CheckTask(task); !s.ok()) {
    done(s);
    return kNoWait;
  }
  if (timeout <= absl::ZeroDuration()) timeout = options_.register_timeout;
  const absl::Time deadline = env_->Now() + timeout;
  Runnables run;
  WaitId id = kNoWait;
  {
    MutexLock l(&mu_);
    absl::Status refused = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
      if (!options_.cluster_fingerprint.empty() &&
          cluster_fingerprint != options_.cluster_fingerprint) {
        // Put out as the cluster's error too: tasks whose specs disagree
        // must all fail fast, not wait for a registration that cannot
        // complete.
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
          absl::Status err = absl::AbortedError(absl::StrCat(
              "task ", task, " restarted (incarnation ", t.incarnation, " -> ", incarnation, ")"));
          t.state = TaskState::kFailed;
          SetErrorLocked(err);
          return err;
        }
        // Before the cluster started nothing depends on the old process:
        // the new one simply takes its place.
      }
      if (t.state == TaskState::kFailed || t.state == TaskState::kShutdown) {
        return absl::FailedPreconditionError(
            absl::StrCat("task ", task, " registered after it ",
                         t.state == TaskState::kFailed ? "failed" : "shut down"));
      }
      t.state = TaskState::kRegistered;
      t.incarnation = incarnation;
      t.devices = devices;
      t.last_heartbeat = env_->Now();
      if (AllRegisteredLocked()) {
        // Heartbeats are judged from the start on: a task waiting here sends
        // none (its client starts beating when registration returns), so a
        // clock started at its own registration would call an early task
        // lost while it waits for a late one.
        started_ = true;
        const absl::Time now = env_->Now();
        for (auto& [name, other] : tasks_) other.last_heartbeat = now;
      }
      return absl::OkStatus();
    }();
    if (!refused.ok()) {
      WakeLocked(&run);  // the cluster's error (if it became one) ends the others' waits
      run.push_back([done, refused] { done(refused); });
    } else {
      Waiter w;
      w.ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return started_; };
      w.deadline = deadline;
      w.finish = [this, task, timeout, done](WaitEnd end)
                     ABSL_NO_THREAD_SAFETY_ANALYSIS -> std::function<void()> {
        const std::string what = absl::StrCat("registration of ", task);
        absl::StatusOr<RegisterResult> r;
        if (end == WaitEnd::kReady) {
          RegisterResult result;
          for (const std::string& name : options_.tasks) {
            const Task& other = tasks_[name];
            result.devices.insert(result.devices.end(), other.devices.begin(), other.devices.end());
          }
          result.tasks = options_.tasks;
          result.service_task = options_.service_task;
          result.heartbeat_timeout = options_.heartbeat_timeout;
          r = std::move(result);
        } else if (end == WaitEnd::kDeadline && error_.ok() && !stopped_) {
          std::vector<std::string> missing;
          for (const std::string& name : options_.tasks) {
            if (tasks_[name].state == TaskState::kUnregistered) missing.push_back(name);
          }
          r = absl::DeadlineExceededError(absl::StrCat(
              what, " timed out after ", absl::FormatDuration(timeout), ": ", missing.size(),
              " of ", options_.tasks.size(), " tasks never registered: ", JoinAtMost(missing)));
        } else {
          r = EndedLocked(end, what);
        }
        return [done, r = std::move(r)] { done(r); };
      };
      id = StartWaitLocked(std::move(w), &run);
      WakeLocked(&run);  // this registration may have been the last one
    }
  }
  RunAll(run);
  return id;
}

absl::Status CoordinationServiceImpl::Heartbeat(const std::string& task, uint64_t incarnation) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  Runnables run;
  absl::Status s;
  {
    MutexLock l(&mu_);
    s = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
      Task& t = tasks_[task];
      switch (t.state) {
        case TaskState::kUnregistered:
          return absl::FailedPreconditionError(
              absl::StrCat("heartbeat from task ", task, ", which has not registered"));
        case TaskState::kFailed:
          return absl::FailedPreconditionError(absl::StrCat(
              "heartbeat from task ", task, ", which has already failed: ", error_.message()));
        case TaskState::kShutdown:
          // Sent before the task had the shutdown barrier's answer (it stops
          // its heartbeats once it has): on its way out, not in error.
          // Failing it made the task's client abort its own passing
          // ShutdownTask.
          if (t.incarnation == incarnation) return absl::OkStatus();
          return absl::FailedPreconditionError(
              absl::StrCat("heartbeat from task ", task, ", which has shut down"));
        case TaskState::kRegistered:
          break;
      }
      if (t.incarnation != incarnation) {
        absl::Status err = absl::AbortedError(absl::StrCat(
            "task ", task, " restarted (incarnation ", t.incarnation, " -> ", incarnation, ")"));
        if (started_) {
          t.state = TaskState::kFailed;
          SetErrorLocked(err);
        }
        return err;
      }
      t.last_heartbeat = env_->Now();
      return absl::OkStatus();
    }();
    WakeLocked(&run);
  }
  RunAll(run);
  return s;
}

absl::Status CoordinationServiceImpl::WaitForBarrier(const std::string& barrier_id,
                                                     const std::string& task,
                                                     absl::Duration timeout,
                                                     std::vector<std::string> participants,
                                                     const CallerGone& caller_gone) {
  return Block<absl::Status>(
      [&](std::function<void(absl::Status)> done) {
        return WaitForBarrierAsync(barrier_id, task, timeout, participants, std::move(done));
      },
      caller_gone);
}

WaitId CoordinationServiceImpl::WaitForBarrierAsync(const std::string& barrier_id,
                                                    const std::string& task, absl::Duration timeout,
                                                    std::vector<std::string> participants,
                                                    std::function<void(absl::Status)> done) {
  const std::string what = absl::StrCat("barrier '", barrier_id, "'");
  absl::Status invalid = CheckTask(task);
  if (participants.empty()) participants = options_.tasks;
  for (const std::string& p : participants) {
    if (invalid.ok()) invalid = CheckTask(p);
  }
  const std::set<std::string> wanted(participants.begin(), participants.end());
  if (invalid.ok() && wanted.count(task) == 0) {
    invalid = absl::InvalidArgumentError(absl::StrCat(
        what, ": task ", task, " is not one of its tasks (", JoinAtMost(participants), ")"));
  }
  if (!invalid.ok()) {
    done(invalid);
    return kNoWait;
  }
  Runnables run;
  WaitId id = kNoWait;
  {
    MutexLock l(&mu_);
    absl::Status immediate;
    bool answered = false;
    if (!error_.ok() || stopped_) {
      immediate = AbortedCallLocked(what);
      answered = true;
    } else {
      auto [it, created] = barriers_.try_emplace(barrier_id);
      Barrier& b = it->second;
      if (created) {
        b.participants = wanted;
        b.deadline = absl::InfiniteFuture();
      } else if (b.participants != wanted) {
        immediate = absl::InvalidArgumentError(
            absl::StrCat(what, ": task ", task, " expects tasks {", JoinAtMost(participants),
                         "} but it was started with {",
                         JoinAtMost({b.participants.begin(), b.participants.end()}), "}"));
        answered = true;
      }
      if (!answered && b.done) {
        immediate = b.result;
        answered = true;
      }
      if (!answered) {
        // The earliest deadline of the arrivals: a task that gives up fails
        // the barrier for all, so that every task sees the same outcome.
        b.deadline = std::min(b.deadline, env_->Now() + timeout);
        b.arrived.insert(task);
        if (b.arrived.size() == b.participants.size()) b.done = true;
        Waiter w;
        w.ready = [this, barrier_id]()
                      ABSL_NO_THREAD_SAFETY_ANALYSIS { return barriers_[barrier_id].done; };
        w.deadline = b.deadline;
        w.finish = [this, barrier_id, what, done](WaitEnd end)
                       ABSL_NO_THREAD_SAFETY_ANALYSIS -> std::function<void()> {
          Barrier& b = barriers_[barrier_id];
          absl::Status r;
          if (end == WaitEnd::kReady) {
            r = b.result;
          } else if (end == WaitEnd::kDeadline && error_.ok() && !stopped_) {
            std::vector<std::string> missing;
            for (const std::string& p : b.participants) {
              if (b.arrived.count(p) == 0) missing.push_back(p);
            }
            b.done = true;
            b.result = absl::DeadlineExceededError(
                absl::StrCat(what, " timed out: ", missing.size(), " of ", b.participants.size(),
                             " tasks did not arrive: ", JoinAtMost(missing)));
            r = b.result;
          } else {
            // Gone before the deadline: the others still wait (the task
            // arrived).
            r = EndedLocked(end, what);
          }
          return [done, r] { done(r); };
        };
        id = StartWaitLocked(std::move(w), &run);
        WakeLocked(&run);  // the last arrival readies the others
      }
    }
    if (answered) run.push_back([done, immediate] { done(immediate); });
  }
  RunAll(run);
  return id;
}

absl::Status CoordinationServiceImpl::InsertKeyValue(const std::string& key,
                                                     const std::string& value) {
  if (value.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "key-value store: the value of key ", QuoteForMessage(key), " has ", value.size(),
        " bytes, more than the ", options_.max_value_bytes, " a value may have"));
  }
  Runnables run;
  {
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
    WakeLocked(&run);
  }
  RunAll(run);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CoordinationServiceImpl::PeekKeyValue(const std::string& key) const {
  MutexLock l(&mu_);
  auto it = values_.find(key);
  if (it == values_.end()) {
    return absl::NotFoundError(absl::StrCat("key-value store: no key ", QuoteForMessage(key)));
  }
  return it->second;
}

absl::StatusOr<std::string> CoordinationServiceImpl::GetKeyValue(const std::string& key,
                                                                 absl::Duration timeout,
                                                                 const CallerGone& caller_gone) {
  return Block<absl::StatusOr<std::string>>(
      [&](std::function<void(absl::StatusOr<std::string>)> done) {
        return GetKeyValueAsync(key, timeout, std::move(done));
      },
      caller_gone);
}

WaitId CoordinationServiceImpl::GetKeyValueAsync(
    const std::string& key, absl::Duration timeout,
    std::function<void(absl::StatusOr<std::string>)> done) {
  Runnables run;
  WaitId id;
  {
    MutexLock l(&mu_);
    Waiter w;
    w.ready = [this, key]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return values_.count(key) > 0; };
    w.deadline = env_->Now() + timeout;
    w.finish = [this, key, timeout, done](WaitEnd end)
                   ABSL_NO_THREAD_SAFETY_ANALYSIS -> std::function<void()> {
      absl::StatusOr<std::string> r;
      if (end == WaitEnd::kReady) {
        r = values_.at(key);
      } else if (end == WaitEnd::kDeadline && error_.ok() && !stopped_) {
        r = absl::DeadlineExceededError(absl::StrCat("key-value store: key ", QuoteForMessage(key),
                                                     " not inserted within ",
                                                     absl::FormatDuration(timeout)));
      } else {
        r = EndedLocked(end, absl::StrCat("get of key ", QuoteForMessage(key)));
      }
      return [done, r = std::move(r)] { done(r); };
    };
    id = StartWaitLocked(std::move(w), &run);
  }
  RunAll(run);
  return id;
}

absl::Status CoordinationServiceImpl::ReportError(const std::string& task,
                                                  const absl::Status& error) {
  STRATA_RETURN_IF_ERROR(CheckTask(task));
  if (error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task, " reported an OK status as an error"));
  }
  Runnables run;
  {
    MutexLock l(&mu_);
    Task& t = tasks_[task];
    if (t.state == TaskState::kRegistered) t.state = TaskState::kFailed;
    SetErrorLocked(
        absl::Status(error.code(), absl::StrCat("task ", task, " failed: ", error.message())));
    WakeLocked(&run);
  }
  RunAll(run);
  return absl::OkStatus();
}

absl::Status CoordinationServiceImpl::PollForError(const std::string& task, absl::Duration timeout,
                                                   absl::Status* cluster_error,
                                                   const CallerGone& caller_gone) {
  PollResult r = Block<PollResult>(
      [&](std::function<void(PollResult)> done) {
        return PollForErrorAsync(task, timeout, std::move(done));
      },
      caller_gone);
  *cluster_error = r.cluster_error;
  return r.poll;
}

WaitId CoordinationServiceImpl::PollForErrorAsync(const std::string& task, absl::Duration timeout,
                                                  std::function<void(PollResult)> done) {
  if (absl::Status s = CheckTask(task); !s.ok()) {
    done(PollResult{s, absl::OkStatus()});
    return kNoWait;
  }
  Runnables run;
  WaitId id;
  {
    MutexLock l(&mu_);
    Waiter w;
    w.ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !error_.ok(); };
    w.deadline = env_->Now() + timeout;
    w.finish = [this, done](WaitEnd end) ABSL_NO_THREAD_SAFETY_ANALYSIS -> std::function<void()> {
      PollResult r;
      if (!error_.ok()) {
        r.cluster_error = error_;
      } else if (stopped_) {
        r.poll = AbortedCallLocked("error poll");
      } else if (end == WaitEnd::kRefused) {
        r.poll = EndedLocked(end, "error poll");
      }
      return [done, r] { done(r); };
    };
    id = StartWaitLocked(std::move(w), &run);
  }
  RunAll(run);
  return id;
}

absl::Status CoordinationServiceImpl::ShutdownTask(const std::string& task, absl::Duration timeout,
                                                   const CallerGone& caller_gone) {
  return Block<absl::Status>(
      [&](std::function<void(absl::Status)> done) {
        return ShutdownTaskAsync(task, timeout, std::move(done));
      },
      caller_gone);
}

WaitId CoordinationServiceImpl::ShutdownTaskAsync(const std::string& task, absl::Duration timeout,
                                                  std::function<void(absl::Status)> done) {
  if (absl::Status s = CheckTask(task); !s.ok()) {
    done(s);
    return kNoWait;
  }
  Runnables run;
  WaitId id;
  {
    MutexLock l(&mu_);
    shutting_down_.insert(task);
    Waiter w;
    // Tasks that failed will never arrive; with the cluster in error the
    // barrier gives the error instead of waiting for them.
    w.ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (const std::string& name : options_.tasks) {
        if (shutting_down_.count(name) == 0 && tasks_[name].state != TaskState::kFailed) {
          return false;
        }
      }
      return true;
    };
    w.deadline = env_->Now() + timeout;
    w.finish = [this, task, timeout, done](WaitEnd end)
                   ABSL_NO_THREAD_SAFETY_ANALYSIS -> std::function<void()> {
      Task& t = tasks_[task];
      if (t.state != TaskState::kFailed) t.state = TaskState::kShutdown;
      const std::string what = absl::StrCat("shutdown of ", task);
      absl::Status r;
      if (end == WaitEnd::kReady) {
        r = absl::OkStatus();
      } else if (end == WaitEnd::kDeadline && error_.ok() && !stopped_) {
        std::vector<std::string> missing;
        for (const std::string& name : options_.tasks) {
          if (shutting_down_.count(name) == 0) missing.push_back(name);
        }
        r = absl::DeadlineExceededError(
            absl::StrCat("shutdown barrier of ", task, " timed out after ",
                         absl::FormatDuration(timeout), ": ", missing.size(), " of ",
                         options_.tasks.size(), " tasks did not shut down: ", JoinAtMost(missing)));
      } else {
        r = EndedLocked(end, what);
      }
      return [done, r] { done(r); };
    };
    id = StartWaitLocked(std::move(w), &run);
    WakeLocked(&run);  // this arrival may complete the others' barrier
  }
  RunAll(run);
  return id;
}

}  // namespace strata
