#include "kernels/partition_checks.h"

#include <unistd.h>

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"

namespace strata {
namespace {

// "[1,2]": the multi-index of flat position `flat` in `shape` (a scalar's is "").
std::string Position(int64_t flat, const TensorShape& shape) {
  if (shape.dims() == 0) return "";
  std::vector<int64_t> idx(shape.dims());
  for (int i = shape.dims() - 1; i >= 0; --i) {
    idx[i] = flat % shape.dim_size(i);
    flat /= shape.dim_size(i);
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

// The most bytes an output from `alloc` may have: its limit if it has one,
// else the host's physical memory (more would swap at best; with memory
// overcommitted, the zero-fill would bring in the OOM killer).
int64_t MaxOutputBytes(Allocator* alloc, std::string* what) {
  const int64_t limit = alloc->GetStats().bytes_limit;
  if (limit > 0) {
    *what = absl::StrCat("the byte limit of allocator ", alloc->Name());
    return limit;
  }
  *what = "the host's physical memory";
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<int64_t>::max();
  return pages > std::numeric_limits<int64_t>::max() / page ? std::numeric_limits<int64_t>::max()
                                                            : static_cast<int64_t>(pages) * page;
}

}  // namespace

int64_t SliceBytes(const TensorShape& shape, int from, DataType dt) {
  int64_t n = 1;
  for (int i = from; i < shape.dims(); ++i) n *= shape.dim_size(i);
  return n * static_cast<int64_t>(DataTypeSize(dt));
}

absl::StatusOr<std::vector<int64_t>> CountPartitions(const Tensor& partitions,
                                                     int64_t num_partitions) {
  const int32_t* p = partitions.data<int32_t>();
  std::vector<int64_t> counts(static_cast<size_t>(num_partitions), 0);
  for (int64_t j = 0; j < partitions.NumElements(); ++j) {
    if (p[j] < 0 || p[j] >= num_partitions) {
      return absl::InvalidArgumentError(absl::StrCat("DynamicPartition partitions",
                                                     Position(j, partitions.shape()), " = ", p[j],
                                                     " is not in [0, ", num_partitions, ")"));
    }
    ++counts[p[j]];
  }
  return counts;
}

absl::StatusOr<TensorShape> StitchedShape(absl::Span<const Tensor> indices,
                                          absl::Span<const Tensor> data, Allocator* alloc) {
  // 1. Shapes: each data[m] is indices[m]'s shape + one slice shape.
  std::vector<PartialTensorShape> index_shapes, data_shapes;
  for (size_t m = 0; m < indices.size(); ++m) {
    index_shapes.push_back(indices[m].shape());
    data_shapes.push_back(data[m].shape());
  }
  STRATA_RETURN_IF_ERROR(DynamicStitchOutputShape(index_shapes, data_shapes, 0).status());
  // 2. Indices: none negative; the largest sets merged's rows. int32 indices
  // keep the rows below 2^31.
  int64_t rows = 0;
  size_t max_m = 0;
  for (size_t m = 0; m < indices.size(); ++m) {
    const int32_t* v = indices[m].data<int32_t>();
    for (int64_t i = 0; i < indices[m].NumElements(); ++i) {
      if (v[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("DynamicStitch indices[", m, "]",
                                                       Position(i, indices[m].shape()), " = ", v[i],
                                                       " is negative"));
      }
      if (int64_t{v[i]} + 1 > rows) {
        rows = int64_t{v[i]} + 1;
        max_m = m;
      }
    }
  }
  STRATA_ASSIGN_OR_RETURN(PartialTensorShape merged,
                          DynamicStitchOutputShape(index_shapes, data_shapes, rows));
  // 3. A huge index must not become a huge allocation.
  if (!data.empty()) {
    const DataType dt = data[0].dtype();
    const int64_t slice = SliceBytes(data[0].shape(), indices[0].dims(), dt);
    std::string what;
    const int64_t max_bytes = MaxOutputBytes(alloc, &what);
    if (slice > 0 && rows > max_bytes / slice) {
      return absl::InvalidArgumentError(
          absl::StrCat("DynamicStitch: the largest index, ", rows - 1, " in indices[", max_m,
                       "], would make merged ", DataTypeString(dt), " ", merged.DebugString(),
                       " larger than ", what, " (", max_bytes, " bytes)"));
    }
  }
  return merged.AsTensorShape();
}

}  // namespace strata
