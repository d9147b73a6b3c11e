#include "runtime/collective/local_collective_executor.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <numeric>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/run_queue.h"
#include "base/status.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/reduction.h"

namespace strata {

namespace {

// What every participant of one instance must agree on, as text for errors.
std::string Signature(const CollectiveParams& p) {
  std::string s = absl::StrCat(DataTypeString(p.dtype), " ", p.shape.DebugString());
  if (p.type == CollectiveType::kAllReduce || p.type == CollectiveType::kReduceScatter) {
    absl::StrAppend(&s, " merge_op ", MergeOpName(p.merge_op), " final_op ",
                    p.final_op == FinalOp::kDiv ? "Div" : "Id");
  }
  absl::StrAppend(&s, " hint '", p.communication_hint, "'");
  return s;
}

// Signature(a) == Signature(b) without building the strings: the check runs
// on the last arriver's thread, which every participant waits for.
bool SameSignature(const CollectiveParams& a, const CollectiveParams& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.communication_hint != b.communication_hint) {
    return false;
  }
  if (a.type == CollectiveType::kAllReduce || b.type == CollectiveType::kAllReduce ||
      a.type == CollectiveType::kReduceScatter || b.type == CollectiveType::kReduceScatter) {
    return a.merge_op == b.merge_op && a.final_op == b.final_op;
  }
  return true;
}

bool IsBroadcast(CollectiveType t) {
  return t == CollectiveType::kBroadcastSend || t == CollectiveType::kBroadcastRecv;
}

// The checks one participant can make alone, before it joins.
absl::Status CheckParticipant(const CollectiveParams& p, const Tensor& input) {
  if (p.group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("group_size is ", p.group_size, ", must be >= 1"));
  }
  if (p.device.empty()) return absl::InvalidArgumentError("the participant's device name is empty");
  if (p.type != CollectiveType::kBroadcastRecv) {
    if (!input.IsInitialized() || input.dtype() != p.dtype || input.shape() != p.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input is ", input.IsInitialized() ? DataTypeString(input.dtype()) : "uninitialized", " ",
          input.shape().DebugString(), " but the collective is declared ", DataTypeString(p.dtype),
          " ", p.shape.DebugString()));
    }
  }
  if (p.type == CollectiveType::kAllGather && p.shape.dims() == 0) {
    return absl::InvalidArgumentError("all-gather needs an input of rank >= 1, got a scalar");
  }
  STRATA_RETURN_IF_ERROR(CheckReduceScatterShape(p));
  if (p.type == CollectiveType::kAllReduce || p.type == CollectiveType::kReduceScatter) {
    STRATA_RETURN_IF_ERROR(CheckReducible(p.dtype));
  }
  // Rejects unknown hints now rather than once everyone has arrived.
  return SelectAlgorithm(p.type, p.communication_hint, p.group_size, 0,
                         /*same_address_space=*/true)
      .status();
}

// Cores this process may run on: more reducing threads than that only
// take turns on them.
int NumCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// Helper threads for direct all-reduces. A helper that has just finished
// (or started) waits for the next job polling, and only then sleeps:
// collectives come in bursts (a step's buckets, a benchmark's loop), and a
// sleeping thread's futex wake-up (35-60 us on this kind of shared VM) is
// longer than a 1 MiB reduction. It polls with sched_yield after only a few
// microseconds of pause: on two cores shared with other work, a helper that
// kept its core with pause stole it from the ranks being woken (interleaved
// A/B, load 5-7: 13% vs 34% of memcpy at 1 MiB with 2 ranks, 10% vs 34% at
// 4 MiB with 4). The last arriver never waits for a helper to start:
// whatever chunks the helper does not take, it does.
class LocalCollectiveExecutor::Helpers {
 public:
  explicit Helpers(int max_threads) : max_threads_(max_threads) {}
  ~Helpers() {
    std::vector<std::thread> threads;
    {
      MutexLock l(&mu_);
      stop_.store(true, std::memory_order_relaxed);
      wake_.SignalAll();
      threads = std::move(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  int max_threads() const { return max_threads_; }

  // Runs one queued job on the calling thread instead of a helper; false if
  // none is queued.
  bool RunOne() {
    if (queued_.load(std::memory_order_acquire) <= 0) return false;
    std::shared_ptr<DirectReduction> job;
    {
      MutexLock l(&mu_);
      if (queue_.empty()) return false;
      job = PopLocked();
    }
    job->Work();
    return true;
  }

  // Up to `copies` helpers call job->Work() (fewer than max_threads()).
  void Post(const std::shared_ptr<DirectReduction>& job, int copies) {
    copies = std::min(copies, max_threads_);
    if (copies <= 0) return;
    MutexLock l(&mu_);
    while (static_cast<int>(threads_.size()) < copies) threads_.emplace_back([this] { Loop(); });
    for (int i = 0; i < copies; ++i) queue_.push_back(job);
    queued_.fetch_add(copies, std::memory_order_release);
    if (sleeping_ > 0) wake_.SignalAll();
  }

 private:
  void Loop() {
    CountThisThreadsRunQueueDelay();
    for (;;) {
      // A few microseconds of pauses, then yield for up to 300 us: a
      // yielding helper gives its core to any thread that wants it (a rank
      // that was just woken), a pausing one would keep it.
      for (int i = 0; i < 1000 && !HasWork(); ++i) CpuRelax();
      if (!HasWork()) {
        const absl::Time until = absl::Now() + absl::Microseconds(300);
        while (!HasWork() && absl::Now() < until) sched_yield();
      }
      std::shared_ptr<DirectReduction> job;
      {
        MutexLock l(&mu_);
        while (queue_.empty() && !stop_.load(std::memory_order_relaxed)) {
          ++sleeping_;
          wake_.Wait(&mu_);
          --sleeping_;
        }
        if (queue_.empty()) return;  // stopping
        job = PopLocked();
      }
      job->Work();  // a job already done costs one atomic
    }
  }
  std::shared_ptr<DirectReduction> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::shared_ptr<DirectReduction> job = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    return job;
  }
  bool HasWork() const {
    return queued_.load(std::memory_order_acquire) > 0 || stop_.load(std::memory_order_relaxed);
  }

  const int max_threads_;
  Mutex mu_;
  CondVar wake_;
  std::deque<std::shared_ptr<DirectReduction>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int sleeping_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> queued_{0};  // queue_.size(), read without the lock
  std::atomic<bool> stop_{false};
};

LocalCollectiveExecutor::LocalCollectiveExecutor(LocalCollectiveExecutorOptions options)
    : options_(options), helpers_(std::make_unique<Helpers>(NumCores() - 1)) {}

LocalCollectiveExecutor::~LocalCollectiveExecutor() = default;

bool LocalCollectiveExecutor::HelpWhileWaiting() { return helpers_->RunOne(); }

bool LocalCollectiveExecutor::PollWhileWaiting(const CollectiveParams& params) const {
  auto local = LocalGroupSize(params);
  return local.ok() && *local > helpers_->max_threads() + 1;
}

std::string LocalCollectiveExecutor::Describe(const Instance& inst) const {
  const CollectiveParams& p = inst.participants.front().params;
  return absl::StrCat(CollectiveTypeName(p.type), p.node_name.empty() ? "" : " '", p.node_name,
                      p.node_name.empty() ? "" : "'", " (group ", std::get<0>(inst.key),
                      ", instance ", std::get<1>(inst.key), ", step ", std::get<2>(inst.key),
                      ", group_size ", p.group_size, ")");
}

std::string LocalCollectiveExecutor::MissingParticipants(const Instance& inst) const {
  const int size = inst.expected;
  std::set<std::string> arrived;
  for (const Participant& p : inst.participants) arrived.insert(p.params.device);
  auto it = groups_.find(std::get<0>(inst.key));
  std::vector<std::string> missing, present;
  if (it != groups_.end() && static_cast<int>(it->second.members.size()) == it->second.local_size) {
    int rank = 0;
    for (const std::string& d : it->second.members) {
      (arrived.count(d) ? present : missing).push_back(absl::StrCat(d, " (rank ", rank, ")"));
      ++rank;
    }
  } else {
    present.assign(arrived.begin(), arrived.end());
  }
  std::string s = absl::StrCat(size - static_cast<int>(arrived.size()), " of ", size,
                               " participants never arrived: ");
  if (!missing.empty()) {
    absl::StrAppend(&s, "missing ", absl::StrJoin(missing, ", "));
  } else {
    absl::StrAppend(&s, "their devices have never joined group ", std::get<0>(inst.key));
  }
  absl::StrAppend(&s, "; arrived: ", absl::StrJoin(present, ", "));
  return s;
}

void LocalCollectiveExecutor::ExecuteAsync(const CollectiveParams& params, Tensor input,
                                           Allocator* allocator, CancellationManager* cancellation,
                                           DoneCallback done) {
  if (absl::Status s = CheckParticipant(params, input); !s.ok()) {
    done(AnnotateStatus(s, absl::StrCat(CollectiveTypeName(params.type), " on ", params.device, ": ")),
         Tensor());
    return;
  }
  Participant p;
  p.params = params;
  p.input = std::move(input);
  p.allocator = allocator;
  p.cancellation = cancellation;
  p.done = std::move(done);
  const InstanceKey key{params.group_key, params.instance_key, params.step_id};
  if (cancellation != nullptr) {
    // Looked up by key: the instance may not exist yet, or be another's.
    p.token = cancellation->RegisterCallback([this, key](const absl::Status& s) {
      AbortInstance(key, /*id=*/0, s, /*is_timeout=*/false);
    });
    if (p.token == kInvalidCancellationToken) {
      p.done(cancellation->status(), Tensor());
      return;
    }
  }
  bool cancelled = false;
  absl::StatusOr<std::shared_ptr<Instance>> complete = Join(p, &cancelled);
  if (!complete.ok()) {
    Finish(p, complete.status(), Tensor());  // Join did not take `p`
    return;
  }
  if (cancelled) {
    // Cancelled between registering the callback and joining: the callback
    // found nothing to abort, so abort now.
    AbortInstance(key, 0, cancellation->status(), false);
    return;
  }
  if (*complete != nullptr) Launch(*std::move(complete));
}

absl::StatusOr<std::shared_ptr<LocalCollectiveExecutor::Instance>> LocalCollectiveExecutor::Join(
    Participant& p, bool* cancelled) {
  const CollectiveParams& params = p.params;
  const InstanceKey key{params.group_key, params.instance_key, params.step_id};
  STRATA_ASSIGN_OR_RETURN(const int local_size, LocalGroupSize(params));
  MutexLock l(&mu_);
  // 1. Group resolution: the first local_size distinct devices that use a
  // group_key are its members (in this process), for good.
  Group& g = groups_[params.group_key];
  if (g.size == 0) {
    g.size = params.group_size;
    g.local_size = local_size;
  }
  if (g.size != params.group_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        CollectiveTypeName(params.type), " on ", params.device, ": group ", params.group_key,
        " has group_size ", g.size, " (members: ", absl::StrJoin(g.members, ", "),
        ") but this participant says ", params.group_size));
  }
  if (!g.members.count(params.device)) {
    if (static_cast<int>(g.members.size()) == g.local_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          CollectiveTypeName(params.type), " on ", params.device, ": device is not a member of group ",
          params.group_key, ", whose ", g.local_size, " members",
          g.local_size == g.size ? "" : " in this process", " are ", absl::StrJoin(g.members, ", ")));
    }
    g.members.insert(params.device);
  }
  // 2. Instance matching.
  std::shared_ptr<Instance>& inst = instances_[key];
  if (inst == nullptr) {
    inst = std::make_shared<Instance>();
    inst->id = next_instance_id_++;
    inst->key = key;
    inst->expected = g.local_size;
    inst->mailbox = std::make_shared<InProcessMailbox>(g.local_size);
    inst->timeout = params.timeout_seconds > 0 ? absl::Seconds(params.timeout_seconds)
                                               : options_.default_timeout;
    inst->deadline = absl::Now() + inst->timeout;
    ArmWatchdog(inst->deadline);
  }
  for (const Participant& q : inst->participants) {
    if (q.params.device == params.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          CollectiveTypeName(params.type), " on ", params.device, ": this device joined group ",
          params.group_key, " instance ", params.instance_key, " step ", params.step_id,
          " twice (two collective ops with the same keys on one device?)"));
    }
  }
  if (inst->started) {
    return absl::InternalError("collective instance started with a non-member");  // excluded above
  }
  inst->participants.push_back(std::move(p));
  *cancelled = inst->participants.back().cancellation != nullptr &&
               inst->participants.back().cancellation->IsCancelled();
  if (static_cast<int>(inst->participants.size()) < inst->expected || *cancelled) return nullptr;
  inst->started = true;
  inst->running = inst->expected;
  return inst;
}

void LocalCollectiveExecutor::Launch(std::shared_ptr<Instance> inst) {
  // `participants` is fixed now; only this thread reads it until the ranks
  // start.
  std::vector<Participant>& ps = inst->participants;
  const int n = static_cast<int>(ps.size());
  // 1. Agreement. For a broadcast, the one sender's description is the
  // reference; otherwise the first arriver's.
  int ref = 0;
  absl::Status status;
  if (IsBroadcast(ps[0].params.type)) {
    std::vector<std::string> senders;
    for (int i = 0; i < n; ++i) {
      if (ps[i].params.type == CollectiveType::kBroadcastSend) {
        senders.push_back(ps[i].params.device);
        ref = i;
      }
    }
    if (senders.size() > 1 || (senders.empty() && !BroadcastSenderMayBeRemote())) {
      status = absl::InvalidArgumentError(absl::StrCat(
          Describe(*inst), ": a broadcast needs exactly one sender, got ", senders.size(),
          senders.empty() ? "" : " (", absl::StrJoin(senders, ", "), senders.empty() ? "" : ")"));
    }
  }
  for (int i = 0; i < n && status.ok(); ++i) {
    const CollectiveParams& a = ps[ref].params;
    const CollectiveParams& b = ps[i].params;
    const bool same_type = a.type == b.type || (IsBroadcast(a.type) && IsBroadcast(b.type));
    if (!same_type || !SameSignature(a, b)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          Describe(*inst), ": participants disagree: ", b.device, " runs ", CollectiveTypeName(b.type),
          " of ", Signature(b), " but ", a.device, " runs ", CollectiveTypeName(a.type), " of ",
          Signature(a)));
    }
  }
  // 2. Ranks: the order of the device names, as every participant would
  // compute it.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int x, int y) { return ps[x].params.device < ps[y].params.device; });
  for (int r = 0; r < n; ++r) ps[order[r]].rank = r;
  if (!status.ok()) {
    FailInstance(inst, status);  // none has started a rank
    return;
  }
  Start(std::move(inst));
}

void LocalCollectiveExecutor::Start(std::shared_ptr<Instance> inst) {
  std::vector<Participant>& ps = inst->participants;
  const int n = static_cast<int>(ps.size());
  int ref = 0;
  for (int i = 0; i < n; ++i) {
    if (ps[i].params.type == CollectiveType::kBroadcastSend) ref = i;
  }
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[ps[i].rank] = i;
  absl::Status status;
  // 3. The algorithm: from group-wide values only (type, hint, size, bytes),
  // which step 1 checked to be equal, so every rank picks the same.
  {
    const CollectiveParams& a = ps[ref].params;
    auto name = SelectAlgorithm(a.type, a.communication_hint, n,
                                a.shape.num_elements() * DataTypeSize(a.dtype),
                                /*same_address_space=*/true);
    if (name.ok()) inst->algorithm = *name;
    status = name.status();
  }
  // All-gather in one address space is a copy of each input into one
  // buffer (below), unless the hint asks for another algorithm.
  const CollectiveType type = ps[0].params.type;
  const std::string& hint = ps[ref].params.communication_hint;
  if (status.ok() && type == CollectiveType::kAllGather &&
      (hint.empty() || hint == "auto" || hint == "nccl" || hint == "direct" ||
       hint == "shared_memory")) {
    inst->algorithm = "direct";
  }
  // Direct collectives run as one job of chunks (RunDirect). All-reduce and
  // all-gather write one host buffer that all ranks' outputs share, so each
  // element is written once; sharing is safe: a kernel writes into an input
  // in place only when its refcount is one (forward_input_or_allocate_output).
  // Reduce-scatter writes each rank's block into that rank's own output.
  if (status.ok() && inst->algorithm == "direct" &&
      (type == CollectiveType::kAllReduce || type == CollectiveType::kAllGather ||
       type == CollectiveType::kReduceScatter)) {
    status = [&]() -> absl::Status {
      const Participant& rank0 = ps[order[0]];
      std::vector<int64_t> dims(rank0.params.shape.dim_sizes().begin(),
                                rank0.params.shape.dim_sizes().end());
      if (type == CollectiveType::kAllGather) dims[0] *= n;
      if (type == CollectiveType::kReduceScatter) dims[0] /= n;
      STRATA_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
      if (type == CollectiveType::kReduceScatter) {
        for (const Participant& p : ps) {
          STRATA_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(p.allocator, p.params.dtype, shape));
          inst->direct_outputs.push_back(std::move(out));
        }
      } else {
        STRATA_ASSIGN_OR_RETURN(Tensor out,
                                Tensor::Allocate(rank0.allocator, rank0.params.dtype, shape));
        inst->direct_outputs.assign(n, out);
      }
      return absl::OkStatus();
    }();
  }
  if (!status.ok()) {
    FailInstance(inst, status);  // every participant fails the same way
    return;
  }
  if (!inst->direct_outputs.empty()) return RunDirect(std::move(inst));
  // 4. Every rank on its own thread; the last arriver's on this one.
  for (int i = 0; i + 1 < n; ++i) workers_.Schedule([this, inst, i] { RunParticipant(inst, i); });
  RunParticipant(std::move(inst), n - 1);
}

void LocalCollectiveExecutor::RunDirect(std::shared_ptr<Instance> inst) {
  // No rank runs a part of its own: every input is here, so the reduction is
  // one job that this thread starts at once and helpers join, as many as
  // there are other cores (with 4 ranks on 2 cores, 4 reducing threads
  // would only take turns). No barrier: the job's own count says when every
  // element is written.
  std::vector<Participant>& ps = inst->participants;
  const int n = static_cast<int>(ps.size());
  const CollectiveParams& p = ps[0].params;
  std::vector<const void*> inputs(n);
  for (const Participant& q : ps) inputs[q.rank] = q.input.raw_data();
  std::vector<DirectReduction::Segment> segments;
  int64_t segment_elements = p.shape.num_elements();
  const int64_t elem = DataTypeSize(p.dtype);
  if (p.type == CollectiveType::kAllReduce) {
    segments.push_back({inputs, inst->direct_outputs[0].raw_data()});
  } else if (p.type == CollectiveType::kAllGather) {
    // Rank r's input into block r of the shared output.
    char* out = static_cast<char*>(inst->direct_outputs[0].raw_data());
    for (int r = 0; r < n; ++r) segments.push_back({{inputs[r]}, out + r * segment_elements * elem});
  } else {
    // Block b of every input, reduced into rank b's output.
    segment_elements /= n;
    segments.resize(n);
    for (int i = 0; i < n; ++i) {
      DirectReduction::Segment& seg = segments[ps[i].rank];
      seg.output = inst->direct_outputs[i].raw_data();
      for (int r = 0; r < n; ++r) {
        seg.inputs.push_back(static_cast<const char*>(inputs[r]) +
                             ps[i].rank * segment_elements * elem);
      }
    }
  }
  const std::shared_ptr<DirectReduction> job = std::make_shared<DirectReduction>(
      p.merge_op, p.final_op, p.dtype, std::move(segments), segment_elements, n);
  {
    // An abort may have come since the instance started (AbortStarted).
    MutexLock l(&mu_);
    inst->direct = job;
    if (!inst->abort_status.ok()) job->Abort(inst->abort_status);
  }
  helpers_->Post(job, std::min<int64_t>(n, job->num_chunks()) - 1);
  job->Work();
  job->WaitDone();
  absl::Status status = job->status();
  // The waiting participants first: this thread's own caller runs on.
  for (int i = 0; i < n; ++i) {
    absl::Status s = status;
    if (!s.ok()) {
      s = AnnotateStatus(s, absl::StrCat(Describe(*inst), " on ", ps[i].params.device, " (rank ",
                                         ps[i].rank, ", algorithm ", inst->algorithm, "): "));
    }
    Tensor out = s.ok() ? std::move(inst->direct_outputs[i]) : Tensor();
    // The last FinishParticipant may let the caller destroy this executor.
    FinishParticipant(inst, i, std::move(s), std::move(out));
  }
}

void LocalCollectiveExecutor::RunParticipant(std::shared_ptr<Instance> inst, int index) {
  Participant& p = inst->participants[index];
  const int n = static_cast<int>(inst->participants.size());
  int root = 0;
  for (const Participant& q : inst->participants) {
    if (q.params.type == CollectiveType::kBroadcastSend) root = q.rank;
  }
  std::vector<int64_t> out_dims(p.params.shape.dim_sizes().begin(), p.params.shape.dim_sizes().end());
  if (p.params.type == CollectiveType::kAllGather) out_dims[0] *= n;
  if (p.params.type == CollectiveType::kReduceScatter) out_dims[0] /= n;
  AlgorithmParams ap;
  ap.type = p.params.type;
  ap.rank = p.rank;
  ap.size = n;
  ap.root = root;
  ap.dtype = p.params.dtype;
  ap.num_elements = p.params.shape.num_elements();
  ap.merge_op = p.params.merge_op;
  ap.final_op = p.params.final_op;
  ap.scratch_allocator = p.allocator;
  ap.same_address_space = true;  // every rank is a thread of this process

  Tensor output;
  absl::Status status = [&]() -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    STRATA_ASSIGN_OR_RETURN(output, Tensor::Allocate(p.allocator, p.params.dtype, out_shape));
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CollectiveAlgorithm> alg,
                            CreateCollectiveAlgorithm(ap.type, inst->algorithm, ap));
    std::unique_ptr<Transport> transport = inst->mailbox->Connect(p.rank);
    return alg->Run(*transport, p.input.IsInitialized() ? p.input.raw_data() : nullptr,
                    output.raw_data());
  }();
  if (!status.ok()) {
    // The peers would wait for this rank forever: stop them with our error.
    inst->mailbox->Abort(status);
    status = AnnotateStatus(status, absl::StrCat(Describe(*inst), " on ", p.params.device, " (rank ",
                                                 p.rank, ", algorithm ", inst->algorithm, "): "));
    output = Tensor();
  }
  FinishParticipant(inst, index, std::move(status), std::move(output));
}

void LocalCollectiveExecutor::ArmWatchdog(absl::Time deadline) {
  // One timer entry for all instances, at the earliest deadline, rather than
  // one per instance: scheduling wakes the timer thread, a context switch
  // per collective that two busy cores feel; with equal timeouts a later
  // instance's deadline is never the earliest, so steady state schedules
  // nothing.
  if (deadline >= watchdog_at_) return;
  if (watchdog_id_ != 0) timer_.Cancel(watchdog_id_);
  watchdog_at_ = deadline;
  watchdog_id_ = timer_.Schedule(deadline, [this] { Watchdog(); });
}

void LocalCollectiveExecutor::Watchdog() {
  struct Expired {
    InstanceKey key;
    uint64_t id;
    absl::Duration timeout;
  };
  std::vector<Expired> expired;
  {
    MutexLock l(&mu_);
    watchdog_at_ = absl::InfiniteFuture();
    watchdog_id_ = 0;
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (const auto& kv : instances_) {
      const Instance& inst = *kv.second;
      if (inst.deadline <= now) {
        // A started one stays listed until its ranks finish; abort it once.
        if (!inst.timed_out) expired.push_back({kv.first, inst.id, inst.timeout});
        kv.second->timed_out = true;
      } else {
        next = std::min(next, inst.deadline);
      }
    }
    if (next != absl::InfiniteFuture()) ArmWatchdog(next);
  }
  for (const Expired& e : expired) {
    AbortInstance(e.key, e.id,
                  absl::DeadlineExceededError(
                      absl::StrCat("timed out after ", absl::FormatDuration(e.timeout))),
                  /*is_timeout=*/true);
  }
}

void LocalCollectiveExecutor::FinishParticipant(const std::shared_ptr<Instance>& inst, int index,
                                                absl::Status status, Tensor output) {
  {
    MutexLock l(&mu_);
    if (--inst->running == 0) {
      auto it = instances_.find(inst->key);
      if (it != instances_.end() && it->second == inst) instances_.erase(it);
    }
  }
  Finish(inst->participants[index], std::move(status), std::move(output));
}

void LocalCollectiveExecutor::FailInstance(const std::shared_ptr<Instance>& inst,
                                           const absl::Status& status) {
  {
    MutexLock l(&mu_);
    auto it = instances_.find(inst->key);
    if (it != instances_.end() && it->second == inst) instances_.erase(it);
  }
  // Copied, not moved: an AbortStarted that looked the instance up just
  // before it was erased may still read them.
  FailAll(inst->participants, status);
}

void LocalCollectiveExecutor::AbortStarted(const std::shared_ptr<Instance>& inst,
                                           const absl::Status& status, bool is_timeout) {
  absl::Status s = status;
  if (is_timeout) {
    s = absl::DeadlineExceededError(absl::StrCat(Describe(*inst), ": ", status.message(),
                                                 " while running algorithm ", inst->algorithm,
                                                 " (every participant had arrived)"));
  }
  std::shared_ptr<DirectReduction> job;
  {
    MutexLock l(&mu_);
    if (inst->abort_status.ok()) inst->abort_status = s;
    job = inst->direct;
  }
  // A direct all-reduce's job skips its remaining chunks and RunDirect ends
  // every participant with `s`; other algorithms' ranks fail and finish
  // themselves.
  if (job != nullptr) job->Abort(s);
  inst->mailbox->Abort(s);
}

void LocalCollectiveExecutor::AbortInstance(const InstanceKey& key, uint64_t id,
                                            const absl::Status& status, bool is_timeout) {
  std::vector<Participant> waiting;
  std::shared_ptr<Instance> started;
  absl::Status s = status;
  {
    MutexLock l(&mu_);
    auto it = instances_.find(key);
    if (it == instances_.end() || (id != 0 && it->second->id != id)) return;
    Instance& inst = *it->second;
    if (inst.started) {
      started = it->second;
    } else {
      if (is_timeout) {
        s = absl::DeadlineExceededError(
            absl::StrCat(Describe(inst), ": ", status.message(), ": ", MissingParticipants(inst)));
      }
      waiting = std::move(inst.participants);
      instances_.erase(it);
    }
  }
  if (started != nullptr) {
    AbortStarted(started, status, is_timeout);
  } else {
    FailAll(std::move(waiting), s);
  }
}

void LocalCollectiveExecutor::Finish(Participant& p, absl::Status status, Tensor output) {
  // After this, the cancellation callback is not running and never will.
  if (p.cancellation != nullptr && p.token != kInvalidCancellationToken) {
    p.cancellation->DeregisterCallback(p.token);
  }
  DoneCallback done = std::move(p.done);
  done(std::move(status), std::move(output));
}

void LocalCollectiveExecutor::FailAll(std::vector<Participant> ps, const absl::Status& status) {
  for (Participant& p : ps) {
    workers_.Schedule([p = std::move(p), status]() mutable { Finish(p, status, Tensor()); });
  }
}

}  // namespace strata
