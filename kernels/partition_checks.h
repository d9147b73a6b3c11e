// The checks and sizes the CPU and GPU kernels of DynamicPartition and
// DynamicStitch share (kernels/cpu/partition_kernels.cc,
// kernels/gpu/partition_kernels.cc), so that both reject the same inputs with
// the same messages. Indices and partitions are int32 tensors in host memory
// (where int32 lives on every device).
//
//   STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> counts, CountPartitions(partitions, 3));
//
// Thread-safety: stateless functions.
#ifndef STRATA_KERNELS_PARTITION_CHECKS_H_
#define STRATA_KERNELS_PARTITION_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/allocator.h"
#include "graph/tensor.h"

namespace strata {

// Bytes of one slice: the elements of `shape` after its first `from` dims.
int64_t SliceBytes(const TensorShape& shape, int from, DataType dt);

// The number of slices each of `num_partitions` partitions gets; InvalidArgument
// naming the position and value of the first partition outside
// [0, num_partitions).
absl::StatusOr<std::vector<int64_t>> CountPartitions(const Tensor& partitions,
                                                     int64_t num_partitions);

// DynamicStitch's merged shape for `indices` and `data` (as many of each):
// the shapes must agree (DynamicStitchOutputShape), no index may be negative,
// and merged may not exceed the byte limit of `alloc` (or the host's
// physical memory where it has none): a huge index must not become a huge
// allocation. InvalidArgument naming the culprit otherwise.
absl::StatusOr<TensorShape> StitchedShape(absl::Span<const Tensor> indices,
                                          absl::Span<const Tensor> data, Allocator* alloc);

}  // namespace strata

#endif  // STRATA_KERNELS_PARTITION_CHECKS_H_
