#include "runtime/coordination/coordination_client.h"

#include <grpc/grpc.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/coordination/coordination_service.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/rpc_auth.h"

namespace strata {
namespace {

// Added to an RPC's deadline beyond the server-side timeout it carries, so
// that the server's answer (naming the key, barrier or tasks) arrives before
// the transport gives up.
constexpr absl::Duration kRpcSlack = absl::Seconds(2);

int64_t ToMs(absl::Duration d) { return std::max<int64_t>(0, absl::ToInt64Milliseconds(d)); }

uint64_t RandomIncarnation() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  uint64_t v = 0;
  while (v == 0) v = gen();
  return v;
}

// Codes gRPC itself produces when the peer cannot be reached in time.
bool IsTransportFailure(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
         code == absl::StatusCode::kCancelled;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinationClient>> CoordinationClient::Connect(
    CoordinationClientOptions options) {
  if (options.service_address.empty()) {
    return absl::InvalidArgumentError(
        "coordination client: no service address (the chief's host:port)");
  }
  if (options.task.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordination client for ", options.service_address, ": no task name"));
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("coordination client of ", options.task,
                                                   ": max_message_bytes must be positive"));
  }
  if (options.incarnation == 0) options.incarnation = RandomIncarnation();
  return std::unique_ptr<CoordinationClient>(new CoordinationClient(std::move(options)));
}

CoordinationClient::CoordinationClient(CoordinationClientOptions options)
    : options_(std::move(options)) {
  // Tasks start in any order: while the chief is not up yet, DialTask's
  // channel reconnects often.
  channel_ = DialTask(options_.service_address, options_.tls, options_.max_message_bytes);
  stub_ = CoordinationService::NewStub(channel_);
  MutexLock l(&mu_);
  service_task_ = options_.service_task;
}

CoordinationClient::~CoordinationClient() { Stop(); }

std::string CoordinationClient::ServiceTaskName() const {
  MutexLock l(&mu_);
  return service_task_.empty() ? std::string("the chief")
                               : absl::StrCat("chief task ", service_task_);
}

absl::Status CoordinationClient::Annotate(const std::string& what, const absl::Status& s) const {
  return AnnotateStatus(
      s, absl::StrCat(what, " (coordination service at ", options_.service_address, "): "));
}

template <typename Method, typename Request, typename Response>
absl::Status CoordinationClient::Call(Method method, absl::string_view rpc, const std::string& what,
                                      const Request& request, Response* response,
                                      absl::Duration rpc_timeout, bool blocking) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + std::max(rpc_timeout, absl::Milliseconds(1))));
  if (options_.job_token.has_value()) SignRpc(*options_.job_token, rpc, request, &ctx);
  {
    MutexLock l(&mu_);
    if (stopping_) {
      return absl::CancelledError(
          absl::StrCat(what, ": coordination client of ", options_.task, " stopped"));
    }
    in_flight_.emplace(&ctx, blocking);
  }
  const grpc::Status s = (stub_.get()->*method)(&ctx, request, response);
  MutexLock l(&mu_);
  in_flight_.erase(&ctx);
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::CANCELLED) {
    // We cancelled it: the client stopped or learned of the cluster's error.
    if (!error_.ok() && blocking) return AnnotateStatus(error_, absl::StrCat(what, " aborted: "));
    if (stopping_) {
      return absl::CancelledError(
          absl::StrCat(what, ": coordination client of ", options_.task, " stopped"));
    }
  }
  return Annotate(what, FromGrpcStatus(s));
}

absl::StatusOr<std::vector<std::string>> CoordinationClient::Register() {
  {
    MutexLock l(&mu_);
    if (registered_) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", options_.task, " registered twice"));
    }
  }
  RegisterTaskRequest req;
  req.set_task(options_.task);
  req.set_incarnation(options_.incarnation);
  for (const std::string& d : options_.devices) req.add_devices(d);
  req.set_cluster_fingerprint(options_.cluster_fingerprint);
  RegisterTaskResponse resp;
  const absl::Time deadline = absl::Now() + options_.register_timeout;
  absl::Status last;
  while (true) {
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("registration of ", options_.task, " timed out after ",
                       absl::FormatDuration(options_.register_timeout), ": ", ServiceTaskName(),
                       " was not reachable; last error: ", last.message()));
    }
    // The server answers (naming the tasks that never registered) a little
    // before the RPC's own deadline.
    req.set_timeout_ms(
        std::max<int64_t>(1, ToMs(remaining - std::min(remaining / 10, absl::Seconds(1)))));
    last = Call(&CoordinationService::Stub::RegisterTask, "RegisterTask", "RegisterTask", req,
                &resp, remaining,
                /*blocking=*/true);
    if (last.ok()) break;
    // Unavailable: the chief is not up yet (or restarting its server); the
    // service has no other reason to answer so before it registered us.
    if (last.code() != absl::StatusCode::kUnavailable) return last;
    {
      MutexLock l(&mu_);
      if (stopping_) return last;
    }
    SleepFor(std::min(absl::Milliseconds(100), remaining));
  }
  {
    MutexLock l(&mu_);
    registered_ = true;
    if (service_task_.empty()) service_task_ = resp.service_task();
    if (resp.heartbeat_timeout_ms() > 0)
      heartbeat_timeout_ = absl::Milliseconds(resp.heartbeat_timeout_ms());
    heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
    poll_thread_ = std::thread([this] { PollLoop(); });
  }
  return std::vector<std::string>(resp.devices().begin(), resp.devices().end());
}

bool CoordinationClient::SleepFor(absl::Duration d) {
  MutexLock l(&mu_);
  return !mu_.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; }, d);
}

void CoordinationClient::HeartbeatLoop() {
  absl::Duration timeout, interval;
  {
    MutexLock l(&mu_);
    timeout = heartbeat_timeout_;
  }
  interval = options_.heartbeat_interval > absl::ZeroDuration() ? options_.heartbeat_interval
                                                                : timeout / 5;
  HeartbeatRequest req;
  req.set_task(options_.task);
  req.set_incarnation(options_.incarnation);
  absl::Time last_ok = absl::Now();
  while (SleepFor(interval)) {
    {
      MutexLock l(&mu_);
      if (heartbeats_paused_) continue;
    }
    HeartbeatResponse resp;
    const absl::Status s = Call(&CoordinationService::Stub::Heartbeat, "Heartbeat", "Heartbeat",
                                req, &resp, std::max(interval, timeout / 2), /*blocking=*/false);
    if (s.ok()) {
      last_ok = absl::Now();
      continue;
    }
    if (!IsTransportFailure(s.code())) {
      // The service answered: this task was declared lost or restarted.
      SetError(s);
      continue;
    }
    if (absl::Now() - last_ok > timeout) {
      SetError(absl::UnavailableError(
          absl::StrCat(ServiceTaskName(), " lost: the coordination service at ",
                       options_.service_address, " has not answered heartbeats of ", options_.task,
                       " for ", absl::FormatDuration(timeout), " (", s.message(), ")")));
    }
  }
}

void CoordinationClient::PollLoop() {
  absl::Duration window;
  {
    MutexLock l(&mu_);
    window = std::clamp(heartbeat_timeout_, absl::Seconds(1), absl::Seconds(5));
  }
  PollForErrorRequest req;
  req.set_task(options_.task);
  req.set_timeout_ms(ToMs(window));
  while (true) {
    PollForErrorResponse resp;
    const absl::Status s = Call(&CoordinationService::Stub::PollForError, "PollForError",
                                "PollForError", req, &resp, window + kRpcSlack, /*blocking=*/false);
    if (s.ok() && resp.has_error()) {
      absl::StatusCode code = static_cast<absl::StatusCode>(resp.code());
      if (resp.code() <= 0 || resp.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
        code = absl::StatusCode::kUnknown;
      }
      SetError(absl::Status(code, resp.message()));
      return;
    }
    // A failed poll is not an error of its own: an unreachable chief is the
    // heartbeat thread's to judge, after the heartbeat timeout.
    if (!s.ok() && !SleepFor(absl::Milliseconds(200))) return;
    MutexLock l(&mu_);
    if (stopping_ || !error_.ok()) return;
  }
}

void CoordinationClient::SetError(absl::Status error) {
  std::function<void(absl::Status)> callback;
  {
    MutexLock l(&mu_);
    if (!error_.ok() || stopping_) return;
    error_ = error;
    // Calls blocked on the chief return the error now, not at their timeout.
    for (const auto& [ctx, blocking] : in_flight_) {
      if (blocking) ctx->TryCancel();
    }
    if (callback_) {
      callback = callback_;
      error_delivered_ = true;
    }
  }
  if (callback) callback(std::move(error));
}

void CoordinationClient::SetErrorCallback(std::function<void(absl::Status)> callback) {
  absl::Status run_now;
  {
    MutexLock l(&mu_);
    callback_ = callback;
    if (!error_.ok() && !error_delivered_) {
      error_delivered_ = true;
      run_now = error_;
    }
  }
  if (!run_now.ok() && callback) callback(run_now);
}

absl::Status CoordinationClient::error() const {
  MutexLock l(&mu_);
  return error_;
}

void CoordinationClient::PauseHeartbeatsForTest() {
  MutexLock l(&mu_);
  heartbeats_paused_ = true;
}

absl::Status CoordinationClient::ReportError(const absl::Status& error) {
  if (error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", options_.task, ": ReportError needs an error, not OK"));
  }
  ReportErrorRequest req;
  req.set_task(options_.task);
  req.set_code(static_cast<int>(error.code()));
  req.set_message(std::string(error.message()));
  ReportErrorResponse resp;
  return Call(&CoordinationService::Stub::ReportError, "ReportError", "ReportError", req, &resp,
              absl::Seconds(10),
              /*blocking=*/false);
}

absl::Status CoordinationClient::WaitForBarrier(const std::string& id, absl::Duration timeout,
                                                const std::vector<std::string>& tasks) {
  {
    MutexLock l(&mu_);
    if (!error_.ok()) return AnnotateStatus(error_, absl::StrCat("barrier '", id, "' aborted: "));
  }
  WaitForBarrierRequest req;
  req.set_barrier_id(id);
  req.set_task(options_.task);
  req.set_timeout_ms(ToMs(timeout));
  for (const std::string& t : tasks) req.add_tasks(t);
  WaitForBarrierResponse resp;
  return Call(&CoordinationService::Stub::WaitForBarrier, "WaitForBarrier",
              absl::StrCat("barrier '", id, "'"), req, &resp, timeout + kRpcSlack,
              /*blocking=*/true);
}

absl::Status CoordinationClient::Shutdown(absl::Duration timeout) {
  absl::Status s;
  bool registered;
  {
    MutexLock l(&mu_);
    registered = registered_;
    if (!error_.ok()) s = AnnotateStatus(error_, "shutdown aborted: ");
  }
  if (!registered) {
    s = absl::FailedPreconditionError(
        absl::StrCat("shutdown of ", options_.task, ": the task never registered"));
  } else if (s.ok()) {
    ShutdownTaskRequest req;
    req.set_task(options_.task);
    req.set_timeout_ms(ToMs(timeout));
    ShutdownTaskResponse resp;
    s = Call(&CoordinationService::Stub::ShutdownTask, "ShutdownTask", "ShutdownTask", req, &resp,
             timeout + kRpcSlack, /*blocking=*/true);
  }
  Stop();
  return s;
}

absl::Status CoordinationClient::Insert(const std::string& key, const std::string& value) {
  InsertKeyValueRequest req;
  req.set_key(key);
  req.set_value(value);
  InsertKeyValueResponse resp;
  return Call(&CoordinationService::Stub::InsertKeyValue, "InsertKeyValue",
              absl::StrCat("insert of key '", key, "'"), req, &resp, absl::Seconds(30),
              /*blocking=*/false);
}

absl::StatusOr<std::string> CoordinationClient::Get(const std::string& key,
                                                    absl::Duration timeout) {
  const std::string what = absl::StrCat("get of key '", key, "'");
  {
    MutexLock l(&mu_);
    if (!error_.ok()) return AnnotateStatus(error_, absl::StrCat(what, " aborted: "));
  }
  GetKeyValueRequest req;
  req.set_key(key);
  req.set_timeout_ms(ToMs(timeout));
  GetKeyValueResponse resp;
  STRATA_RETURN_IF_ERROR(Call(&CoordinationService::Stub::GetKeyValue, "GetKeyValue", what, req,
                              &resp, timeout + kRpcSlack,
                              /*blocking=*/true));
  return std::move(*resp.mutable_value());
}

void CoordinationClient::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    for (const auto& call : in_flight_) call.first->TryCancel();
    // Taken under the lock, so that two Stop()s (the owner's, and a
    // callback's Shutdown()) never join one thread twice. The callback's
    // own thread stays for the destructor to join.
    for (std::thread* t : {&heartbeat_thread_, &poll_thread_}) {
      if (t->joinable() && t->get_id() != std::this_thread::get_id()) {
        threads.push_back(std::move(*t));
      }
    }
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace strata
