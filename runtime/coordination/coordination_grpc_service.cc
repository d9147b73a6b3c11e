// The coordination service's gRPC adapter (CoordinationGrpcService in
// coordination_service.h): authorizes each call, admits it while the
// service is hosted, and answers blocking calls from the state machine's
// completions without holding a gRPC thread.
#include <grpcpp/support/server_callback.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "base/status.h"
#include "google/protobuf/descriptor.h"
#include "runtime/coordination/coordination_service.h"

namespace strata {

namespace {

// A wait never lasts past its caller's deadline: the answer would be lost.
absl::Duration BoundedTimeout(const grpc::CallbackServerContext* ctx, int64_t timeout_ms) {
  absl::Duration t = absl::Milliseconds(std::max<int64_t>(timeout_ms, 0));
  // No deadline reads as time_point::max(), a few centuries away.
  t = std::min(t, absl::FromChrono(ctx->deadline()) - absl::Now());
  return std::max(t, absl::ZeroDuration());
}

// The reactor of a call that waits: finished by the wait's `done`; the
// caller going away (OnCancel) cancels the wait. Deleted once both gRPC is
// done with it (OnDone) and the handler that started the wait returned.
class WaitReactor : public grpc::ServerUnaryReactor {
 public:
  WaitReactor(CoordinationGrpcService* owner, CoordinationServiceImpl* impl)
      : owner_(owner), impl_(impl) {
    owner_->ReactorMade();
  }
  ~WaitReactor() override { owner_->ReactorGone(); }

  // After the wait started (its id; kNoWait if it was answered at once).
  void Started(WaitId id) {
    bool cancel;
    {
      MutexLock l(&mu_);
      id_ = id;
      cancel = cancelled_ && id != kNoWait;
    }
    if (cancel) impl_->CancelWait(id);
    Unref();
  }
  void OnCancel() override {
    WaitId id;
    {
      MutexLock l(&mu_);
      cancelled_ = true;
      id = id_;
    }
    if (id != kNoWait) impl_->CancelWait(id);
  }
  void OnDone() override { Unref(); }

 private:
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }
  CoordinationGrpcService* const owner_;
  CoordinationServiceImpl* const impl_;
  std::atomic<int> refs_{2};
  Mutex mu_;
  WaitId id_ ABSL_GUARDED_BY(mu_) = kNoWait;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::Status CoordinationGrpcService::Authorize(const grpc::ServerContextBase& ctx,
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

void CoordinationGrpcService::ReactorMade() {
  MutexLock l(&reactors_mu_);
  ++live_reactors_;
}

void CoordinationGrpcService::ReactorGone() {
  MutexLock l(&reactors_mu_);
  --live_reactors_;
}

void CoordinationGrpcService::AwaitReactorsGone() {
  MutexLock l(&reactors_mu_);
  reactors_mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return live_reactors_ == 0; });
}

grpc::Status CoordinationGrpcService::Admit(const grpc::ServerContextBase& ctx,
                                            absl::string_view method,
                                            const google::protobuf::Message& request) {
  if (grpc::Status a = Authorize(ctx, method, request); !a.ok()) return a;
  if (impl_ == nullptr) return NotHosted();
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::Answer(grpc::CallbackServerContext* ctx,
                                                          const grpc::Status& status) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(status);
  return r;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::RegisterTask(grpc::CallbackServerContext* ctx,
                                                                const RegisterTaskRequest* req,
                                                                RegisterTaskResponse* resp) {
  if (grpc::Status a = Admit(*ctx, "RegisterTask", *req); !a.ok()) return Answer(ctx, a);
  absl::Duration timeout = absl::ZeroDuration();
  if (req->timeout_ms() > 0) {
    timeout = std::max(BoundedTimeout(ctx, req->timeout_ms()), absl::Milliseconds(1));
  }
  auto* reactor = new WaitReactor(this, impl_);
  reactor->Started(impl_->RegisterTaskAsync(
      req->task(), req->incarnation(), {req->devices().begin(), req->devices().end()},
      req->cluster_fingerprint(), timeout, [reactor, resp](absl::StatusOr<RegisterResult> r) {
        if (r.ok()) {
          for (std::string& d : r->devices) resp->add_devices(std::move(d));
          for (std::string& t : r->tasks) resp->add_tasks(std::move(t));
          resp->set_service_task(r->service_task);
          resp->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(r->heartbeat_timeout));
        }
        reactor->Finish(ToGrpcStatus(r.status()));
      }));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                             const HeartbeatRequest* req,
                                                             HeartbeatResponse*) {
  if (grpc::Status a = Admit(*ctx, "Heartbeat", *req); !a.ok()) return Answer(ctx, a);
  return Answer(ctx, ToGrpcStatus(impl_->Heartbeat(req->task(), req->incarnation())));
}

grpc::ServerUnaryReactor* CoordinationGrpcService::WaitForBarrier(grpc::CallbackServerContext* ctx,
                                                                  const WaitForBarrierRequest* req,
                                                                  WaitForBarrierResponse*) {
  if (grpc::Status a = Admit(*ctx, "WaitForBarrier", *req); !a.ok()) return Answer(ctx, a);
  auto* reactor = new WaitReactor(this, impl_);
  reactor->Started(impl_->WaitForBarrierAsync(
      req->barrier_id(), req->task(), BoundedTimeout(ctx, req->timeout_ms()),
      {req->tasks().begin(), req->tasks().end()},
      [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); }));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::InsertKeyValue(grpc::CallbackServerContext* ctx,
                                                                  const InsertKeyValueRequest* req,
                                                                  InsertKeyValueResponse*) {
  if (grpc::Status a = Admit(*ctx, "InsertKeyValue", *req); !a.ok()) return Answer(ctx, a);
  return Answer(ctx, ToGrpcStatus(impl_->InsertKeyValue(req->key(), req->value())));
}

grpc::ServerUnaryReactor* CoordinationGrpcService::GetKeyValue(grpc::CallbackServerContext* ctx,
                                                               const GetKeyValueRequest* req,
                                                               GetKeyValueResponse* resp) {
  if (grpc::Status a = Admit(*ctx, "GetKeyValue", *req); !a.ok()) return Answer(ctx, a);
  auto* reactor = new WaitReactor(this, impl_);
  reactor->Started(impl_->GetKeyValueAsync(req->key(), BoundedTimeout(ctx, req->timeout_ms()),
                                           [reactor, resp](absl::StatusOr<std::string> v) {
                                             if (v.ok()) resp->set_value(std::move(*v));
                                             reactor->Finish(ToGrpcStatus(v.status()));
                                           }));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::ReportError(grpc::CallbackServerContext* ctx,
                                                               const ReportErrorRequest* req,
                                                               ReportErrorResponse*) {
  if (grpc::Status a = Admit(*ctx, "ReportError", *req); !a.ok()) return Answer(ctx, a);
  if (req->code() <= 0 || req->code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return Answer(
        ctx, ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
                 "task ", req->task(), " reported an error with invalid code ", req->code()))));
  }
  return Answer(
      ctx,
      ToGrpcStatus(impl_->ReportError(
          req->task(), absl::Status(static_cast<absl::StatusCode>(req->code()), req->message()))));
}

grpc::ServerUnaryReactor* CoordinationGrpcService::PollForError(grpc::CallbackServerContext* ctx,
                                                                const PollForErrorRequest* req,
                                                                PollForErrorResponse* resp) {
  if (grpc::Status a = Admit(*ctx, "PollForError", *req); !a.ok()) return Answer(ctx, a);
  auto* reactor = new WaitReactor(this, impl_);
  reactor->Started(impl_->PollForErrorAsync(
      req->task(), BoundedTimeout(ctx, req->timeout_ms()), [reactor, resp](PollResult r) {
        if (r.poll.ok() && !r.cluster_error.ok()) {
          resp->set_has_error(true);
          resp->set_code(static_cast<int>(r.cluster_error.code()));
          resp->set_message(std::string(r.cluster_error.message()));
        }
        reactor->Finish(ToGrpcStatus(r.poll));
      }));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationGrpcService::ShutdownTask(grpc::CallbackServerContext* ctx,
                                                                const ShutdownTaskRequest* req,
                                                                ShutdownTaskResponse*) {
  if (grpc::Status a = Admit(*ctx, "ShutdownTask", *req); !a.ok()) return Answer(ctx, a);
  auto* reactor = new WaitReactor(this, impl_);
  reactor->Started(
      impl_->ShutdownTaskAsync(req->task(), BoundedTimeout(ctx, req->timeout_ms()),
                               [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); }));
  return reactor;
}

}  // namespace strata
