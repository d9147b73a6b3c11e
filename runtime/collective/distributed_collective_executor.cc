#include "runtime/collective/distributed_collective_executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/run_queue.h"
#include "base/status.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/algorithms/all_reduce_pipelined_ring.h"
#include "runtime/collective/distributed_collective_executor_internal.h"
#include "runtime/collective/reduction.h"

namespace strata {

namespace {

using distributed_collective_internal::kDescriptorMagic;
using distributed_collective_internal::kMaxDims;

// Tag layout: group (16 bits) | instance (24) | execution mod 2^14 (14) |
// the algorithm's own tag (10). The last algorithm tag is the descriptor
// exchange's; ring algorithms use fewer than 2 * num_workers tags.
constexpr int kGroupBits = 16, kInstanceBits = 24, kSequenceBits = 14, kTagBits = 10;
constexpr uint64_t kTagsPerRun = uint64_t{1} << kTagBits;
constexpr uint64_t kDescriptorTag = kTagsPerRun - 1;
constexpr int kMaxWorkers = 512;

bool IsBroadcast(CollectiveType t) {
  return t == CollectiveType::kBroadcastSend || t == CollectiveType::kBroadcastRecv;
}

}  // namespace


namespace {

using Descriptor = DistributedCollectiveExecutor::Descriptor;

Descriptor MakeDescriptor(const CollectiveParams& p, bool has_sender) {
  Descriptor d;
  d.type = static_cast<int32_t>(IsBroadcast(p.type) ? CollectiveType::kBroadcastSend : p.type);
  d.dtype = static_cast<int32_t>(p.dtype);
  d.merge_op = static_cast<int32_t>(p.merge_op);
  d.final_op = static_cast<int32_t>(p.final_op);
  d.group_size = p.group_size;
  d.rank = p.shape.dims();
  // Dimensions past the 8th are folded into the 8th: the element count,
  // which is what the data movement depends on, is still compared.
  for (int i = 0; i < p.shape.dims(); ++i) {
    const int j = std::min(i, kMaxDims - 1);
    d.dims[j] = i > j ? d.dims[j] * p.shape.dim_size(i) : p.shape.dim_size(i);
  }
  std::strncpy(d.hint, p.communication_hint.c_str(), sizeof(d.hint) - 1);
  d.has_sender = has_sender;
  return d;
}

// "float[1024] all-reduce Add/Div" (plus the hint unless auto, and the group
// size). Safe on a peer's garbage.
std::string DescriptorText(const Descriptor& d) {
  if (d.magic != kDescriptorMagic) return absl::StrCat("an unreadable descriptor (magic ", d.magic, ")");
  std::string s = d.dtype >= 0 && d.dtype < 100 ? DataTypeString(static_cast<DataType>(d.dtype))
                                                : absl::StrCat("dtype #", d.dtype);
  std::vector<int64_t> dims(d.dims, d.dims + std::clamp(d.rank, 0, kMaxDims));
  absl::StrAppend(&s, "[", absl::StrJoin(dims, ","), d.rank > kMaxDims ? ",..." : "", "] ");
  if (d.type == static_cast<int32_t>(CollectiveType::kBroadcastSend)) {
    absl::StrAppend(&s, "broadcast");
  } else if (d.type >= 0 && d.type <= static_cast<int32_t>(CollectiveType::kReduceScatter)) {
    absl::StrAppend(&s, CollectiveTypeName(static_cast<CollectiveType>(d.type)));
  } else {
    absl::StrAppend(&s, "collective #", d.type);
  }
  if (d.type == static_cast<int32_t>(CollectiveType::kAllReduce) ||
      d.type == static_cast<int32_t>(CollectiveType::kReduceScatter)) {
    absl::StrAppend(&s, " ",
                    d.merge_op >= 0 && d.merge_op <= 3 ? MergeOpName(static_cast<MergeOp>(d.merge_op))
                                                       : "?",
                    "/", d.final_op == static_cast<int32_t>(FinalOp::kDiv) ? "Div" : "Id");
  }
  const std::string hint(d.hint, strnlen(d.hint, sizeof(d.hint)));
  if (hint != "auto") absl::StrAppend(&s, " hint '", hint, "'");
  absl::StrAppend(&s, " group_size ", d.group_size);
  return s;
}

}  // namespace

// A Transport view for one execution: tags are offset into the execution's
// range, and the operations in flight are counted per peer so that a
// timeout can name whom it waits for.
class DistributedCollectiveExecutor::TaggedTransport : public Transport {
 public:
  TaggedTransport(Transport* base, std::shared_ptr<Run> run) : base_(base), run_(std::move(run)) {}
  int rank() const override { return base_->rank(); }
  int size() const override { return base_->size(); }
  const char* kind() const override { return base_->kind(); }
  void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) override {
    if (tag >= kTagsPerRun) return done(TagError(tag));
    base_->SendAsync(dst, run_->tag_base | tag, data, bytes, Track(dst, std::move(done)));
  }
  void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) override {
    if (tag >= kTagsPerRun) return done(TagError(tag));
    base_->RecvAsync(src, run_->tag_base | tag, data, bytes, Track(src, std::move(done)));
  }
  void Abort(const absl::Status& status) override { base_->Abort(status); }

 private:
  static absl::Status TagError(uint64_t tag) {
    return absl::InternalError(absl::StrCat("cross-worker algorithm used tag ", tag, ", past the ",
                                            kTagsPerRun, " each execution has"));
  }
  Callback Track(int peer, Callback done) {
    {
      MutexLock l(&run_->mu);
      ++run_->pending[peer];
    }
    return [run = run_, peer, done = std::move(done)](absl::Status s) {
      {
        MutexLock l(&run->mu);
        if (--run->pending[peer] == 0) run->pending.erase(peer);
        if (!s.ok()) run->failed = true;
      }
      done(std::move(s));
    };
  }

  Transport* const base_;
  const std::shared_ptr<Run> run_;
};

absl::StatusOr<std::unique_ptr<DistributedCollectiveExecutor>> DistributedCollectiveExecutor::Create(
    DistributedCollectiveExecutorOptions options) {
  const int w = options.num_workers, r = options.worker_rank;
  if (w < 1 || w > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers is ", w, ", must be in [1, ", kMaxWorkers, "]"));
  }
  if (r < 0 || r >= w) {
    return absl::InvalidArgumentError(absl::StrCat("worker_rank ", r, " is not in [0, ", w, ")"));
  }
  if (options.worker_names.empty()) {
    for (int i = 0; i < w; ++i) {
      options.worker_names.push_back(absl::StrCat("/job:worker/replica:0/task:", i));
    }
  } else if (static_cast<int>(options.worker_names.size()) != w) {
    return absl::InvalidArgumentError(absl::StrCat(options.worker_names.size(),
                                                   " worker_names for ", w, " workers"));
  }
  if (options.transport == nullptr && w > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", options.worker_names[r], ": ", w, " workers need a transport"));
  }
  if (options.transport != nullptr &&
      (options.transport->rank() != r || options.transport->size() != w)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", options.worker_names[r], " (rank ", r, " of ", w, ") got the transport of rank ",
        options.transport->rank(), " of ", options.transport->size()));
  }
  if (options.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_timeout must be positive");
  }
  return std::unique_ptr<DistributedCollectiveExecutor>(
      new DistributedCollectiveExecutor(std::move(options)));
}

DistributedCollectiveExecutor::DistributedCollectiveExecutor(DistributedCollectiveExecutorOptions o)
    : LocalCollectiveExecutor(LocalCollectiveExecutorOptions{o.default_timeout}),
      worker_rank_(o.worker_rank),
      num_workers_(o.num_workers),
      worker_names_(std::move(o.worker_names)),
      transport_(std::move(o.transport)),
      on_fatal_error_(std::move(o.on_fatal_error)),
      recorder_(o.recorder != nullptr ? o.recorder : &FlightRecorder::Process()),
      workspace_(transport_ != nullptr ? transport_->shared_workspace() : nullptr) {}

DistributedCollectiveExecutor::~DistributedCollectiveExecutor() {
  // The watchdog calls AbortStarted (an override that reads this class's
  // members), and the lane thread and the pool may still be leaving a
  // collective whose participants ended: stop the watchdog first, then join
  // them, while the members they use exist.
  StopWatchdog();
  {
    MutexLock l(&lane_mu_);
    lane_.stop = true;
  }
  if (lane_thread_.joinable()) lane_thread_.join();
  StopWorkers();
}

absl::Status DistributedCollectiveExecutor::fatal_error() const {
  MutexLock l(&dmu_);
  return fatal_;
}

void DistributedCollectiveExecutor::ExecuteAsync(const CollectiveParams& params, Tensor input,
                                                 Allocator* allocator,
                                                 CancellationManager* cancellation,
                                                 DoneCallback done) {
  if (num_workers_ > 1) {
    absl::Status s;
    if (params.group_key < 0 || params.group_key >= (1 << kGroupBits) || params.instance_key < 0 ||
        params.instance_key >= (1 << kInstanceBits)) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "group_key ", params.group_key, " / instance_key ", params.instance_key,
          ": collectives across workers need group_key in [0, ", 1 << kGroupBits,
          ") and instance_key in [0, ", 1 << kInstanceBits, ")"));
    } else {
      MutexLock l(&dmu_);
      if (!fatal_.ok()) {
        s = absl::Status(fatal_.code(), absl::StrCat("collectives across workers broke earlier: ",
                                                     fatal_.message()));
      }
    }
    if (!s.ok()) {
      done(AnnotateStatus(s, absl::StrCat(CollectiveTypeName(params.type), " on ", params.device,
                                          " (worker ", worker_names_[worker_rank_], "): ")),
           Tensor());
      return;
    }
  }
  LocalCollectiveExecutor::ExecuteAsync(params, std::move(input), allocator, cancellation,
                                        std::move(done));
}

absl::StatusOr<int> DistributedCollectiveExecutor::LocalGroupSize(const CollectiveParams& p) const {
  if (p.group_size % num_workers_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        CollectiveTypeName(p.type), " on ", p.device, ": group_size ", p.group_size,
        " is not a multiple of the ", num_workers_,
        " workers (every worker must hold the same number of the group's devices)"));
  }
  return p.group_size / num_workers_;
}

void DistributedCollectiveExecutor::Start(std::shared_ptr<Instance> inst) {
  if (num_workers_ == 1) return LocalCollectiveExecutor::Start(std::move(inst));
  const CollectiveParams* ref = &inst->participants[0].params;
  for (const Participant& p : inst->participants) {
    if (p.params.type == CollectiveType::kBroadcastSend) ref = &p.params;
  }
  const std::string description = DescriptorText(MakeDescriptor(*ref, false));
  auto run = std::make_shared<Run>();
  absl::Status fatal;
  {
    MutexLock l(&dmu_);
    fatal = fatal_;
    if (fatal.ok()) {
      // The execution count is what matches executions across workers: the
      // k-th start of (group, instance) here is the k-th everywhere.
      Series& s = series_[{ref->group_key, ref->instance_key}];
      const uint64_t execution = s.next++;
      const uint64_t seq = execution & ((uint64_t{1} << kSequenceBits) - 1);
      run->record = recorder_->Begin(
          {CollectiveTypeName(ref->type), ref->group_key, ref->instance_key, execution,
           ref->node_name, DataTypeString(ref->dtype), ref->shape.DebugString(),
           static_cast<int64_t>(ref->shape.num_elements() * DataTypeSize(ref->dtype))});
      run->tag_base = uint64_t(ref->group_key) << (kInstanceBits + kSequenceBits + kTagBits) |
                      uint64_t(ref->instance_key) << (kSequenceBits + kTagBits) | seq << kTagBits;
      // Every worker decides alike while their descriptions agree: at the
      // first execution, and when all change together. A broadcast always
      // exchanges, to learn which worker holds the sender.
      run->exchange = IsBroadcast(ref->type) || !s.agreed || s.description != description;
      s.agreed = true;
      s.description = description;
      runs_[inst->id] = run;
    }
  }
  if (!fatal.ok()) {
    FailInstance(inst, AnnotateStatus(fatal, absl::StrCat(Describe(*inst), ": collectives across "
                                                                           "workers broke earlier: ")));
    return;
  }
  if (!run->exchange && ref->type == CollectiveType::kAllReduce && workspace_ != nullptr) {
    absl::StatusOr<std::string> name = AllReduceAlgorithm(*ref, *transport_);
    if (name.ok() && IsOrdered(*name, ref->shape.num_elements())) {
      // Straight to the lane (no pool thread's wake-up).
      absl::StatusOr<std::unique_ptr<AllReduceJob>> job = PrepareAllReduce(*inst, *name);
      if (!job.ok()) return FinishRun(inst, job.status(), /*symmetric=*/false, Tensor());
      return SubmitAllReduce(std::move(inst), run, std::move(*job));
    }
  }
  if (!run->exchange && workspace_ != nullptr &&
      (ref->type == CollectiveType::kAllGather || ref->type == CollectiveType::kReduceScatter)) {
    absl::StatusOr<std::string> name = GatherScatterAlgorithm(*inst, *transport_);
    if (name.ok() && IsOrdered(*name, ref->shape.num_elements())) {
      return SubmitGatherScatter(std::move(inst), run, *std::move(name));
    }
  }
  // Off the last arriver's thread: the cross-worker part may wait long on
  // peers, and other instances' parts must not queue behind it.
  workers().Schedule([this, inst = std::move(inst), run = std::move(run)]() mutable {
    RunInstance(std::move(inst), std::move(run));
  });
}

void DistributedCollectiveExecutor::AbortStarted(const std::shared_ptr<Instance>& inst,
                                                 const absl::Status& status, bool is_timeout) {
  if (num_workers_ == 1) return LocalCollectiveExecutor::AbortStarted(inst, status, is_timeout);
  absl::Status s = status;
  if (is_timeout) {
    std::shared_ptr<Run> run;
    {
      MutexLock l(&dmu_);
      auto it = runs_.find(inst->id);
      if (it != runs_.end()) run = it->second;
    }
    if (run != nullptr) {
      MutexLock l(&run->mu);
      // Its transport already failed (a peer's abort, say): the run ends
      // with that error, which is the one to report.
      if (run->failed) return;
    }
    s = absl::DeadlineExceededError(absl::StrCat(
        Describe(*inst), ": ", status.message(), " in its cross-worker part on ",
        worker_names_[worker_rank_], run != nullptr ? PendingPeers(*run) : ""));
  }
  // Data may be in flight between workers: the communicator cannot be
  // resynchronized, so it breaks for good (and the peers learn it).
  Fail(s);
}

std::string DistributedCollectiveExecutor::PendingPeers(const Run& run) const {
  std::vector<std::string> peers;
  {
    MutexLock l(&run.mu);
    if (run.ordered) return LaneState(run.tag_base);
    for (const auto& kv : run.pending) {
      if (kv.first >= 0 && kv.first < num_workers_) peers.push_back(worker_names_[kv.first]);
    }
  }
  if (peers.empty()) return " (no message to or from another worker was pending)";
  return absl::StrCat(", still waiting for ", absl::StrJoin(peers, ", "));
}

void DistributedCollectiveExecutor::Fail(const absl::Status& status) {
  {
    MutexLock l(&dmu_);
    if (!fatal_.ok()) return;
    fatal_ = status;
  }
  transport_->Abort(status);
  BreakLane(status);
  if (on_fatal_error_) on_fatal_error_(status);
}

absl::Status DistributedCollectiveExecutor::ExchangeDescriptors(Transport& t, const Descriptor& mine,
                                                                std::vector<Descriptor>* all) {
  all->assign(num_workers_, Descriptor());
  (*all)[worker_rank_] = mine;
  PendingOps ops;
  for (int q = 0; q < num_workers_; ++q) {
    if (q != worker_rank_) t.RecvAsync(q, kDescriptorTag, &(*all)[q], sizeof(Descriptor), ops.Add());
  }
  for (int q = 0; q < num_workers_; ++q) {
    if (q != worker_rank_) t.SendAsync(q, kDescriptorTag, &mine, sizeof(Descriptor), ops.Add());
  }
  return ops.Wait();
}

absl::Status DistributedCollectiveExecutor::CompareDescriptors(
    const Instance& inst, const std::vector<Descriptor>& all) const {
  // Grouped by description, in worker order, so that every worker reports
  // the same text.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (int q = 0; q < num_workers_; ++q) {
    const std::string text = DescriptorText(all[q]);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == text; });
    if (it == groups.end()) it = groups.insert(groups.end(), {text, {}});
    it->second.push_back(worker_names_[q]);
  }
  if (groups.size() == 1) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& g : groups) {
    parts.push_back(absl::StrCat("worker", g.second.size() > 1 ? "s " : " ",
                                 absl::StrJoin(g.second, ", "), " ",
                                 g.second.size() > 1 ? "have " : "has ", g.first));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Describe(inst), ": the workers disagree on this collective: ", absl::StrJoin(parts, "; ")));
}

void DistributedCollectiveExecutor::RunInstance(std::shared_ptr<Instance> inst,
                                                std::shared_ptr<Run> run) {
  TaggedTransport t(transport_.get(), run);
  const Participant* ref = &inst->participants[0];
  bool has_sender = false;
  for (const Participant& p : inst->participants) {
    if (p.params.type == CollectiveType::kBroadcastSend) {
      ref = &p;
      has_sender = true;
    }
  }
  // Errors every worker sees alike (a disagreement) leave the communicator
  // in step; any other error leaves peers waiting, so it breaks it.
  bool symmetric = false;
  Tensor output;
  std::vector<Tensor> outputs;  // reduce-scatter: one per participant
  std::unique_ptr<AllReduceJob> ordered;
  std::string ordered_algorithm;  // an all-gather or reduce-scatter for the lane
  absl::Status status = [&]() -> absl::Status {
    {
      MutexLock l(&dmu_);
      STRATA_RETURN_IF_ERROR(fatal_);
    }
    std::vector<Descriptor> all;
    if (run->exchange) {
      STRATA_RETURN_IF_ERROR(ExchangeDescriptors(t, MakeDescriptor(ref->params, has_sender), &all));
      if (absl::Status s = CompareDescriptors(*inst, all); !s.ok()) {
        symmetric = true;
        MutexLock l(&dmu_);
        series_[{ref->params.group_key, ref->params.instance_key}].agreed = false;
        return s;
      }
    }
    switch (ref->params.type) {
      case CollectiveType::kAllReduce: {
        STRATA_ASSIGN_OR_RETURN(std::string name, AllReduceAlgorithm(ref->params, t));
        STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AllReduceJob> job, PrepareAllReduce(*inst, name));
        if (job->ordered) {
          ordered = std::move(job);
          return absl::OkStatus();
        }
        STRATA_RETURN_IF_ERROR(RunAllReduce(*job, t));
        output = std::move(job->out);
        return absl::OkStatus();
      }
      case CollectiveType::kAllGather:
      case CollectiveType::kReduceScatter: {
        STRATA_ASSIGN_OR_RETURN(std::string name, GatherScatterAlgorithm(*inst, t));
        if (IsOrdered(name, ref->params.shape.num_elements())) {
          ordered_algorithm = std::move(name);
          return absl::OkStatus();
        }
        if (ref->params.type == CollectiveType::kAllGather) {
          return RunAllGather(*inst, t, name, &output);
        }
        return RunReduceScatter(*inst, t, name, &outputs);
      }
      case CollectiveType::kBroadcastSend:
      case CollectiveType::kBroadcastRecv: {
        absl::Status s = RunBroadcast(*inst, t, all, &output);
        symmetric = s.code() == absl::StatusCode::kInvalidArgument;
        return s;
      }
    }
    return absl::InternalError("unknown collective type");
  }();
  if (status.ok() && ordered != nullptr) return SubmitAllReduce(std::move(inst), run, std::move(ordered));
  if (status.ok() && !ordered_algorithm.empty()) {
    return SubmitGatherScatter(std::move(inst), run, std::move(ordered_algorithm));
  }
  if (ref->params.type == CollectiveType::kReduceScatter) {
    return FinishRunEach(inst, std::move(status), symmetric, std::move(outputs));
  }
  FinishRun(inst, std::move(status), symmetric, std::move(output));
}

void DistributedCollectiveExecutor::FinishRunEach(const std::shared_ptr<Instance>& inst,
                                                  absl::Status status, bool symmetric,
                                                  std::vector<Tensor> outputs) {
  if (!status.ok()) {
    if (!symmetric) Fail(status);
    status = AnnotateStatus(status, absl::StrCat(Describe(*inst), " on worker ",
                                                 worker_names_[worker_rank_], ": "));
  }
  {
    MutexLock l(&dmu_);
    auto it = runs_.find(inst->id);
    if (it != runs_.end()) {
      recorder_->End(it->second->record, status);
      runs_.erase(it);
    }
  }
  // The last FinishParticipant may let the caller destroy this executor:
  // nothing after the loop touches it.
  const int n = static_cast<int>(inst->participants.size());
  outputs.resize(n);
  for (int i = 0; i < n; ++i) FinishParticipant(inst, i, status, status.ok() ? outputs[i] : Tensor());
}

void DistributedCollectiveExecutor::FinishRun(const std::shared_ptr<Instance>& inst,
                                              absl::Status status, bool symmetric, Tensor output) {
  // Every participant shares the one output (its buffer is refcounted).
  FinishRunEach(inst, std::move(status), symmetric,
                std::vector<Tensor>(inst->participants.size(), std::move(output)));
}

void DistributedCollectiveExecutor::SubmitAllReduce(std::shared_ptr<Instance> inst,
                                                    const std::shared_ptr<Run>& run,
                                                    std::unique_ptr<AllReduceJob> job) {
  {
    MutexLock l(&run->mu);
    run->ordered = true;
  }
  std::shared_ptr<AllReduceJob> shared = std::move(job);
  SubmitOrdered(run->tag_base, [this, inst = std::move(inst), shared](absl::Status s) {
    if (s.ok()) s = RunAllReduce(*shared, *transport_);
    FinishRun(inst, s, /*symmetric=*/false, s.ok() ? std::move(shared->out) : Tensor());
  });
}

void DistributedCollectiveExecutor::SubmitGatherScatter(std::shared_ptr<Instance> inst,
                                                        const std::shared_ptr<Run>& run,
                                                        std::string algorithm) {
  {
    MutexLock l(&run->mu);
    run->ordered = true;
  }
  SubmitOrdered(run->tag_base, [this, inst = std::move(inst), algorithm](absl::Status s) {
    if (inst->participants[0].params.type == CollectiveType::kAllGather) {
      Tensor out;
      if (s.ok()) s = RunAllGather(*inst, *transport_, algorithm, &out);
      return FinishRun(inst, s, /*symmetric=*/false, std::move(out));
    }
    std::vector<Tensor> outs;
    if (s.ok()) s = RunReduceScatter(*inst, *transport_, algorithm, &outs);
    FinishRunEach(inst, s, /*symmetric=*/false, std::move(outs));
  });
}

void DistributedCollectiveExecutor::SubmitOrdered(uint64_t id,
                                                  std::function<void(absl::Status)> fn) {
  absl::Status broken;
  {
    MutexLock l(&lane_mu_);
    if (lane_.broken.ok() && lane_.ready.count(id) > 0) {
      // Two in flight under one id: 2^14 executions of one instance at
      // once, or keys reused.
      broken = absl::InternalError(absl::StrCat("two executions of ", LaneIdText(id),
                                                " were queued at once for the shared-memory "
                                                "workspace"));
    } else if (!lane_.broken.ok()) {
      broken = lane_.broken;
    } else {
      lane_.ready.emplace(id, std::move(fn));
      if (worker_rank_ == 0) lane_.order.push_back(id);
      if (!lane_thread_.joinable()) lane_thread_ = std::thread([this] { LaneLoop(); });
      return;  // the lane thread sees it at its next look (Unlock wakes it)
    }
  }
  // Nothing was queued: this run fails alone (a duplicate), or the
  // communicator broke before.
  fn(broken);
}

void DistributedCollectiveExecutor::LaneLoop() {
  CountThisThreadsRunQueueDelay();
  while (true) {
    bool await = false;
    {
      MutexLock l(&lane_mu_);
      // Work: worker 0 has one queued; another worker knows what runs next
      // and has it, or does not know and has something waiting.
      lane_mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (lane_.stop) return true;
        if (worker_rank_ == 0) return !lane_.order.empty();
        return lane_.has_announced ? lane_.ready.count(lane_.announced) > 0 : !lane_.ready.empty();
      });
      if (lane_.stop) return;
      if (!lane_.broken.ok()) {
        // BreakLane failed the queue; wait for the destructor.
        lane_mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return lane_.stop; });
        return;
      }
      await = worker_rank_ != 0 && !lane_.has_announced;
    }
    if (await) {
      // Something waits here: learn which collective runs next.
      absl::StatusOr<uint64_t> next = workspace_->NextAnnouncement();
      if (!next.ok()) {
        Fail(next.status());  // breaks the lane: the queue fails
        continue;
      }
      MutexLock l(&lane_mu_);
      lane_.has_announced = true;
      lane_.announced = *next;
      continue;  // runs it once it has started here
    }
    std::function<void(absl::Status)> fn;
    uint64_t id = 0;
    {
      MutexLock l(&lane_mu_);
      if (!lane_.broken.ok() || lane_.stop) continue;
      if (worker_rank_ == 0) {
        id = lane_.order.front();
        lane_.order.pop_front();
      } else {
        id = lane_.announced;
        lane_.has_announced = false;
      }
      auto it = lane_.ready.find(id);
      fn = std::move(it->second);
      lane_.ready.erase(it);
    }
    absl::Status s = worker_rank_ == 0 ? workspace_->Announce(id) : absl::OkStatus();
    fn(std::move(s));  // a failure breaks the communicator, and the lane with it
  }
}

void DistributedCollectiveExecutor::BreakLane(const absl::Status& status) {
  std::vector<std::function<void(absl::Status)>> queued;
  {
    MutexLock l(&lane_mu_);
    if (!lane_.broken.ok()) return;
    lane_.broken = status;
    for (auto& kv : lane_.ready) queued.push_back(std::move(kv.second));
    lane_.ready.clear();
    lane_.order.clear();
    lane_.has_announced = false;
  }
  for (auto& fn : queued) fn(status);
}

std::string DistributedCollectiveExecutor::LaneIdText(uint64_t id) {
  const uint64_t group = id >> (kInstanceBits + kSequenceBits + kTagBits);
  const uint64_t instance = (id >> (kSequenceBits + kTagBits)) & ((uint64_t{1} << kInstanceBits) - 1);
  const uint64_t execution = (id >> kTagBits) & ((uint64_t{1} << kSequenceBits) - 1);
  return absl::StrCat("group ", group, " instance ", instance, " (execution ", execution,
                      " mod 2^14)");
}

std::string DistributedCollectiveExecutor::LaneState(uint64_t id) const {
  MutexLock l(&lane_mu_);
  if (lane_.ready.count(id) == 0) {
    return " while it ran in the shared-memory workspace (every worker must reach its barriers)";
  }
  if (worker_rank_ == 0) {
    const auto pos = std::find(lane_.order.begin(), lane_.order.end(), id) - lane_.order.begin();
    return absl::StrCat(" while queued for the shared-memory workspace behind ", pos,
                        " other collective(s) of this worker");
  }
  if (lane_.has_announced) {
    return absl::StrCat(" while queued for the shared-memory workspace: ", worker_names_[0],
                        " runs ", LaneIdText(lane_.announced),
                        " first, which has not started on this worker");
  }
  return absl::StrCat(" while queued for the shared-memory workspace, waiting for ",
                      worker_names_[0], " to start the next collective");
}

}  // namespace strata
