// DynamicPartition and DynamicStitch on the CPU (graph/ops/array_ops.h).
// Both move whole slices (the elements after the index dims) and never look
// at element values, so, as the other array kernels (array_copy.h), one
// kernel serves every dtype and copies bytes. The shape rules are the ones
// the shape functions use (DynamicPartitionOutputShape,
// DynamicStitchOutputShape), so both reject the same inputs.
//
// Every index is checked before anything is written; a bad one is
// InvalidArgument naming the op, its position and its value.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

char* Bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

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

// Bytes of one slice: the elements of `shape` after its first `from` dims.
int64_t SliceBytes(const TensorShape& shape, int from, DataType dt) {
  int64_t n = 1;
  for (int i = from; i < shape.dims(); ++i) n *= shape.dim_size(i);
  return n * static_cast<int64_t>(DataTypeSize(dt));
}

// Output i gets, in row-major order of j, the slices data[j...] with
// partitions[j...] == i.
class DynamicPartitionOp : public OpKernel {
 public:
  explicit DynamicPartitionOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("num_partitions", &num_partitions_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& partitions = ctx.input(1);
    STRATA_RETURN_IF_ERROR(
        DynamicPartitionOutputShape(data.shape(), partitions.shape(), 0).status());
    // 1. Check every partition value and count each partition's slices.
    const int32_t* p = partitions.data<int32_t>();
    const int64_t n = partitions.NumElements();
    std::vector<int64_t> counts(static_cast<size_t>(num_partitions_), 0);
    for (int64_t j = 0; j < n; ++j) {
      if (p[j] < 0 || p[j] >= num_partitions_) {
        return absl::InvalidArgumentError(absl::StrCat("DynamicPartition partitions",
                                                       Position(j, partitions.shape()), " = ", p[j],
                                                       " is not in [0, ", num_partitions_, ")"));
      }
      ++counts[p[j]];
    }
    // 2. Allocate the outputs.
    std::vector<char*> next(counts.size());
    for (int i = 0; i < num_partitions_; ++i) {
      STRATA_ASSIGN_OR_RETURN(
          PartialTensorShape shape,
          DynamicPartitionOutputShape(data.shape(), partitions.shape(), counts[i]));
      STRATA_ASSIGN_OR_RETURN(TensorShape full, shape.AsTensorShape());
      Tensor* out;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(i, full, &out));
      next[i] = Bytes(*out);
    }
    // 3. Copy each slice to the end of its partition.
    const int64_t slice = SliceBytes(data.shape(), partitions.dims(), data.dtype());
    if (slice == 0) return absl::OkStatus();
    const char* src = Bytes(data);
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(next[p[j]], src + j * slice, static_cast<size_t>(slice));
      next[p[j]] += slice;
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_partitions_ = 0;
};

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

// merged[indices[m][i...], ...] = data[m][i..., ...], later m and later
// positions winning; rows no index names are zeros (TensorFlow leaves them
// uninitialized).
class DynamicStitchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = num_inputs() / 2;
    // 1. Shapes: each data[m] is indices[m]'s shape + one slice shape.
    std::vector<PartialTensorShape> index_shapes, data_shapes;
    for (int m = 0; m < n; ++m) {
      index_shapes.push_back(ctx.input(m).shape());
      data_shapes.push_back(ctx.input(n + m).shape());
    }
    STRATA_RETURN_IF_ERROR(DynamicStitchOutputShape(index_shapes, data_shapes, 0).status());
    // 2. Indices: none negative; the largest sets merged's rows. int32
    // indices keep the rows below 2^31.
    int64_t rows = 0;
    int max_m = 0;
    for (int m = 0; m < n; ++m) {
      const Tensor& idx = ctx.input(m);
      const int32_t* v = idx.data<int32_t>();
      for (int64_t i = 0; i < idx.NumElements(); ++i) {
        if (v[i] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("DynamicStitch indices[", m, "]",
                                                         Position(i, idx.shape()), " = ", v[i],
                                                         " is negative"));
        }
        if (int64_t{v[i]} + 1 > rows) {
          rows = int64_t{v[i]} + 1;
          max_m = m;
        }
      }
    }
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape merged_p,
                            DynamicStitchOutputShape(index_shapes, data_shapes, rows));
    // 3. A huge index must not become a huge allocation.
    const int64_t slice = SliceBytes(ctx.input(n).shape(), ctx.input(0).dims(), input_type(n));
    std::string what;
    const int64_t max_bytes = MaxOutputBytes(ctx.allocator(), &what);
    if (slice > 0 && rows > max_bytes / slice) {
      return absl::InvalidArgumentError(
          absl::StrCat("DynamicStitch: the largest index, ", rows - 1, " in indices[", max_m,
                       "], would make merged ", DataTypeString(input_type(n)), " ",
                       merged_p.DebugString(), " larger than ", what, " (", max_bytes, " bytes)"));
    }
    STRATA_ASSIGN_OR_RETURN(TensorShape merged_shape, merged_p.AsTensorShape());
    // 4. Zeros, then every slice at its row in input order.
    Tensor* merged;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, merged_shape, &merged));
    if (slice == 0 || rows == 0) return absl::OkStatus();
    char* dst = Bytes(*merged);
    std::memset(dst, 0, static_cast<size_t>(rows * slice));
    for (int m = 0; m < n; ++m) {
      const Tensor& idx = ctx.input(m);
      const int32_t* v = idx.data<int32_t>();
      const char* src = Bytes(ctx.input(n + m));
      for (int64_t i = 0; i < idx.NumElements(); ++i) {
        std::memcpy(dst + v[i] * slice, src + i * slice, static_cast<size_t>(slice));
      }
    }
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("DynamicPartition").Device(kDeviceCpu), DynamicPartitionOp);
STRATA_REGISTER_KERNEL(KernelBuilder("DynamicStitch").Device(kDeviceCpu), DynamicStitchOp);

}  // namespace
}  // namespace strata
