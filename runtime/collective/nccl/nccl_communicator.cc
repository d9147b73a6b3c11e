#include "runtime/collective/nccl/nccl_communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "runtime/collective/nccl/nccl_unique_id.h"

namespace strata {
namespace {

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes,
              "nccl_unique_id.h disagrees with nccl.h on the unique id's size");

// How long a poll of a non-blocking communicator sleeps between checks: short
// enough that connection set-up is not slowed noticeably, long enough not to
// take a core from the training threads.
constexpr absl::Duration kPollInterval = absl::Microseconds(200);

// NCCL is an asynchronous library: a result that is not an error (yet).
bool IsPending(ncclResult_t r) { return r == ncclInProgress; }

absl::Status CheckOrdinals(const std::vector<int>& ordinals) {
  if (ordinals.empty()) {
    return absl::InvalidArgumentError("an NCCL clique needs at least one local GPU, got none");
  }
  std::set<int> seen;
  for (int o : ordinals) {
    if (o < 0) return absl::InvalidArgumentError(absl::StrCat("GPU ordinal ", o, " is negative"));
    if (!seen.insert(o).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPU ordinal ", o, " appears twice in [", absl::StrJoin(ordinals, ","),
          "]: NCCL gives each rank of a process its own GPU"));
    }
  }
  return absl::OkStatus();
}

// The GPUs exist: a clear FailedPrecondition on a machine without them rather
// than NCCL's "unhandled cuda error".
absl::Status CheckDevices(const std::vector<int>& ordinals) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clears the sticky-free error so later calls are unaffected
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL needs CUDA GPUs, and none is usable here: cudaGetDeviceCount: ",
        cudaGetErrorString(e)));
  }
  for (int o : ordinals) {
    if (o >= count) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ordinal ", o, " does not exist: this machine has ",
                                                        count, " CUDA device(s)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ncclDataType_t> ToNcclDataType(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT: return ncclFloat32;
    case DT_HALF: return ncclFloat16;
    case DT_BFLOAT16: return ncclBfloat16;
    case DT_DOUBLE: return ncclFloat64;
    case DT_INT32: return ncclInt32;
    case DT_INT64: return ncclInt64;
    case DT_INT8: return ncclInt8;
    case DT_UINT8: return ncclUint8;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "NCCL collectives do not support dtype ", DataTypeString(dtype),
      "; supported: float32, float16, bfloat16, float64, int32, int64, int8, uint8"));
}

absl::StatusOr<ncclRedOp_t> ToNcclRedOp(MergeOp op, FinalOp final_op) {
  if (final_op == FinalOp::kDiv) {
    if (op == MergeOp::kAdd) return ncclAvg;
    return absl::InvalidArgumentError(absl::StrCat(
        "final_op Div is defined only after merge_op Add (a mean), got merge_op ", MergeOpName(op)));
  }
  switch (op) {
    case MergeOp::kAdd: return ncclSum;
    case MergeOp::kMul: return ncclProd;
    case MergeOp::kMin: return ncclMin;
    case MergeOp::kMax: return ncclMax;
  }
  return absl::InvalidArgumentError("unknown merge op");
}

absl::Status NcclResultToStatus(ncclResult_t result, const std::string& context,
                                const std::string& last_error) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(context, ": NCCL error ", static_cast<int>(result), " (",
                                 ncclGetErrorString(result), ")");
  if (!last_error.empty()) absl::StrAppend(&msg, ": ", last_error);
  switch (result) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(msg);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<std::string> MakeNcclUniqueId() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return NcclResultToStatus(r, "ncclGetUniqueId", ncclGetLastError(nullptr));
  return std::string(id.internal, sizeof(id.internal));
}

NcclClique::NcclClique(int first_rank, int nranks, std::vector<int> ordinals,
                       NcclCliqueOptions options)
    : first_rank_(first_rank),
      nranks_(nranks),
      ordinals_(std::move(ordinals)),
      options_(std::move(options)) {}

std::string NcclClique::Describe() const {
  const int last = first_rank_ + num_local() - 1;
  std::string ranks = num_local() == 1 ? absl::StrCat("rank ", first_rank_)
                                       : absl::StrCat("ranks ", first_rank_, "-", last);
  return absl::StrCat("NCCL clique of ", nranks_, " rank", nranks_ == 1 ? "" : "s", " (", ranks,
                      num_local() == nranks_ ? "" : " here", " on GPU", num_local() == 1 ? " " : "s ",
                      absl::StrJoin(ordinals_, ","), ")");
}

std::string NcclClique::LastError(ncclComm_t comm) const {
  const char* e = ncclGetLastError(comm);
  return e == nullptr ? "" : e;
}

absl::StatusOr<std::unique_ptr<NcclClique>> NcclClique::CreateLocal(const std::vector<int>& ordinals,
                                                                    NcclCliqueOptions options) {
  STRATA_RETURN_IF_ERROR(CheckOrdinals(ordinals));
  STRATA_RETURN_IF_ERROR(CheckDevices(ordinals));
  const int n = static_cast<int>(ordinals.size());
  std::unique_ptr<NcclClique> clique(new NcclClique(0, n, ordinals, std::move(options)));
  {
    MutexLock l(&clique->call_mu_);
    clique->comms_.assign(n, nullptr);
    // Every rank is here, so init cannot wait for an absent peer: the
    // blocking ncclCommInitAll is bounded.
    ncclResult_t r = ncclCommInitAll(clique->comms_.data(), n, ordinals.data());
    if (r != ncclSuccess) {
      clique->comms_.clear();
      return NcclResultToStatus(r, absl::StrCat("ncclCommInitAll for ", clique->Describe()),
                                clique->LastError(nullptr));
    }
  }
  clique->StartWatchdog();
  return clique;
}

absl::StatusOr<std::unique_ptr<NcclClique>> NcclClique::CreateRank(int rank, int nranks, int ordinal,
                                                                   KeyValueStore* store,
                                                                   const std::string& key,
                                                                   absl::Duration timeout) {
  NcclCliqueOptions options;
  options.init_timeout = timeout;
  return CreateRanks(rank, nranks, {ordinal}, store, key, std::move(options));
}

absl::StatusOr<std::unique_ptr<NcclClique>> NcclClique::CreateRanks(
    int first_rank, int nranks, const std::vector<int>& ordinals, KeyValueStore* store,
    const std::string& key, NcclCliqueOptions options) {
  STRATA_RETURN_IF_ERROR(CheckOrdinals(ordinals));
  const int n = static_cast<int>(ordinals.size());
  if (nranks < 1 || first_rank < 0 || first_rank + n > nranks) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL clique of ", nranks, " ranks: local ranks ",
                                                   first_rank, "..", first_rank + n - 1,
                                                   " are out of range"));
  }
  if (options.init_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("NCCL clique init_timeout must be positive");
  }
  const absl::Time deadline = absl::Now() + options.init_timeout;
  // 1. The unique id. Rank 0 is local rank 0 of the process holding it, so
  // only first_rank says who publishes. Done before touching a GPU so that
  // the peers are not kept waiting by this process's device checks.
  STRATA_ASSIGN_OR_RETURN(
      std::string id_bytes,
      ExchangeNcclUniqueId(store, key, first_rank, nranks, options.init_timeout, MakeNcclUniqueId));
  STRATA_RETURN_IF_ERROR(CheckDevices(ordinals));
  ncclUniqueId id;
  std::memcpy(id.internal, id_bytes.data(), sizeof(id.internal));

  // 2. Non-blocking init of every local rank in one group, polled against
  // the deadline: a peer that never joins leaves our comms ncclInProgress.
  std::unique_ptr<NcclClique> clique(new NcclClique(first_rank, nranks, ordinals, std::move(options)));
  {
    MutexLock l(&clique->call_mu_);
    clique->comms_.assign(n, nullptr);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    absl::Status status;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < n && r == ncclSuccess; ++i) {
      // ncclCommInitRankConfig binds the communicator to the current device.
      if (cudaError_t e = cudaSetDevice(ordinals[i]); e != cudaSuccess) {
        status = absl::FailedPreconditionError(
            absl::StrCat("cudaSetDevice(", ordinals[i], "): ", cudaGetErrorString(e)));
        break;
      }
      r = ncclCommInitRankConfig(&clique->comms_[i], nranks, id, first_rank + i, &config);
      if (IsPending(r)) r = ncclSuccess;
    }
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess && !IsPending(end)) r = end;
    if (status.ok() && r != ncclSuccess) {
      status = NcclResultToStatus(r, absl::StrCat("ncclCommInitRankConfig for ", clique->Describe()),
                                  clique->LastError(nullptr));
    }
    if (status.ok()) {
      status = clique->WaitReadyLocked(
          deadline, absl::StrCat("initializing (unique id under key '", key, "')"));
    }
    if (!status.ok()) {
      clique->MarkBroken(status);
      clique->AbortCommsLocked();
      return status;
    }
  }
  clique->StartWatchdog();
  return clique;
}

NcclClique::~NcclClique() {
  {
    MutexLock l(&state_mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (watchdog_.joinable()) watchdog_.join();
  MutexLock l(&call_mu_);
  if (broken_.load()) {
    AbortCommsLocked();
    return;
  }
  // Finalize flushes the work still queued on the streams; a communicator
  // that cannot finalize (a peer is gone) is aborted instead of hanging the
  // destructor.
  bool ok = true;
  for (ncclComm_t c : comms_) {
    if (c != nullptr) {
      ncclResult_t r = ncclCommFinalize(c);
      ok = ok && (r == ncclSuccess || IsPending(r));
    }
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (ncclComm_t c : comms_) {
    if (c == nullptr || !ok) continue;
    ncclResult_t state = ncclInProgress;
    while (ok) {
      if (ncclCommGetAsyncError(c, &state) != ncclSuccess || (!IsPending(state) && state != ncclSuccess)) {
        ok = false;
      } else if (!IsPending(state)) {
        break;
      } else if (absl::Now() > deadline) {
        ok = false;
      } else {
        absl::SleepFor(kPollInterval);
      }
    }
  }
  if (!ok) {
    AbortCommsLocked();
    return;
  }
  for (ncclComm_t& c : comms_) {
    if (c != nullptr) ncclCommDestroy(c);
    c = nullptr;
  }
}

void NcclClique::StartWatchdog() {
  if (options_.watchdog_interval <= absl::ZeroDuration()) return;
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

void NcclClique::WatchdogLoop() {
  for (;;) {
    {
      MutexLock l(&state_mu_);
      if (!stop_) stop_cv_.WaitWithTimeout(&state_mu_, options_.watchdog_interval);
      if (stop_) return;
    }
    // A launch in progress holds call_mu_ and polls the same errors itself;
    // skipping this tick avoids waiting behind it.
    if (!call_mu_.TryLock()) continue;
    absl::Status s = CheckAsyncErrorsLocked();
    call_mu_.Unlock();
    NotifyIfBroken();
    if (!s.ok()) return;  // broken for good: nothing left to watch
  }
}

absl::Status NcclClique::status() const {
  MutexLock l(&state_mu_);
  return status_;
}

bool NcclClique::MarkBroken(const absl::Status& s) {
  {
    MutexLock l(&state_mu_);
    if (!status_.ok()) return false;
    status_ = s;
  }
  broken_.store(true);
  return true;
}

void NcclClique::NotifyIfBroken() {
  absl::Status s;
  {
    MutexLock l(&state_mu_);
    if (status_.ok() || notified_) return;
    notified_ = true;
    s = status_;
  }
  if (options_.on_error) options_.on_error(s);
}

void NcclClique::AbortCommsLocked() {
  for (ncclComm_t& c : comms_) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;
  }
}

void NcclClique::Abort(const absl::Status& reason) {
  MarkBroken(reason.ok() ? absl::AbortedError("NCCL clique aborted") : reason);
  // A launch polling a non-blocking communicator sees broken_ and releases
  // call_mu_ within one poll interval.
  {
    MutexLock l(&call_mu_);
    AbortCommsLocked();
  }
  NotifyIfBroken();
}

absl::Status NcclClique::CheckAsyncErrors() {
  absl::Status s;
  {
    MutexLock l(&call_mu_);
    s = CheckAsyncErrorsLocked();
  }
  NotifyIfBroken();
  return s;
}

absl::Status NcclClique::CheckAsyncErrorsLocked() {
  if (broken_.load()) return status();
  for (int i = 0; i < static_cast<int>(comms_.size()); ++i) {
    if (comms_[i] == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comms_[i], &state);
    if (r == ncclSuccess && (state == ncclSuccess || IsPending(state))) continue;
    absl::Status s = NcclResultToStatus(
        r != ncclSuccess ? r : state,
        absl::StrCat(Describe(), ": rank ", first_rank_ + i, " (GPU ", ordinals_[i],
                     ") reported an asynchronous error"),
        LastError(comms_[i]));
    MarkBroken(s);
    AbortCommsLocked();
    return status();
  }
  return absl::OkStatus();
}

absl::Status NcclClique::WaitReadyLocked(absl::Time deadline, const std::string& what) {
  for (;;) {
    std::vector<int> pending;
    for (int i = 0; i < static_cast<int>(comms_.size()); ++i) {
      if (comms_[i] == nullptr) continue;
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comms_[i], &state);
      if (r == ncclSuccess && IsPending(state)) {
        pending.push_back(i);
        continue;
      }
      if (r != ncclSuccess || state != ncclSuccess) {
        absl::Status s = NcclResultToStatus(
            r != ncclSuccess ? r : state,
            absl::StrCat(Describe(), " ", what, ": rank ", first_rank_ + i, " (GPU ", ordinals_[i], ")"),
            LastError(comms_[i]));
        MarkBroken(s);
        AbortCommsLocked();
        return s;
      }
    }
    if (pending.empty()) return absl::OkStatus();
    if (broken_.load()) return status();
    if (absl::Now() >= deadline) {
      std::vector<std::string> names;
      for (int i : pending) names.push_back(absl::StrCat(first_rank_ + i, " (GPU ", ordinals_[i], ")"));
      absl::Status s = absl::DeadlineExceededError(absl::StrCat(
          Describe(), " ", what, ": timed out with local rank", pending.size() == 1 ? " " : "s ",
          absl::StrJoin(names, ", "), " still waiting",
          nranks_ > num_local() ? " (for ranks in other processes that never joined?)" : ""));
      MarkBroken(s);
      AbortCommsLocked();
      return s;
    }
    absl::SleepFor(kPollInterval);
  }
}

absl::Status NcclClique::Launch(const std::string& what, absl::Span<const NcclLaunch> launches,
                                bool needs_send, absl::Time deadline,
                                const std::function<ncclResult_t(int, ncclComm_t, cudaStream_t)>& issue) {
  absl::Status s = IssueGrouped(what, launches, needs_send, deadline, issue);
  // on_error may call back into the clique (Abort), so it runs unlocked.
  NotifyIfBroken();
  return s;
}

absl::Status NcclClique::IssueGrouped(const std::string& what, absl::Span<const NcclLaunch> launches,
                                      bool needs_send, absl::Time deadline,
                                      const std::function<ncclResult_t(int, ncclComm_t, cudaStream_t)>& issue) {
  if (static_cast<int>(launches.size()) != num_local()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " on ", Describe(), ": got ", launches.size(),
                                                   " launches, one per local rank (", num_local(),
                                                   ") expected"));
  }
  for (int i = 0; i < num_local(); ++i) {
    const NcclLaunch& l = launches[i];
    if (l.stream == nullptr || l.recv == nullptr || (needs_send && l.send == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " on ", Describe(), ": local rank ", i, " (rank ", first_rank_ + i,
          ") has a null ", l.stream == nullptr ? "stream" : l.recv == nullptr ? "recv buffer" : "send buffer"));
    }
  }
  MutexLock l(&call_mu_);
  if (broken_.load()) {
    absl::Status s = status();
    return absl::FailedPreconditionError(
        absl::StrCat(what, " on ", Describe(), ": the clique is broken: ", s.message()));
  }
  ncclResult_t first = ncclSuccess;
  int failed = -1;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) {
    return NcclResultToStatus(r, absl::StrCat(what, " on ", Describe(), ": ncclGroupStart"),
                              LastError(nullptr));
  }
  for (int i = 0; i < num_local(); ++i) {
    r = issue(i, comms_[i], static_cast<cudaStream_t>(launches[i].stream));
    if (r != ncclSuccess && !IsPending(r) && first == ncclSuccess) {
      first = r;
      failed = i;
    }
  }
  r = ncclGroupEnd();
  if (first == ncclSuccess && r != ncclSuccess && !IsPending(r)) first = r;
  if (first != ncclSuccess) {
    absl::Status s = NcclResultToStatus(
        first,
        absl::StrCat(what, " on ", Describe(),
                     failed >= 0 ? absl::StrCat(": rank ", first_rank_ + failed) : ": ncclGroupEnd"),
        LastError(failed >= 0 ? comms_[failed] : nullptr));
    // Bad arguments leave the communicators usable; anything else may have
    // left some ranks launched and others not, which only an abort undoes.
    if (!absl::IsInvalidArgument(s)) {
      MarkBroken(s);
      AbortCommsLocked();
    }
    return s;
  }
  return WaitReadyLocked(deadline, what);
}

absl::Status NcclClique::AllReduce(absl::Span<const NcclLaunch> launches, int64_t count,
                                   DataType dtype, MergeOp op, FinalOp final_op, absl::Time deadline) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type, ToNcclDataType(dtype));
  STRATA_ASSIGN_OR_RETURN(ncclRedOp_t red, ToNcclRedOp(op, final_op));
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("all-reduce count ", count, " < 0"));
  return Launch(absl::StrCat("all-reduce (", MergeOpName(op), final_op == FinalOp::kDiv ? ", Div" : "",
                             ") of ", count, " ", DataTypeString(dtype)),
                launches, /*needs_send=*/true, deadline,
                [&](int i, ncclComm_t comm, cudaStream_t stream) {
                  return ncclAllReduce(launches[i].send, launches[i].recv, count, type, red, comm,
                                       stream);
                });
}

absl::Status NcclClique::ReduceScatter(absl::Span<const NcclLaunch> launches, int64_t recv_count,
                                       DataType dtype, MergeOp op, FinalOp final_op,
                                       absl::Time deadline) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type, ToNcclDataType(dtype));
  STRATA_ASSIGN_OR_RETURN(ncclRedOp_t red, ToNcclRedOp(op, final_op));
  if (recv_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduce-scatter count ", recv_count, " < 0"));
  }
  return Launch(absl::StrCat("reduce-scatter (", MergeOpName(op), final_op == FinalOp::kDiv ? ", Div" : "",
                             ") of ", recv_count, " ", DataTypeString(dtype), " per rank"),
                launches, /*needs_send=*/true, deadline,
                [&](int i, ncclComm_t comm, cudaStream_t stream) {
                  return ncclReduceScatter(launches[i].send, launches[i].recv, recv_count, type, red,
                                           comm, stream);
                });
}

absl::Status NcclClique::AllGather(absl::Span<const NcclLaunch> launches, int64_t send_count,
                                   DataType dtype, absl::Time deadline) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type, ToNcclDataType(dtype));
  if (send_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("all-gather count ", send_count, " < 0"));
  }
  return Launch(absl::StrCat("all-gather of ", send_count, " ", DataTypeString(dtype), " per rank"),
                launches, /*needs_send=*/true, deadline,
                [&](int i, ncclComm_t comm, cudaStream_t stream) {
                  return ncclAllGather(launches[i].send, launches[i].recv, send_count, type, comm,
                                       stream);
                });
}

absl::Status NcclClique::Broadcast(absl::Span<const NcclLaunch> launches, int64_t count,
                                   DataType dtype, int root, absl::Time deadline) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type, ToNcclDataType(dtype));
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("broadcast count ", count, " < 0"));
  if (root < 0 || root >= nranks_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ",
                                                   Describe()));
  }
  const int local_root = root - first_rank_;
  if (local_root >= 0 && local_root < num_local() && launches.size() == ordinals_.size() &&
      launches[local_root].send == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast on ", Describe(), ": root rank ", root,
                                                   " has a null send buffer"));
  }
  return Launch(absl::StrCat("broadcast of ", count, " ", DataTypeString(dtype), " from rank ", root),
                launches, /*needs_send=*/false, deadline,
                [&](int i, ncclComm_t comm, cudaStream_t stream) {
                  return ncclBroadcast(launches[i].send, launches[i].recv, count, type, root, comm,
                                       stream);
                });
}

}  // namespace strata
