#include "runtime/rpc/worker_service.h"

#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/graph_def_import.h"
#include "kernels/cancellation.h"
#include "kernels/eigen_views.h"
#include "runtime/coordination/coordination_service.h"
#include "runtime/executor.h"
#include "runtime/local_rendezvous.h"

namespace strata {

absl::Status EncodeStepTensor(const std::string& key, const Tensor& value, StepTensor* out) {
  out->set_key(key);
  if (!value.IsInitialized()) {
    out->set_dead(true);
    return absl::OkStatus();
  }
  if (!DataTypeCanUseMemcpy(value.dtype())) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor ", key, ": a ", DataTypeString(value.dtype()), " tensor cannot cross tasks yet"));
  }
  out->set_dtype(static_cast<int32_t>(value.dtype()));
  for (int i = 0; i < value.shape().dims(); ++i) out->add_dims(value.shape().dim_size(i));
  out->set_data(static_cast<const char*>(value.raw_data()), value.TotalBytes());
  return absl::OkStatus();
}

absl::Status ReceiveStepTensor(const StepTensor& t, RemoteStepSink* sink) {
  if (t.dead()) {
    sink->Deliver(t.key(), Tensor());
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(
      Tensor value,
      sink->Accept(t.key(), t.dtype(), absl::MakeConstSpan(t.dims()), t.data().size()));
  if (!t.data().empty()) std::memcpy(value.raw_data(), t.data().data(), t.data().size());
  sink->Deliver(t.key(), value);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DecodeStepTensor(const StepTensor& t, Allocator* allocator,
                                        uint64_t max_bytes) {
  if (t.dead()) return absl::InvalidArgumentError(absl::StrCat("tensor '", t.key(), "' is dead"));
  RemoteRecvSpec spec;
  spec.dtype = static_cast<DataType>(t.dtype());
  spec.allocator = allocator;
  if (!DataTypeCanUseMemcpy(spec.dtype) || DataTypeSize(spec.dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.key(), "': dtype ", t.dtype(), " cannot cross tasks"));
  }
  TensorShape shape;
  const std::string bad = CheckRemoteTensor(t.dtype(), absl::MakeConstSpan(t.dims()),
                                            t.data().size(), spec, max_bytes, &shape);
  if (!bad.empty())
    return absl::InvalidArgumentError(absl::StrCat("tensor '", t.key(), "': ", bad));
  STRATA_ASSIGN_OR_RETURN(Tensor value, Tensor::Allocate(allocator, spec.dtype, shape));
  if (!t.data().empty()) std::memcpy(value.raw_data(), t.data().data(), t.data().size());
  return value;
}

// A partition registered here, planned once, shared by the steps of every
// client that runs it.
struct WorkerServiceImpl::Registered {
  std::string graph_bytes;  // to tell a hash collision from the same graph
  Device* device = nullptr;
  std::unique_ptr<Executor> executor;
  RemoteRecvSpecs expected;  // its _Recvs from other tasks, by key
};

WorkerServiceImpl::WorkerServiceImpl(WorkerServiceOptions options)
    : options_(std::move(options)), verifier_(options_.job_token) {
  pool_ = options_.pool;
  if (pool_ == nullptr) {
    const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    owned_pool_ = std::make_unique<Eigen::ThreadPool>(threads);
    pool_ = owned_pool_.get();
  }
}

WorkerServiceImpl::~WorkerServiceImpl() {
  // Executors before the pool and devices they use.
  MutexLock l(&mu_);
  graphs_.clear();
}

absl::StatusOr<std::unique_ptr<WorkerServiceImpl>> WorkerServiceImpl::Create(
    WorkerServiceOptions options) {
  if (options.devices == nullptr || options.devices->devices().empty()) {
    return absl::InvalidArgumentError("WorkerServiceOptions.devices: none");
  }
  auto task = TaskOfDevice(absl::StrCat(options.task, "/device:CPU:0"));
  if (!task.ok() || *task != options.task) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerServiceOptions.task '", options.task,
                                                   "' is not a task (/job:j/replica:r/task:t)"));
  }
  for (const Device* d : options.devices->devices()) {
    auto of = TaskOfDevice(d->name());
    if (!of.ok() || *of != options.task) {
      return absl::InvalidArgumentError(absl::StrCat("WorkerServiceOptions.devices: ", d->name(),
                                                     " is not a device of ", options.task));
    }
  }
  if (options.max_graphs <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkerServiceOptions.max_graphs is ", options.max_graphs));
  }
  return std::unique_ptr<WorkerServiceImpl>(new WorkerServiceImpl(std::move(options)));
}

int WorkerServiceImpl::num_graphs() const {
  MutexLock l(&mu_);
  return static_cast<int>(graphs_.size());
}

absl::StatusOr<uint64_t> WorkerServiceImpl::Register(const RegisterGraphRequest& request) {
  absl::StatusOr<Device*> device = options_.devices->LookupDevice(request.device());
  if (!device.ok() || (*device)->name() != request.device()) {
    return absl::InvalidArgumentError(absl::StrCat("device '", request.device(), "' is not one of ",
                                                   options_.task,
                                                   "'s: ", options_.devices->DeviceListString()));
  }
  const uint64_t handle = StableHash64(request.graph_def(), StableHash64(request.device()));
  {
    MutexLock l(&mu_);
    auto it = graphs_.find(handle);
    if (it != graphs_.end()) {
      if (it->second->graph_bytes == request.graph_def()) return handle;
      return absl::AlreadyExistsError("another graph has this graph's handle (a hash collision)");
    }
    if (static_cast<int>(graphs_.size()) >= options_.max_graphs) {
      return absl::ResourceExhaustedError(
          absl::StrCat(options_.task, " holds ", graphs_.size(), " registered graphs, its most"));
    }
  }
  ::tensorflow::GraphDef def;
  if (!def.ParseFromString(request.graph_def())) {
    return absl::InvalidArgumentError("graph_def is not a serialized GraphDef");
  }
  auto reg = std::make_shared<Registered>();
  reg->graph_bytes = request.graph_def();
  reg->device = *device;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, ImportGraphDef(def));
  for (Node* n : g->nodes()) {
    if (n->IsOp("_Arg") || n->IsOp("_Retval")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", n->DebugString(), ": a partition run on request cannot feed or fetch"));
    }
  }
  const std::string& me = options_.task;
  auto is_local = [&me](const std::string& name) {
    absl::StatusOr<std::string> t = TaskOfDevice(name);
    return t.ok() && *t == me;
  };
  bool crosses = false;
  STRATA_RETURN_IF_ERROR(ScanRecvsFromOtherTasks(*g, *device, is_local, &crosses, &reg->expected));
  STRATA_ASSIGN_OR_RETURN(reg->executor, Executor::Create(*g, *device));
  MutexLock l(&mu_);
  graphs_.emplace(handle, std::move(reg));  // a concurrent twin may have won: same graph
  return handle;
}

grpc::Status WorkerServiceImpl::RegisterGraph(grpc::ServerContext* ctx,
                                              const RegisterGraphRequest* request,
                                              RegisterGraphResponse* response) {
  if (absl::Status s = verifier_.Check("RegisterGraph", *request, *ctx); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<uint64_t> handle = Register(*request);
  if (!handle.ok()) {
    return ToGrpcStatus(AnnotateStatus(
        handle.status(), absl::StrCat("task ", options_.task, ": registering a partition of ",
                                      request->client_task(), " for ", request->device(), ": ")));
  }
  response->set_graph_handle(*handle);
  return grpc::Status::OK;
}

// One client's step here: the partitions' rendezvous (keys to this task's
// devices stay local; others leave on the stream) and the sink the
// client's tensors arrive through.
class WorkerServiceImpl::Step : public Rendezvous, public RemoteStepSink {
 public:
  using Stream = grpc::ServerReaderWriter<RunStepResponse, RunStepRequest>;
  Step(WorkerServiceImpl* service, Stream* stream, std::string client,
       std::vector<std::shared_ptr<const Registered>> graphs)
      : service_(service),
        stream_(stream),
        client_(std::move(client)),
        graphs_(std::move(graphs)) {}

  // Rendezvous:
  absl::Status Send(const std::string& key, const Tensor& value) override {
    STRATA_ASSIGN_OR_RETURN(std::string dst, RemoteRendezvous::DestinationTask(key));
    if (dst == service_->options_.task) return local_.Send(key, value);
    RunStepResponse out;
    STRATA_RETURN_IF_ERROR(EncodeStepTensor(key, value, out.add_tensors()));
    return Write(out);
  }
  void RecvAsync(const std::string& key, DoneCallback done) override {
    local_.RecvAsync(key, std::move(done));
  }
  void StartAbort(const absl::Status& status) override { local_.StartAbort(status); }

  // RemoteStepSink (the client's tensors):
  absl::StatusOr<Tensor> Accept(const std::string& key, int32_t dtype,
                                absl::Span<const int64_t> dims, uint64_t bytes) override {
    const RemoteRecvSpec* spec = nullptr;
    for (const auto& g : graphs_) {
      auto it = g->expected.find(key);
      if (it != g->expected.end()) spec = &it->second;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", key, " from ", client_,
                                                     " refused: no _Recv of the step expects it"));
    }
    TensorShape shape;
    const std::string bad =
        CheckRemoteTensor(dtype, dims, bytes, *spec, service_->options_.max_tensor_bytes, &shape);
    if (!bad.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", key, " from ", client_, " refused: ", bad));
    }
    return Tensor::Allocate(spec->allocator, spec->dtype, shape);
  }
  void Deliver(const std::string& key, const Tensor& value) override {
    if (absl::Status s = local_.Send(key, value); !s.ok()) cm_.StartCancel(s);
  }
  void Finished(const absl::Status&) override {}

  // Runs the partitions once, taking the client's tensors from `first` and
  // its later messages until the stream ends; returns when they are done
  // and their status was sent.
  void Run(const RunStepRequest& first) {
    cm_.RegisterCallback([this](const absl::Status& s) { StartAbort(s); });
    Executor::Args args;
    args.step_id = service_->steps_.fetch_add(1, std::memory_order_relaxed) + 1;
    args.rendezvous = this;
    args.cancellation = &cm_;
    args.inter_op_pool = service_->pool_;
    remaining_ = static_cast<int>(graphs_.size());
    for (const auto& g : graphs_) {
      g->executor->RunAsync(args, [this](absl::Status) { PartitionDone(); });
    }
    for (const StepTensor& t : first.tensors()) {
      if (absl::Status s = ReceiveStepTensor(t, this); !s.ok()) cm_.StartCancel(s);
    }
    RunStepRequest in;
    while (stream_->Read(&in)) {
      for (const StepTensor& t : in.tensors()) {
        if (absl::Status s = ReceiveStepTensor(t, this); !s.ok()) cm_.StartCancel(s);
      }
      if (in.abort_code() != 0) {
        cm_.StartCancel(absl::Status(static_cast<absl::StatusCode>(in.abort_code()),
                                     absl::StrCat(client_, " aborted: ", in.abort_message())));
      }
    }
    if (!done_.HasBeenNotified()) {
      cm_.StartCancel(absl::CancelledError(
          absl::StrCat("the stream of ", client_, " ended before its step did")));
    }
    done_.WaitForNotification();
  }

 private:
  absl::Status Write(const RunStepResponse& out) {
    MutexLock l(&write_mu_);
    if (!stream_->Write(out)) {
      return absl::UnavailableError(absl::StrCat("the stream to ", client_, " is closed"));
    }
    return absl::OkStatus();
  }

  void PartitionDone() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    RunStepResponse last;
    last.set_done(true);
    if (cm_.IsCancelled()) {
      last.set_code(static_cast<int32_t>(cm_.status().code()));
      last.set_message(std::string(cm_.status().message()));
    }
    (void)Write(last);  // a client gone away no longer needs it
    done_.Notify();
  }

  WorkerServiceImpl* const service_;
  Stream* const stream_;
  const std::string client_;
  const std::vector<std::shared_ptr<const Registered>> graphs_;
  LocalRendezvous local_;
  CancellationManager cm_;
  Mutex write_mu_;
  std::atomic<int> remaining_{0};
  Notification done_;
};

grpc::Status WorkerServiceImpl::RunStep(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<RunStepResponse, RunStepRequest>* stream) {
  RunStepRequest first;
  if (!stream->Read(&first)) return grpc::Status::OK;  // the client went away at once
  if (absl::Status s = verifier_.Check("RunStep", first, *ctx); !s.ok()) return ToGrpcStatus(s);
  const std::string client = first.client_task().empty() ? "a client" : first.client_task();
  std::vector<std::shared_ptr<const Registered>> graphs;
  {
    MutexLock l(&mu_);
    for (uint64_t h : first.graph_handles()) {
      auto it = graphs_.find(h);
      if (it == graphs_.end()) {
        return ToGrpcStatus(absl::NotFoundError(
            absl::StrCat("task ", options_.task, ": ", client, " ran graph handle ", h,
                         ", which is not registered here (did this task restart?)")));
      }
      graphs.push_back(it->second);
    }
  }
  if (graphs.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("task ", options_.task, ": ", client, " ran a step of no partitions")));
  }
  Step step(this, stream, client, std::move(graphs));
  step.Run(first);
  return grpc::Status::OK;
}

void WorkerServiceImpl::RegisterFunction(const std::string& name, WorkerFunction fn) {
  MutexLock l(&mu_);
  functions_[name] = std::make_shared<const WorkerFunction>(std::move(fn));
}

grpc::Status WorkerServiceImpl::RunFunction(grpc::ServerContext* ctx,
                                            const RunFunctionRequest* request,
                                            RunFunctionResponse* response) {
  if (absl::Status s = verifier_.Check("RunFunction", *request, *ctx); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (request->function().empty()) return grpc::Status::OK;  // a liveness probe
  auto fail = [&](const absl::Status& s) {
    response->set_code(static_cast<int32_t>(s.code()));
    response->set_message(absl::StrCat("task ", options_.task, ": ", s.message()));
    return grpc::Status::OK;
  };
  std::shared_ptr<const WorkerFunction> fn;
  {
    MutexLock l(&mu_);
    auto it = functions_.find(request->function());
    if (it != functions_.end()) fn = it->second;
  }
  if (fn == nullptr) {
    return fail(absl::NotFoundError(
        absl::StrCat("no function '", request->function(), "' is registered here")));
  }
  std::vector<Tensor> args;
  Allocator* host = options_.devices->devices().front()->allocator();
  for (const StepTensor& t : request->args()) {
    absl::StatusOr<Tensor> v = DecodeStepTensor(t, host, options_.max_tensor_bytes);
    if (!v.ok()) return fail(v.status());
    args.push_back(*std::move(v));
  }
  functions_run_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<std::vector<Tensor>> results = (*fn)(args);
  if (!results.ok()) return fail(results.status());
  for (size_t i = 0; i < results->size(); ++i) {
    absl::Status s = EncodeStepTensor(absl::StrCat(i), (*results)[i], response->add_results());
    if (!s.ok()) return fail(s);
  }
  return grpc::Status::OK;
}

}  // namespace strata
