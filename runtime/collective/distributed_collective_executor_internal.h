// DistributedCollectiveExecutor's own types, shared by its two sources
// (distributed_collective_executor.cc: instances, lanes, failures;
// distributed_collective_runs.cc: each collective's run). Not for other
// users.
#ifndef STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_INTERNAL_H_
#define STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_INTERNAL_H_

#include <cstdint>
#include <memory>

#include "graph/tensor.h"
#include "graph/types.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/distributed_collective_executor.h"

namespace strata {
namespace distributed_collective_internal {

inline constexpr uint32_t kDescriptorMagic = 0x53434431;  // "SCD1"
inline constexpr int kMaxDims = 8;

}  // namespace distributed_collective_internal

// Plain old data with no padding holes that could differ between workers'
// copies: every worker builds it the same way, and a peer's copy is only
// compared and printed (never trusted as a size).
struct DistributedCollectiveExecutor::Descriptor {
  uint32_t magic = distributed_collective_internal::kDescriptorMagic;
  int32_t type = 0;  // broadcast sides both as kBroadcastSend
  int32_t dtype = 0;
  int32_t merge_op = 0;
  int32_t final_op = 0;
  int32_t group_size = 0;
  int32_t rank = 0;        // of the shape
  int32_t has_sender = 0;  // broadcast: this worker holds the sender (not compared)
  int64_t dims[distributed_collective_internal::kMaxDims] = {};
  char hint[16] = {};
};

struct DistributedCollectiveExecutor::AllReduceJob {
  std::unique_ptr<CollectiveAlgorithm> alg;
  const void* in = nullptr;  // the algorithm's input: a participant's, or local_sum
  Tensor local_sum;          // the local inputs' sum, when there are several
  Tensor out;
  bool ordered = false;      // runs in the workers' agreed order (AllReduceShm)
  bool divide = false;       // Div by the global group size after the sum
  DataType dtype = DT_INVALID;
  int64_t num_elements = 0;
  int group_size = 0;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_DISTRIBUTED_COLLECTIVE_EXECUTOR_INTERNAL_H_
