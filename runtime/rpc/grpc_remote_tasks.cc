#include "runtime/rpc/grpc_remote_tasks.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status.h"
#include "runtime/coordination/coordination_service.h"
#include "runtime/rpc/worker_service.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/rpc_auth.h"

namespace strata {

namespace {

// One step's stream to one task.
class GrpcRemoteStep : public RemoteStep {
 public:
  GrpcRemoteStep(WorkerService::Stub* stub, std::string what, RemoteStepSink* sink)
      : stub_(stub), what_(std::move(what)), sink_(sink) {}

  ~GrpcRemoteStep() override {
    if (reader_.joinable()) reader_.join();
  }

  // Opens the stream with `first`; the reader thread then owns the rest.
  void Start(const RunStepRequest& first, const std::optional<JobToken>& token,
             absl::Duration timeout) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    if (token.has_value()) SignRpc(*token, "RunStep", first, &ctx_);
    stream_ = stub_->RunStep(&ctx_);
    {
      MutexLock l(&write_mu_);
      if (!stream_->Write(first)) closed_ = true;
    }
    reader_ = std::thread([this] { ReadAll(); });
  }

  absl::Status Send(const std::string& key, const Tensor& value) override {
    RunStepRequest out;
    STRATA_RETURN_IF_ERROR(EncodeStepTensor(key, value, out.add_tensors()));
    MutexLock l(&write_mu_);
    // A closed stream drops the tensor: the task ended its side of the step,
    // and its outcome (the sink's Finished) says why.
    if (!closed_ && !stream_->Write(out)) closed_ = true;
    return absl::OkStatus();
  }

  void Abort(const absl::Status&) override { ctx_.TryCancel(); }

 private:
  void ReadAll() {
    RunStepResponse in;
    absl::Status status;
    bool done = false;
    while (stream_->Read(&in)) {
      for (const StepTensor& t : in.tensors()) {
        if (absl::Status s = ReceiveStepTensor(t, sink_); !s.ok()) {
          if (status.ok()) status = s;
          ctx_.TryCancel();
        }
      }
      if (in.done() && !done) {
        done = true;
        if (in.code() != 0 && status.ok()) {
          status = absl::Status(static_cast<absl::StatusCode>(in.code()), in.message());
        }
        MutexLock l(&write_mu_);
        closed_ = true;
        stream_->WritesDone();
      }
    }
    const grpc::Status end = stream_->Finish();
    if (status.ok() && !done) {
      status = end.ok() ? absl::UnavailableError("the stream ended before the step did")
                        : FromGrpcStatus(end);
      status = AnnotateStatus(status, absl::StrCat(what_, ": "));
    }
    sink_->Finished(status);
  }

  WorkerService::Stub* const stub_;
  const std::string what_;
  RemoteStepSink* const sink_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<RunStepRequest, RunStepResponse>> stream_;
  Mutex write_mu_;
  bool closed_ ABSL_GUARDED_BY(write_mu_) = false;
  std::thread reader_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcRemoteTasks>> GrpcRemoteTasks::Create(
    GrpcRemoteTasksOptions options) {
  auto local = TaskOfDevice(absl::StrCat(options.local_task, "/device:CPU:0"));
  if (!local.ok() || *local != options.local_task) {
    return absl::InvalidArgumentError(
        absl::StrCat("GrpcRemoteTasksOptions.local_task '", options.local_task, "' is not a task"));
  }
  std::unique_ptr<GrpcRemoteTasks> r(new GrpcRemoteTasks(options));
  for (const RemoteTaskAddress& t : options.tasks) {
    const std::string what = absl::StrCat("GrpcRemoteTasksOptions.tasks: task '", t.task, "'");
    auto parsed = TaskOfDevice(absl::StrCat(t.task, "/device:CPU:0"));
    if (!parsed.ok() || *parsed != t.task)
      return absl::InvalidArgumentError(what + " is not a task");
    if (t.task == options.local_task) {
      return absl::InvalidArgumentError(what + " is this client's own task");
    }
    if (t.address.empty() || t.devices.empty()) {
      return absl::InvalidArgumentError(what + " has no address or no devices");
    }
    for (const std::string& d : t.devices) {
      auto of = TaskOfDevice(d);
      if (!of.ok() || *of != t.task) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": '", d, "' is not its device"));
      }
    }
    Peer p;
    p.address = t;
    p.stub = WorkerService::NewStub(DialTask(t.address, options.tls, options.max_message_bytes,
                                             options.keepalive, options.keepalive_timeout));
    if (!r->peers_.emplace(t.task, std::move(p)).second) {
      return absl::InvalidArgumentError(what + " is named twice");
    }
  }
  return r;
}

std::vector<std::string> GrpcRemoteTasks::tasks() const {
  std::vector<std::string> out;
  for (const RemoteTaskAddress& t : options_.tasks) out.push_back(t.task);
  return out;
}

std::vector<std::string> GrpcRemoteTasks::devices() const {
  std::vector<std::string> out;
  for (const RemoteTaskAddress& t : options_.tasks) {
    out.insert(out.end(), t.devices.begin(), t.devices.end());
  }
  return out;
}

absl::StatusOr<uint64_t> GrpcRemoteTasks::RegisterPartition(const std::string& task,
                                                            const std::string& device,
                                                            const ::tensorflow::GraphDef& graph) {
  auto it = peers_.find(task);
  if (it == peers_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task, " is not a remote task"));
  }
  RegisterGraphRequest request;
  request.set_client_task(options_.local_task);
  request.set_device(device);
  graph.SerializeToString(request.mutable_graph_def());
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.register_timeout));
  if (options_.job_token.has_value()) SignRpc(*options_.job_token, "RegisterGraph", request, &ctx);
  RegisterGraphResponse response;
  const grpc::Status s = it->second.stub->RegisterGraph(&ctx, request, &response);
  if (!s.ok()) {
    return AnnotateStatus(FromGrpcStatus(s),
                          absl::StrCat("task ", task, " (", it->second.address.address, "): "));
  }
  return response.graph_handle();
}

std::unique_ptr<RemoteStep> GrpcRemoteTasks::StartStep(const std::string& task,
                                                       std::vector<uint64_t> handles,
                                                       RemoteStepSink* sink,
                                                       absl::Duration timeout) {
  const Peer& peer = peers_.at(task);  // RegisterPartition checked the task
  auto step = std::make_unique<GrpcRemoteStep>(peer.stub.get(),
                                               absl::StrCat("at ", peer.address.address), sink);
  RunStepRequest first;
  first.set_client_task(options_.local_task);
  for (uint64_t h : handles) first.add_graph_handles(h);
  step->Start(first, options_.job_token, timeout);
  return step;
}

}  // namespace strata
