// DistributedCollectiveExecutor: each collective's run across the workers
// (the algorithm chosen by size and transport, the local participants'
// inputs merged first), for distributed_collective_executor.cc's instances.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/distributed_collective_executor.h"
#include "runtime/collective/distributed_collective_executor_internal.h"
#include "runtime/collective/reduction.h"

namespace strata {

namespace {

std::vector<const void*> InputsByRank(const std::vector<const Tensor*>& inputs) {
  std::vector<const void*> v;
  for (const Tensor* t : inputs) v.push_back(t->raw_data());
  return v;
}

// This process's participants' inputs, by their local rank.
template <typename Participants>
std::vector<const Tensor*> InputsInRankOrder(const Participants& participants) {
  std::vector<const Tensor*> inputs(participants.size());
  for (const auto& p : participants) inputs[p.rank] = &p.input;
  return inputs;
}

// The participant of local rank 0 (every instance has one).
template <typename Participants>
const auto& RankZero(const Participants& participants) {
  return *std::find_if(participants.begin(), participants.end(),
                       [](const auto& p) { return p.rank == 0; });
}

}  // namespace

absl::StatusOr<std::string> DistributedCollectiveExecutor::AllReduceAlgorithm(
    const CollectiveParams& p, const Transport& t) const {
  return SelectAlgorithm(CollectiveType::kAllReduce, p.communication_hint, num_workers_,
                         p.shape.num_elements() * DataTypeSize(p.dtype),
                         /*same_address_space=*/false, t.kind());
}

bool DistributedCollectiveExecutor::IsOrdered(const std::string& algorithm,
                                              int64_t num_elements) const {
  // The "shm" algorithms (all-reduce, all-gather, reduce-scatter) share one
  // workspace and check only sizes, so two equal-sized gradients swapped
  // between workers would be summed with each other: they run in the order
  // worker 0 announces (see the header). An empty one moves nothing and
  // needs no turn.
  return algorithm == "shm" && workspace_ != nullptr && num_elements > 0;
}

absl::StatusOr<std::unique_ptr<DistributedCollectiveExecutor::AllReduceJob>>
DistributedCollectiveExecutor::PrepareAllReduce(Instance& inst, const std::string& name) {
  const int local = static_cast<int>(inst.participants.size());
  const std::vector<const Tensor*> inputs = InputsInRankOrder(inst.participants);
  const Participant& first = RankZero(inst.participants);
  const CollectiveParams& p = first.params;
  const int64_t n = p.shape.num_elements();
  AlgorithmParams ap;
  ap.type = CollectiveType::kAllReduce;
  ap.rank = worker_rank_;
  ap.size = num_workers_;
  ap.dtype = p.dtype;
  ap.num_elements = n;
  ap.merge_op = p.merge_op;
  // With one device per worker the algorithm's Div (by num_workers) is the
  // global one; otherwise Div comes last, by the global group_size.
  ap.final_op = local == 1 ? p.final_op : FinalOp::kId;
  ap.scratch_allocator = first.allocator;
  auto job = std::make_unique<AllReduceJob>();
  job->ordered = IsOrdered(name, n);
  job->divide = local > 1 && p.final_op == FinalOp::kDiv;
  job->dtype = p.dtype;
  job->num_elements = n;
  job->group_size = p.group_size;
  STRATA_ASSIGN_OR_RETURN(job->alg, CreateCollectiveAlgorithm(ap.type, name, ap));
  const bool in_place = job->alg->SupportsInPlace();
  if (local > 1) {
    // 1. The local inputs merged in one pass, each read once, into the
    // buffer that is then all-reduced (in place where the algorithm can).
    STRATA_ASSIGN_OR_RETURN(job->local_sum, Tensor::Allocate(first.allocator, p.dtype, p.shape));
    std::vector<const void*> ins = InputsByRank(inputs);
    ReduceInputs(p.merge_op, FinalOp::kId, p.dtype, ins.data(), local, 0, n,
                 job->local_sum.raw_data(), 1);
    job->in = job->local_sum.raw_data();
    if (in_place) job->out = job->local_sum;
  } else {
    job->in = first.input.raw_data();
    // In place into the input only when nobody else holds its buffer (the
    // kernel forwarded it: CollectiveOpKernel), as TensorFlow's collective
    // kernels forward theirs: no output buffer to allocate and fault in,
    // and one buffer instead of two in cache.
    if (in_place && first.input.RefCountIsOne() && first.input.allocator() == first.allocator) {
      job->out = first.input;
    }
  }
  if (!job->out.IsInitialized()) {
    STRATA_ASSIGN_OR_RETURN(job->out, Tensor::Allocate(first.allocator, p.dtype, p.shape));
  }
  return job;
}

absl::Status DistributedCollectiveExecutor::RunAllReduce(AllReduceJob& job, Transport& t) {
  // 2. Across workers.
  STRATA_RETURN_IF_ERROR(job.alg->Run(t, job.in, job.out.raw_data()));
  // 3. Every local participant shares `out` (a kernel writes into an input
  // in place only when its refcount is one, so sharing is safe).
  if (job.divide) DivideBy(job.dtype, job.out.raw_data(), job.num_elements, job.group_size);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DistributedCollectiveExecutor::GatherScatterAlgorithm(
    const Instance& inst, const Transport& t) const {
  const CollectiveParams& p = inst.participants[0].params;
  const int64_t bytes = p.shape.num_elements() * DataTypeSize(p.dtype);
  const int64_t per_worker = p.type == CollectiveType::kAllGather
                                 ? bytes * static_cast<int64_t>(inst.participants.size())
                                 : bytes;
  return SelectAlgorithm(p.type, p.communication_hint, num_workers_, per_worker,
                         /*same_address_space=*/false, t.kind());
}

absl::Status DistributedCollectiveExecutor::RunAllGather(Instance& inst, Transport& t,
                                                         const std::string& algorithm, Tensor* out) {
  const int local = static_cast<int>(inst.participants.size());
  const std::vector<const Tensor*> inputs = InputsInRankOrder(inst.participants);
  const Participant& first = RankZero(inst.participants);
  const CollectiveParams& p = first.params;
  const int64_t block = p.shape.num_elements();
  const size_t block_bytes = block * DataTypeSize(p.dtype);
  std::vector<int64_t> dims(p.shape.dim_sizes().begin(), p.shape.dim_sizes().end());
  dims[0] *= p.group_size;
  STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
  AlgorithmParams ap;
  ap.type = CollectiveType::kAllGather;
  ap.rank = worker_rank_;
  ap.size = num_workers_;
  ap.dtype = p.dtype;
  ap.num_elements = block * local;  // one worker's blocks, in local rank order
  ap.scratch_allocator = first.allocator;
  STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(ap.type, algorithm, ap));
  STRATA_ASSIGN_OR_RETURN(*out, Tensor::Allocate(first.allocator, p.dtype, out_shape));
  const void* in = inputs[0]->raw_data();
  Tensor staged;
  if (local > 1) {
    STRATA_ASSIGN_OR_RETURN(staged, AllocateScratch(ap, block_bytes * local));
    for (int r = 0; r < local; ++r) {
      CopyBytes(static_cast<char*>(staged.raw_data()) + r * block_bytes, inputs[r]->raw_data(),
                block_bytes);
    }
    in = staged.raw_data();
  }
  return alg->Run(t, in, out->raw_data());
}

absl::Status DistributedCollectiveExecutor::RunReduceScatter(Instance& inst, Transport& t,
                                                             const std::string& algorithm,
                                                             std::vector<Tensor>* outs) {
  const int local = static_cast<int>(inst.participants.size());
  std::vector<const Participant*> by_rank(local);
  for (const Participant& p : inst.participants) by_rank[p.rank] = &p;
  const Participant& first = *by_rank[0];
  const CollectiveParams& p = first.params;
  const int group = p.group_size;  // local * num_workers_, blocks of the input
  const int64_t total = p.shape.num_elements();
  const int64_t block = total / group;
  const size_t elem = DataTypeSize(p.dtype);
  // 1. This worker's inputs merged (its own input with one device).
  const void* merged = by_rank[0]->input.raw_data();
  Tensor local_sum;
  AlgorithmParams ap;
  ap.type = CollectiveType::kReduceScatter;
  ap.rank = worker_rank_;
  ap.size = num_workers_;
  ap.dtype = p.dtype;
  ap.num_elements = total;  // num_workers_ regions of `local` blocks
  ap.merge_op = p.merge_op;
  ap.final_op = FinalOp::kId;  // divided by the whole group below
  ap.scratch_allocator = first.allocator;
  if (local > 1) {
    STRATA_ASSIGN_OR_RETURN(local_sum, AllocateScratch(ap, total * elem));
    std::vector<const void*> inputs(local);
    for (int r = 0; r < local; ++r) inputs[r] = by_rank[r]->input.raw_data();
    ReduceInputs(p.merge_op, FinalOp::kId, p.dtype, inputs.data(), local, 0, total,
                 local_sum.raw_data(), 1);
    merged = local_sum.raw_data();
  }
  // 2. Across the workers: worker w gets region w, the blocks of its
  // participants (global ranks w * local ... w * local + local - 1).
  STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(ap.type, algorithm, ap));
  Tensor region;
  STRATA_ASSIGN_OR_RETURN(region, AllocateScratch(ap, block * local * elem));
  STRATA_RETURN_IF_ERROR(alg->Run(t, merged, region.raw_data()));
  if (p.final_op == FinalOp::kDiv) DivideBy(p.dtype, region.raw_data(), block * local, group);
  // 3. Each participant's block.
  std::vector<int64_t> dims(p.shape.dim_sizes().begin(), p.shape.dim_sizes().end());
  dims[0] /= group;
  STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
  outs->assign(local, Tensor());
  for (int i = 0; i < local; ++i) {
    const Participant& q = inst.participants[i];
    STRATA_ASSIGN_OR_RETURN((*outs)[i], Tensor::Allocate(q.allocator, p.dtype, out_shape));
    CopyBytes((*outs)[i].raw_data(), static_cast<const char*>(region.raw_data()) + q.rank * block * elem,
              block * elem);
  }
  return absl::OkStatus();
}

absl::Status DistributedCollectiveExecutor::RunBroadcast(Instance& inst, Transport& t,
                                                         const std::vector<Descriptor>& all,
                                                         Tensor* out) {
  std::vector<std::string> senders;
  int root = -1;
  for (int q = 0; q < static_cast<int>(all.size()); ++q) {
    if (all[q].has_sender) {
      senders.push_back(worker_names_[q]);
      root = q;
    }
  }
  if (senders.size() != 1) {
    // Every worker has every flag, so every worker fails alike.
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(inst), ": a broadcast needs exactly one sender among the workers, got ",
        senders.size(), senders.empty() ? "" : " (on ", absl::StrJoin(senders, ", "),
        senders.empty() ? "" : ")"));
  }
  const Participant* sender = nullptr;
  for (const Participant& p : inst.participants) {
    if (p.params.type == CollectiveType::kBroadcastSend) sender = &p;
  }
  const Participant& first = sender != nullptr ? *sender : inst.participants[0];
  const CollectiveParams& p = first.params;
  AlgorithmParams ap;
  ap.type = CollectiveType::kBroadcastSend;
  ap.rank = worker_rank_;
  ap.size = num_workers_;
  ap.root = root;
  ap.dtype = p.dtype;
  ap.num_elements = p.shape.num_elements();
  ap.scratch_allocator = first.allocator;
  STRATA_ASSIGN_OR_RETURN(std::string name,
                          SelectAlgorithm(ap.type, p.communication_hint, num_workers_,
                                          ap.num_elements * DataTypeSize(p.dtype),
                                          /*same_address_space=*/false, t.kind()));
  STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(ap.type, name, ap));
  STRATA_ASSIGN_OR_RETURN(*out, Tensor::Allocate(first.allocator, p.dtype, p.shape));
  if (absl::Status s = alg->Run(t, sender != nullptr ? sender->input.raw_data() : nullptr,
                                out->raw_data());
      !s.ok()) {
    // Not a disagreement: RunInstance must break the communicator.
    return s.code() == absl::StatusCode::kInvalidArgument ? absl::InternalError(s.message()) : s;
  }
  return absl::OkStatus();
}

}  // namespace strata
