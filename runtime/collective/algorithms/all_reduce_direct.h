// AllReduceDirect: all-reduce for ranks that share one address space (the
// virtual CPU devices of one process). Rather than moving chunks through the
// transport, the ranks exchange only the addresses of their input and output
// buffers (one small message to each peer); then rank r reduces its 1/n
// slice of the element range by reading all n inputs directly, in one pass
// (ReduceInputs: every input read once, the result written once, Div fused),
// and writes the slice to every distinct output buffer. A final exchange of
// empty messages is the barrier after which no rank reads a peer's buffers,
// so each rank may return (and its peers free their buffers).
//
// When every rank passes the same output buffer (LocalCollectiveExecutor
// hands all ranks one shared host tensor), each element is written exactly
// once; with distinct outputs (the N-rank test harness) each slice is also
// copied to the n-1 other outputs.
//
//   AlgorithmParams p = ...;  p.same_address_space = true;
//   STRATA_ASSIGN_OR_RETURN(auto alg, CreateCollectiveAlgorithm(kAllReduce, "direct", p));
//   STRATA_RETURN_IF_ERROR(alg->Run(transport, input, shared_output));
//
// When the caller already knows every rank's input and gives all ranks one
// output (AlgorithmParams::peer_inputs), the address exchange is skipped and
// the barrier is the only synchronization. LocalCollectiveExecutor runs the
// same reduction as a DirectReduction instead (below), with no ranks.
//
// Every rank ends with bitwise the same result: each element is reduced by
// one rank, in rank order. Create fails (FailedPrecondition) unless
// params.same_address_space: addresses mean nothing across processes.
//
// Thread-safety: one object per rank per collective. Ownership: none; the
// peers' buffers are read only between the two exchanges.
//
// DirectReduction is the same reduction as one job that is not tied to
// ranks: once every input is known (LocalCollectiveExecutor, after the last
// participant arrived), the element range is cut into chunks that any
// number of threads take in turn, so the reduction needs no rank to be
// scheduled and no barrier: the last arriver starts at once, a helper thread
// joins whenever it gets a core, and the job is over when every chunk is.
//
//   DirectReduction job(MergeOp::kAdd, FinalOp::kId, DT_FLOAT, {in0, in1}, n, out, 2);
//   // on any threads, concurrently:  job.Work();
//   job.WaitDone();            // every chunk written (or skipped after Abort)
//   absl::Status s = job.status();
//
// Each element is reduced once, in input order, by ReduceInputs, whichever
// thread takes its chunk: the result does not depend on the threads.
//
// Segments: a job may write several outputs of one length, each from its
// own inputs. Reduce-scatter is n segments (segment b: every input's block
// b into rank b's output); all-gather is n one-input segments (rank r's
// input copied to block r of the shared output; a segment of one input is
// a copy, of any dtype).
// Thread-safety: every method may be called concurrently. Ownership: the
// inputs and output are not owned; they must stay valid until WaitDone()
// returned (no thread touches them once Done()).
#ifndef STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_DIRECT_H_
#define STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_DIRECT_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "runtime/collective/algorithm.h"

namespace strata {

class AllReduceDirect : public CollectiveAlgorithm {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveAlgorithm>> Create(const AlgorithmParams& p);
  absl::Status Run(Transport& t, const void* input, void* output) override;

 private:
  explicit AllReduceDirect(const AlgorithmParams& p) : p_(p) {}
  int64_t SliceBegin(int r) const;  // element offset of rank r's slice

  const AlgorithmParams p_;
};

class DirectReduction {
 public:
  // out[i] = final(merge(inputs[0][i], ..., inputs[k-1][i])) for i < num_elements.
  DirectReduction(MergeOp merge_op, FinalOp final_op, DataType dtype,
                  std::vector<const void*> inputs, int64_t num_elements, void* output,
                  int64_t divisor);
  struct Segment {
    std::vector<const void*> inputs;
    void* output;
  };
  // segments[s].output[i] = final(merge(segments[s].inputs[..][i])) for
  // i < num_elements; a segment of one input and final_op kId is a copy.
  DirectReduction(MergeOp merge_op, FinalOp final_op, DataType dtype,
                  std::vector<Segment> segments, int64_t num_elements, int64_t divisor);
  DirectReduction(const DirectReduction&) = delete;
  DirectReduction& operator=(const DirectReduction&) = delete;

  int64_t num_chunks() const { return num_chunks_; }
  // Takes and reduces chunks until none is left to take (chunks that other
  // threads took may still be running when it returns).
  int64_t Work();  // returns how many chunks this call took
  // True once every chunk has been reduced or skipped.
  bool Done() const { return finished_.load(std::memory_order_acquire) == num_chunks_; }
  // Returns once Done(): spins briefly (a chunk is a few microseconds), then
  // yields, then sleeps.
  void WaitDone();
  // Chunks not yet taken are skipped; status() becomes `status` (the first
  // abort wins). Chunks being reduced finish.
  void Abort(const absl::Status& status);
  absl::Status status() const;

 private:
  const MergeOp merge_op_;
  const FinalOp final_op_;
  const DataType dtype_;
  const std::vector<Segment> segments_;
  const int64_t num_elements_;  // per segment
  const int64_t divisor_;
  int64_t chunk_elements_ = 0;
  int64_t chunks_per_segment_ = 0;
  int64_t num_chunks_ = 0;

  std::atomic<int64_t> next_{0};      // the next chunk to take
  std::atomic<int64_t> finished_{0};  // chunks reduced or skipped
  std::atomic<bool> aborted_{false};
  mutable Mutex mu_;
  CondVar done_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_ALGORITHMS_ALL_REDUCE_DIRECT_H_
