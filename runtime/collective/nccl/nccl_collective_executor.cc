#include "runtime/collective/nccl/nccl_collective_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata {
namespace {

// Host-side wait for a collective: short sleeps, so a waiting thread does not
// hold a core the training threads need, and a finished collective is noticed
// within ~0.1 ms.
constexpr absl::Duration kEventPoll = absl::Microseconds(20);
// After an abort, how long to wait for the aborted kernels to leave the
// buffers they use before giving up on them (see graveyard_).
constexpr absl::Duration kAbortGrace = absl::Seconds(5);

absl::Status CudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", static_cast<int>(e), " (",
                                          cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")"));
}

// Events for one collective, destroyed with it (cudaEventDestroy on an event
// still pending is deferred by CUDA, so this is safe on every path).
class Events {
 public:
  ~Events() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  absl::StatusOr<cudaEvent_t> Record(int ordinal, void* stream) {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal), absl::StrCat("cudaSetDevice(", ordinal, ")")));
    cudaEvent_t e = nullptr;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                                      absl::StrCat("cudaEventCreate on GPU ", ordinal)));
    events_.push_back(e);
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(e, static_cast<cudaStream_t>(stream)),
                                      absl::StrCat("cudaEventRecord on GPU ", ordinal)));
    return e;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCollectiveExecutor>> NcclCollectiveExecutor::Create(
    NcclCollectiveExecutorOptions o) {
  if (o.devices.empty()) {
    return absl::InvalidArgumentError("NCCL collective executor: no GPU devices given");
  }
  std::set<std::string> names;
  std::set<int> ordinals;
  for (const DeviceBase* d : o.devices) {
    if (d == nullptr) return absl::InvalidArgumentError("NCCL collective executor: a null device");
    if (d->gpu_context() == nullptr || d->device_type() != kDeviceGpu) {
      return absl::InvalidArgumentError(absl::StrCat("NCCL collective executor: ", d->name(), " is a ",
                                                     d->device_type(), " device, not a GPU"));
    }
    if (!names.insert(d->name()).second || !ordinals.insert(d->gpu_context()->ordinal).second) {
      return absl::InvalidArgumentError(absl::StrCat("NCCL collective executor: ", d->name(), " (GPU ",
                                                     d->gpu_context()->ordinal,
                                                     ") is given twice: NCCL needs one rank per GPU"));
    }
  }
  if (o.num_workers < 1 || o.worker_rank < 0 || o.worker_rank >= o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL collective executor: worker_rank ", o.worker_rank,
                                                   " of ", o.num_workers, " workers is out of range"));
  }
  if (!o.worker_names.empty() && static_cast<int>(o.worker_names.size()) != o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL collective executor: ", o.worker_names.size(),
                                                   " worker names for ", o.num_workers, " workers"));
  }
  if (o.num_workers > 1 && o.store == nullptr) {
    return absl::InvalidArgumentError(
        "NCCL collective executor: several workers need a key-value store for the NCCL unique ids");
  }
  if (o.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("NCCL collective executor: default_timeout must be positive");
  }
  return std::unique_ptr<NcclCollectiveExecutor>(new NcclCollectiveExecutor(std::move(o)));
}

namespace {
std::vector<std::string> WorkerNames(const NcclCollectiveExecutorOptions& o) {
  if (!o.worker_names.empty()) return o.worker_names;
  std::vector<std::string> names;
  for (int i = 0; i < o.num_workers; ++i) names.push_back(absl::StrCat("/job:worker/replica:0/task:", i));
  return names;
}
LocalCollectiveExecutorOptions BaseOptions(const NcclCollectiveExecutorOptions& o) {
  LocalCollectiveExecutorOptions b;
  b.default_timeout = o.default_timeout;
  return b;
}
}  // namespace

NcclCollectiveExecutor::NcclCollectiveExecutor(NcclCollectiveExecutorOptions o)
    : LocalCollectiveExecutor(BaseOptions(o)),
      worker_names_(WorkerNames(o)),
      worker_rank_(o.worker_rank),
      num_workers_(o.num_workers),
      store_(o.store),
      key_prefix_(o.key_prefix),
      default_timeout_(o.default_timeout),
      watchdog_interval_(o.watchdog_interval),
      on_fatal_error_(std::move(o.on_fatal_error)) {
  for (const DeviceBase* d : o.devices) {
    DeviceState s;
    s.name = d->name();
    s.ordinal = d->gpu_context()->ordinal;
    s.compute_stream = d->gpu_context()->stream;
    devices_.emplace(s.name, s);
  }
}

NcclCollectiveExecutor::~NcclCollectiveExecutor() {
  std::map<int, std::shared_ptr<GroupClique>> cliques;
  {
    MutexLock l(&dmu_);
    cliques.swap(cliques_);
  }
  // Every collective has finished (the contract), so the cliques' watchdogs
  // are the only threads left that call back into this object.
  for (auto& [key, g] : cliques) {
    MutexLock l(&g->mu);
    g->clique.reset();
  }
  MutexLock l(&dmu_);
  for (auto& [name, d] : devices_) {
    if (d.collective_stream != nullptr) {
      cudaSetDevice(d.ordinal);
      cudaStreamDestroy(static_cast<cudaStream_t>(d.collective_stream));
    }
  }
}

std::string NcclCollectiveExecutor::WorkerList() const { return absl::StrJoin(worker_names_, ", "); }

absl::Status NcclCollectiveExecutor::fatal_error() const {
  MutexLock l(&dmu_);
  return fatal_;
}

void NcclCollectiveExecutor::Fail(const absl::Status& status) {
  std::vector<std::shared_ptr<NcclClique>> cliques;
  {
    MutexLock l(&dmu_);
    if (!fatal_.ok()) return;
    fatal_ = status.ok() ? absl::AbortedError("NCCL collective executor aborted") : status;
    for (auto& [key, g] : cliques_) {
      // A group whose clique is being made is skipped here; GetClique aborts
      // it once made, seeing fatal_.
      if (g->mu.TryLock()) {
        if (g->clique != nullptr) cliques.push_back(g->clique);
        g->mu.Unlock();
      }
    }
  }
  for (auto& c : cliques) c->Abort(status);
  if (on_fatal_error_) on_fatal_error_(status);
}

void NcclCollectiveExecutor::ExecuteAsync(const CollectiveParams& params, Tensor input,
                                          Allocator* allocator, CancellationManager* cancellation,
                                          DoneCallback done) {
  absl::Status s;
  if (devices_.count(params.device) == 0) {
    std::vector<std::string> known;
    for (const auto& [name, d] : devices_) known.push_back(name);
    s = absl::InvalidArgumentError(absl::StrCat("not a GPU device of this NCCL executor (its devices: ",
                                                absl::StrJoin(known, ", "), ")"));
  }
  if (s.ok()) s = ToNcclDataType(params.dtype).status();
  if (s.ok() && (params.type == CollectiveType::kAllReduce ||
                 params.type == CollectiveType::kReduceScatter)) {
    s = ToNcclRedOp(params.merge_op, params.final_op).status();
  }
  if (s.ok()) {
    absl::Status fatal = fatal_error();
    if (!fatal.ok()) {
      s = absl::Status(fatal.code(), absl::StrCat("NCCL collectives broke earlier: ", fatal.message()));
    }
  }
  if (!s.ok()) {
    done(AnnotateStatus(s, absl::StrCat(CollectiveTypeName(params.type), " on ", params.device, ": ")),
         Tensor());
    return;
  }
  LocalCollectiveExecutor::ExecuteAsync(params, std::move(input), allocator, cancellation,
                                        std::move(done));
}

absl::StatusOr<int> NcclCollectiveExecutor::LocalGroupSize(const CollectiveParams& p) const {
  if (p.group_size % num_workers_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        CollectiveTypeName(p.type), " on ", p.device, ": group_size ", p.group_size,
        " is not a multiple of the ", num_workers_,
        " workers (every worker must hold the same number of the group's GPUs)"));
  }
  return p.group_size / num_workers_;
}

void NcclCollectiveExecutor::Start(std::shared_ptr<Instance> inst) {
  // Making a clique and waiting for the GPU block: not on the arriving
  // kernel's thread.
  workers().Schedule([this, inst = std::move(inst)]() mutable { RunInstance(std::move(inst)); });
}

void NcclCollectiveExecutor::AbortStarted(const std::shared_ptr<Instance>& inst,
                                          const absl::Status& status, bool is_timeout) {
  absl::Status s = status;
  if (is_timeout) {
    s = absl::DeadlineExceededError(absl::StrCat(
        Describe(*inst), ": ", status.message(), " while running over NCCL",
        num_workers_ > 1 ? absl::StrCat(" across workers ", WorkerList()) : std::string(),
        " (every local participant had arrived: a worker that never reached this collective, or "
        "a hung GPU)"));
  }
  // NCCL work cannot be taken back once enqueued: only an abort of the
  // cliques ends it, and that breaks the executor.
  Fail(s);
}

void NcclCollectiveExecutor::RunInstance(std::shared_ptr<Instance> inst) {
  const int n = static_cast<int>(inst->participants.size());
  std::vector<Tensor> outputs(n);
  absl::Status s = RunNccl(*inst, &outputs);
  if (!s.ok()) {
    s = AnnotateStatus(s, absl::StrCat(Describe(*inst), " over NCCL: "));
    outputs.assign(n, Tensor());
  }
  for (int i = 0; i < n; ++i) FinishParticipant(inst, i, s, std::move(outputs[i]));
}

absl::StatusOr<void*> NcclCollectiveExecutor::CollectiveStream(DeviceState& d) {
  MutexLock l(&dmu_);
  if (d.collective_stream == nullptr) {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(d.ordinal), absl::StrCat("cudaSetDevice(", d.ordinal, ")")));
    // The highest priority: a collective's kernels start as soon as an SM is
    // free, ahead of queued compute, so the step's critical path shortens.
    int least = 0, greatest = 0;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                      "cudaDeviceGetStreamPriorityRange"));
    cudaStream_t s = nullptr;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest),
                                      absl::StrCat("creating the collective stream of ", d.name)));
    d.collective_stream = s;
  }
  return d.collective_stream;
}

absl::StatusOr<std::shared_ptr<NcclClique>> NcclCollectiveExecutor::GetClique(
    int group_key, const std::vector<int>& ordinals, absl::Time deadline) {
  std::shared_ptr<GroupClique> g;
  {
    MutexLock l(&dmu_);
    std::shared_ptr<GroupClique>& e = cliques_[group_key];
    if (e == nullptr) e = std::make_shared<GroupClique>();
    g = e;
  }
  absl::Status failed;
  std::shared_ptr<NcclClique> made;
  {
    MutexLock l(&g->mu);
    if (g->tried) {
      if (!g->status.ok()) return g->status;
      if (g->ordinals != ordinals) {
        return absl::InternalError(absl::StrCat("group ", group_key, " changed GPUs from [",
                                                absl::StrJoin(g->ordinals, ","), "] to [",
                                                absl::StrJoin(ordinals, ","), "]"));
      }
      return g->clique;
    }
    g->tried = true;
    g->ordinals = ordinals;
    NcclCliqueOptions o;
    o.init_timeout = std::max(deadline - absl::Now(), absl::Milliseconds(1));
    o.watchdog_interval = watchdog_interval_;
    o.on_error = [this](const absl::Status& s) { Fail(s); };
    const int local = static_cast<int>(ordinals.size());
    const std::string key = absl::StrCat(key_prefix_, "/group/", group_key);
    absl::StatusOr<std::unique_ptr<NcclClique>> c =
        num_workers_ == 1
            ? NcclClique::CreateLocal(ordinals, std::move(o))
            : NcclClique::CreateRanks(worker_rank_ * local, num_workers_ * local, ordinals, store_, key,
                                      std::move(o));
    if (c.ok()) {
      g->clique = std::shared_ptr<NcclClique>(std::move(*c));
      made = g->clique;
    } else {
      g->status = AnnotateStatus(c.status(), absl::StrCat("making the NCCL clique of group ", group_key,
                                                          num_workers_ > 1 ? absl::StrCat(" (worker ", worker_names_[worker_rank_], ")") : "",
                                                          ": "));
      failed = g->status;
    }
  }
  if (!failed.ok()) {
    // Peers wait for this worker's ranks until their init times out; the
    // cluster learns sooner through on_fatal_error.
    Fail(failed);
    return failed;
  }
  absl::Status fatal = fatal_error();
  if (!fatal.ok()) {
    made->Abort(fatal);  // broken while it was being made
    return fatal;
  }
  return made;
}

absl::Status NcclCollectiveExecutor::WaitForEvents(const std::vector<DeviceState*>& devs,
                                                   const std::vector<void*>& events,
                                                   const std::string& what,
                                                   std::vector<Tensor>* keep_alive) {
  std::vector<bool> done(events.size(), false);
  absl::Time grace_end = absl::InfiniteFuture();
  absl::Status fatal;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < events.size(); ++i) {
      if (done[i]) continue;
      cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(events[i]));
      if (q == cudaSuccess) {
        done[i] = true;
      } else if (q == cudaErrorNotReady) {
        all = false;
      } else {
        absl::Status s = CudaStatus(q, absl::StrCat(what, " on ", devs[i]->name, " (GPU ", devs[i]->ordinal, ")"));
        Fail(s);
        MutexLock l(&dmu_);
        for (Tensor& t : *keep_alive) graveyard_.push_back(std::move(t));
        return s;
      }
    }
    if (all) return fatal;
    if (fatal.ok()) {
      fatal = fatal_error();
      if (!fatal.ok()) {
        fatal = absl::Status(fatal.code(), absl::StrCat("NCCL collectives broke: ", fatal.message()));
        grace_end = absl::Now() + kAbortGrace;
      }
    } else if (absl::Now() > grace_end) {
      // The aborted kernels may still write these buffers: never reuse them.
      MutexLock l(&dmu_);
      for (Tensor& t : *keep_alive) graveyard_.push_back(std::move(t));
      return fatal;
    }
    absl::SleepFor(kEventPoll);
  }
}

absl::StatusOr<int> NcclCollectiveExecutor::FindBroadcastRoot(Instance& inst, NcclClique& clique,
                                                              const std::vector<DeviceState*>& devs,
                                                              const std::vector<int>& order,
                                                              std::vector<Tensor>& scratch,
                                                              absl::Time deadline) {
  const int n = static_cast<int>(order.size());
  // Each rank contributes 2^32 + its rank if it is the sender, else 0: the sum
  // counts the senders in its high half and names the one in its low half.
  int64_t* host = nullptr;
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(reinterpret_cast<void**>(&host), n * sizeof(int64_t),
                                                  cudaHostAllocPortable),
                                    "allocating pinned memory for the broadcast's sender search"));
  std::vector<NcclLaunch> launches(n);
  for (int r = 0; r < n; ++r) {
    const bool sender = inst.participants[order[r]].params.type == CollectiveType::kBroadcastSend;
    host[r] = sender ? (int64_t{1} << 32) + worker_rank_ * n + r : 0;
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(devs[r]->ordinal), "cudaSetDevice"));
    STRATA_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(scratch[r].raw_data(), &host[r], sizeof(int64_t), cudaMemcpyHostToDevice,
                        static_cast<cudaStream_t>(devs[r]->collective_stream)),
        "copying the broadcast's sender flag"));
    launches[r] = {scratch[r].raw_data(), scratch[r].raw_data(), devs[r]->collective_stream};
  }
  {
    MutexLock l(&launch_mu_);
    STRATA_RETURN_IF_ERROR(clique.AllReduce(launches, 1, DT_INT64, MergeOp::kAdd, FinalOp::kId, deadline));
  }
  Events events;
  std::vector<void*> evs;
  for (int r = 0; r < n; ++r) {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(devs[r]->ordinal), "cudaSetDevice"));
    STRATA_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(&host[r], scratch[r].raw_data(), sizeof(int64_t), cudaMemcpyDeviceToHost,
                        static_cast<cudaStream_t>(devs[r]->collective_stream)),
        "copying the broadcast's sender count back"));
    STRATA_ASSIGN_OR_RETURN(cudaEvent_t e, events.Record(devs[r]->ordinal, devs[r]->collective_stream));
    evs.push_back(e);
  }
  // On failure the pinned buffer is left allocated: an aborted copy may
  // still target it.
  STRATA_RETURN_IF_ERROR(WaitForEvents(devs, evs, "finding the broadcast's sender", &scratch));
  const int64_t sum = host[0];
  cudaFreeHost(host);
  const int64_t senders = sum >> 32;
  if (senders != 1) {
    return absl::InvalidArgumentError(absl::StrCat("a broadcast needs exactly one sender across the ",
                                                   num_workers_, " workers, found ", senders));
  }
  return static_cast<int>(sum & 0xffffffff);
}

absl::Status NcclCollectiveExecutor::RunNccl(Instance& inst, std::vector<Tensor>* outputs) {
  std::vector<Participant>& ps = inst.participants;
  const int n = static_cast<int>(ps.size());
  std::vector<int> order(n);  // order[local rank] = participant index
  for (int i = 0; i < n; ++i) order[ps[i].rank] = i;
  const CollectiveParams* ref = &ps[0].params;
  for (const Participant& p : ps) {
    if (p.params.type == CollectiveType::kBroadcastSend) ref = &p.params;
  }
  const absl::Time deadline = absl::Now() + inst.timeout;
  if (absl::Status fatal = fatal_error(); !fatal.ok()) {
    return absl::Status(fatal.code(), absl::StrCat("NCCL collectives broke earlier: ", fatal.message()));
  }
  std::vector<DeviceState*> devs(n);
  std::vector<int> ordinals(n);
  for (int r = 0; r < n; ++r) {
    devs[r] = &devices_.at(ps[order[r]].params.device);  // checked in ExecuteAsync
    ordinals[r] = devs[r]->ordinal;
  }
  // The clique first: on a machine without GPUs it gives the clear error.
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<NcclClique> clique,
                          GetClique(std::get<0>(inst.key), ordinals, deadline));
  for (int r = 0; r < n; ++r) STRATA_RETURN_IF_ERROR(CollectiveStream(*devs[r]).status());

  // 1. Outputs, from each participant's allocator.
  std::vector<int64_t> dims(ref->shape.dim_sizes().begin(), ref->shape.dim_sizes().end());
  if (ref->type == CollectiveType::kAllGather) dims[0] *= ref->group_size;
  if (ref->type == CollectiveType::kReduceScatter) dims[0] /= ref->group_size;
  STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
  for (int i = 0; i < n; ++i) {
    STRATA_ASSIGN_OR_RETURN((*outputs)[i], Tensor::Allocate(ps[i].allocator, ref->dtype, out_shape));
  }
  const int64_t count = ref->shape.num_elements();
  if (count == 0) return absl::OkStatus();  // nothing to move, on any worker
  // The broadcast's sender search needs a device int64 per rank; allocated
  // now so that step 2 orders it like the outputs.
  std::vector<Tensor> scratch;
  const bool find_root = num_workers_ > 1 && (ref->type == CollectiveType::kBroadcastSend ||
                                              ref->type == CollectiveType::kBroadcastRecv);
  for (int r = 0; find_root && r < n; ++r) {
    STRATA_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(ps[order[r]].allocator, DT_INT64, TensorShape({1})));
    scratch.push_back(std::move(t));
  }

  // 2. Each collective stream waits for its compute stream: the input is
  // written, and a recycled output buffer is no longer read by earlier work.
  Events events;
  for (int r = 0; r < n; ++r) {
    STRATA_ASSIGN_OR_RETURN(cudaEvent_t ready, events.Record(devs[r]->ordinal, devs[r]->compute_stream));
    STRATA_RETURN_IF_ERROR(CudaStatus(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(devs[r]->collective_stream), ready, 0),
        absl::StrCat("ordering the collective stream of ", devs[r]->name)));
  }
  std::vector<Tensor> keep_alive;
  for (int i = 0; i < n; ++i) {
    keep_alive.push_back(ps[i].input);
    keep_alive.push_back((*outputs)[i]);
  }

  // 3. One grouped NCCL call across the local ranks.
  std::vector<NcclLaunch> launches(n);
  for (int r = 0; r < n; ++r) {
    const Participant& p = ps[order[r]];
    void* out = (*outputs)[order[r]].raw_data();
    launches[r] = {p.input.IsInitialized() ? p.input.raw_data() : out, out, devs[r]->collective_stream};
  }
  absl::Status s;
  switch (ref->type) {
    case CollectiveType::kAllReduce: {
      MutexLock l(&launch_mu_);
      s = clique->AllReduce(launches, count, ref->dtype, ref->merge_op, ref->final_op, deadline);
      break;
    }
    case CollectiveType::kAllGather: {
      MutexLock l(&launch_mu_);
      s = clique->AllGather(launches, count, ref->dtype, deadline);
      break;
    }
    case CollectiveType::kReduceScatter: {
      MutexLock l(&launch_mu_);
      s = clique->ReduceScatter(launches, count / ref->group_size, ref->dtype, ref->merge_op,
                                ref->final_op, deadline);
      break;
    }
    case CollectiveType::kBroadcastSend:
    case CollectiveType::kBroadcastRecv: {
      int root = -1;
      if (num_workers_ == 1) {
        for (int r = 0; r < n; ++r) {
          if (ps[order[r]].params.type == CollectiveType::kBroadcastSend) root = r;
        }
      } else {
        absl::StatusOr<int> found = FindBroadcastRoot(inst, *clique, devs, order, scratch, deadline);
        if (!found.ok()) return found.status();
        root = *found;
      }
      MutexLock l(&launch_mu_);
      s = clique->Broadcast(launches, count, ref->dtype, root, deadline);
      break;
    }
  }
  if (!s.ok()) {
    if (!clique->status().ok()) Fail(clique->status());
    return s;
  }
  // 4. Wait for the collective on every device.
  std::vector<void*> done;
  for (int r = 0; r < n; ++r) {
    STRATA_ASSIGN_OR_RETURN(cudaEvent_t e, events.Record(devs[r]->ordinal, devs[r]->collective_stream));
    done.push_back(e);
  }
  return WaitForEvents(devs, done, absl::StrCat(CollectiveTypeName(ref->type), " over NCCL"), &keep_alive);
}

}  // namespace strata
